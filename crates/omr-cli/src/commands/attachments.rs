//! `omr send --attach` and what `omr digest` does with attachments: letters that name one are
//! remembered in the digest state; with `--out DIR`, one attachment per closed epoch is fetched
//! by PIR each call (the server sees one fetch from the epoch, whatever the recipient holds
//! there) and written to DIR/INDEX.attachment; the rest wait for the next call. The fetching
//! and opening is the SDK's (`omr_client::mailbox`); this writes the files and reports.

use std::path::Path;

use anyhow::Context;
use omr_client::mailbox::{self, AttachmentOutcome, AttachmentStatus};
use omr_client::{Client, DigestState, Received, Retrieval, SealKey};
use serde_json::{json, Value};

use crate::ui::{self, Ui};

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

/// Write an outcome's attachment to `out`/INDEX.attachment when there is one and `out` is
/// given, and describe it.
fn report(o: AttachmentOutcome, out: Option<&Path>) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome {
        index: o.index,
        bytes: o.bytes,
        status: String::new(),
        file: None,
    };
    match (o.status, out) {
        (AttachmentStatus::Fetched { with_payload, .. }, None) if with_payload => {
            outcome.status = "fetched with its payload, not written (pass --out DIR)".into()
        }
        (AttachmentStatus::Fetched { data, with_payload }, Some(out)) => {
            std::fs::create_dir_all(out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let path = out.join(format!("{}.attachment", o.index));
            std::fs::write(&path, &data)
                .with_context(|| format!("cannot write {}", path.display()))?;
            outcome.bytes = data.len();
            outcome.status = match with_payload {
                true => "fetched with its payload".into(),
                false => "fetched".into(),
            };
            outcome.file = Some(path.display().to_string());
        }
        (AttachmentStatus::Fetched { .. }, None) => {
            outcome.status = "fetched, not written (pass --out DIR)".into()
        }
        (AttachmentStatus::Waiting(why), _) => outcome.status = format!("waiting ({why})"),
        (AttachmentStatus::Failed(why), _) => outcome.status = format!("failed: {why}"),
    }
    Ok(outcome)
}

/// omr-light-v1: the attachments that came by PIR in `got` (with their payloads, or for
/// letters of earlier calls pending in `state`), checked against their letters' references and
/// opened; written to `out`/INDEX.attachment when given.
pub fn arrived(
    seal: Option<&SealKey>,
    state: &mut DigestState,
    got: &Retrieval,
    letters: &[Received],
    out: Option<&Path>,
) -> anyhow::Result<Vec<Outcome>> {
    (mailbox::arrived_attachments(seal, state, got, letters).into_iter())
        .map(|o| report(o, out))
        .collect()
}

/// With `out`, fetch one pending attachment per closed epoch (board head `head`), write it,
/// and drop it from `state` (see `Client::fetch_attachments`).
pub async fn fetch(
    client: &Client,
    seal: Option<&SealKey>,
    state: &mut DigestState,
    out: Option<&Path>,
    head: u64,
    ui: &Ui,
) -> anyhow::Result<Vec<Outcome>> {
    let (Some(out), Some(seal)) = (out, seal) else {
        let status = "not fetched (pass --out DIR to fetch it by PIR once its epoch closes)";
        return Ok((state.pending_attachments.iter())
            .map(|p| Outcome {
                index: p.index,
                bytes: (p.bytes as usize).saturating_sub(omr_client::seal::SEAL_OVERHEAD),
                status: status.to_string(),
                file: None,
            })
            .collect());
    };
    if state.pending_attachments.is_empty() {
        return Ok(Vec::new());
    }
    let pb = ui.items("fetching attachments by PIR", 0, "fetches");
    let progress = Some(ui::progress(&pb));
    let fetched = client.fetch_attachments(seal, state, head, progress).await;
    pb.finish_and_clear();
    (fetched?.into_iter())
        .map(|o| report(o, Some(out)))
        .collect()
}
