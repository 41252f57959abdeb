//! What `omr digest` makes of retrieved payloads: opened with the key directory's seal key,
//! written to `--out DIR`, printed as text or JSON.

use std::path::Path;

use anyhow::Context;
use base64::Engine;
use omr_client::keydir::KeyDir;
use omr_client::{Letter, Received, SealKey};
use serde_json::json;

use crate::ui;

/// The key directory's seal key; `None` (with a warning) for a directory made before sealed
/// payloads, whose sealed messages then cannot be opened.
pub fn seal_key(dir: &KeyDir) -> anyhow::Result<Option<SealKey>> {
    if let Some(seal) = dir.seal_key_if_any()? {
        return Ok(Some(seal));
    }
    eprintln!(
        "warning: {} has no seal.key (made before sealed payloads): sealed messages cannot be opened",
        dir.path().display()
    );
    Ok(None)
}

/// With `--out DIR`, write each readable payload (opened, or posted unsealed) to DIR/INDEX.bin.
pub fn write_payloads(out: Option<&Path>, letters: &[Received]) -> anyhow::Result<()> {
    let Some(out) = out else {
        return Ok(());
    };
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    for m in letters {
        let Some(bytes) = m.letter.bytes() else {
            continue;
        };
        let path = out.join(format!("{}.bin", m.index));
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// One retrieved message as text: index, size, a preview of the payload; a payload posted
/// unsealed is marked, one that cannot be opened says so instead.
pub fn print_message(m: &Received) {
    match &m.letter {
        Letter::Opened(b) => println!("  #{:<8} {:>5} B  {}", m.index, b.len(), ui::preview(b)),
        Letter::Plain(b) => println!(
            "  #{:<8} {:>5} B  {}  [unsealed: anyone could read it]",
            m.index,
            b.len(),
            ui::preview(b)
        ),
        Letter::Unopenable => println!(
            "  #{:<8} {:>5} B  [sealed, and this key cannot open it: a false positive of detection, or a forgery]",
            m.index, m.board_bytes
        ),
    }
}

/// One retrieved message as JSON: `sealed` (was it), `opened` (could this key read it), and the
/// readable payload (`payload_base64`, `text`; null when it cannot be opened).
pub fn message_json(m: &Received) -> serde_json::Value {
    let bytes = m.letter.bytes();
    json!({
        "index": m.index,
        "bytes": bytes.map_or(m.board_bytes, <[u8]>::len),
        "board_bytes": m.board_bytes,
        "sealed": m.letter.was_sealed(),
        "opened": matches!(m.letter, Letter::Opened(_)),
        "payload_base64": bytes.map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
        "text": bytes.and_then(|b| std::str::from_utf8(b).ok()),
    })
}
