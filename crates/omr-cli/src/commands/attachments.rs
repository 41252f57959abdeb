//! `omr send --attach` and what `omr digest` does with attachments: letters that name one are
//! remembered in the digest state; with `--out DIR`, one attachment per closed epoch is fetched
//! by PIR each call (the server sees one fetch from the epoch, whatever the recipient holds
//! there) and written to DIR/INDEX.attachment; the rest wait for the next call.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use omr_client::{Client, DigestState, Error, PendingAttachment, Received, Retrieval, SealKey};
use serde_json::{json, Value};

use crate::ui::Ui;

/// Remember the attachments that `letters` name, but for those that came with their payloads
/// (omr-light-v1: see [`arrived`]).
pub fn collect(state: &mut DigestState, got: &Retrieval, letters: &[Received]) {
    for m in letters {
        if got.attachments.contains_key(&m.index) {
            continue;
        }
        if let Some(r) = &m.attachment {
            if !state.pending_attachments.iter().any(|p| p.index == m.index) {
                state
                    .pending_attachments
                    .push(PendingAttachment::new(m.index, r));
            }
        }
    }
}

/// omr-light-v1: the attachments that came by PIR with their payloads, checked against their
/// letters' references and opened; written to `out`/INDEX.attachment when given.
pub fn arrived(
    seal: Option<&SealKey>,
    got: &Retrieval,
    letters: &[Received],
    out: Option<&Path>,
) -> anyhow::Result<Vec<Outcome>> {
    let mut outcomes = Vec::new();
    for m in letters {
        let (Some(sealed), Some(reference), Some(seal)) =
            (got.attachments.get(&m.index), &m.attachment, seal)
        else {
            continue;
        };
        let mut outcome = Outcome {
            index: m.index,
            bytes: (reference.len as usize).saturating_sub(omr_client::seal::SEAL_OVERHEAD),
            status: "fetched with its payload".into(),
            file: None,
        };
        match (seal.open_attachment(sealed, reference), out) {
            (Err(e), _) => outcome.status = format!("failed: {e}"),
            (Ok(_), None) => {
                outcome.status = "fetched with its payload, not written (pass --out DIR)".into()
            }
            (Ok(bytes), Some(out)) => {
                std::fs::create_dir_all(out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
                let path = out.join(format!("{}.attachment", m.index));
                std::fs::write(&path, &bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                outcome.file = Some(path.display().to_string());
            }
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// What became of one pending attachment in this call.
pub struct Outcome {
    pub index: u64,
    /// Bytes of the attachment as sent (its sealed size less the seal).
    pub bytes: usize,
    /// `fetched` (written to `file`), `waiting (…)` (its epoch is open, or another of its epoch
    /// was fetched this call), `not fetched (…)` (no --out), or `failed: …`.
    pub status: String,
    pub file: Option<String>,
}

impl Outcome {
    pub fn json(&self) -> Value {
        json!({"index": self.index, "bytes": self.bytes, "status": self.status, "file": self.file})
    }

    pub fn print(&self) {
        match &self.file {
            Some(f) => println!(
                "  attachment of #{}: {} B, fetched by PIR: {f}",
                self.index, self.bytes
            ),
            None => println!(
                "  attachment of #{}: {} B, {}",
                self.index, self.bytes, self.status
            ),
        }
    }
}

/// With `out`, fetch one pending attachment per closed epoch (board head `head`), write it,
/// and drop it from `state`; a fetched attachment that is not the one its letter names is
/// reported and dropped too (fetching it again would show the server that it failed).
pub async fn fetch(
    client: &Client,
    seal: Option<&SealKey>,
    state: &mut DigestState,
    out: Option<&Path>,
    head: u64,
    ui: &Ui,
) -> anyhow::Result<Vec<Outcome>> {
    let outcome = |p: &PendingAttachment, status: &str| Outcome {
        index: p.index,
        bytes: (p.bytes as usize).saturating_sub(omr_client::seal::SEAL_OVERHEAD),
        status: status.to_string(),
        file: None,
    };
    let (Some(out), Some(seal)) = (out, seal) else {
        let status = "not fetched (pass --out DIR to fetch it by PIR once its epoch closes)";
        return Ok(state
            .pending_attachments
            .iter()
            .map(|p| outcome(p, status))
            .collect());
    };
    if state.pending_attachments.is_empty() {
        return Ok(Vec::new());
    }
    let epoch_len = client.params().await?.epoch_len.max(1);
    // The first pending attachment of each closed epoch is fetched this call.
    let mut first: BTreeMap<u64, u64> = BTreeMap::new();
    for p in &state.pending_attachments {
        let epoch = p.index / epoch_len;
        if (epoch + 1) * epoch_len <= head {
            first.entry(epoch).or_insert(p.index);
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let pb = ui.items("fetching attachments by PIR", first.len() as u64, "fetches");
    let mut outcomes = Vec::new();
    let mut done = Vec::new();
    for p in &state.pending_attachments {
        let epoch = p.index / epoch_len;
        let end = (epoch + 1) * epoch_len;
        if end > head {
            let status = format!("waiting (its epoch closes when the board reaches {end})");
            outcomes.push(outcome(p, &status));
            continue;
        }
        if first.get(&epoch) != Some(&p.index) {
            let status = "waiting (one fetch per epoch per call: a later call fetches it)";
            outcomes.push(outcome(p, status));
            continue;
        }
        let Some(reference) = p.reference() else {
            outcomes.push(outcome(
                p,
                "failed: its reference in digest-state.json is damaged",
            ));
            done.push(p.index);
            continue;
        };
        let got = client
            .fetch_attachment(seal, p.index, &reference, None)
            .await;
        pb.inc(1);
        match got {
            Ok(bytes) => {
                let path = out.join(format!("{}.attachment", p.index));
                std::fs::write(&path, &bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                outcomes.push(Outcome {
                    file: Some(path.display().to_string()),
                    bytes: bytes.len(),
                    ..outcome(p, "fetched")
                });
                done.push(p.index);
            }
            Err(Error::Rejected { code, .. }) if code == "epoch_open" => {
                outcomes.push(outcome(p, "waiting (its epoch is open)"));
            }
            Err(e @ Error::Attachment { .. }) => {
                outcomes.push(outcome(p, &format!("failed: {e}")));
                done.push(p.index);
            }
            Err(e) => {
                pb.finish_and_clear();
                return Err(e.into());
            }
        }
    }
    pb.finish_and_clear();
    state
        .pending_attachments
        .retain(|p| !done.contains(&p.index));
    Ok(outcomes)
}
