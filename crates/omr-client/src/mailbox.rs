//! What a recipient makes of a [`Retrieval`]: its payloads opened with the seal key
//! ([`open_letters`]), the attachments its letters name remembered in the [`DigestState`]
//! ([`remember_attachments`]), those that came by PIR in the retrieval opened
//! ([`arrived_attachments`]: omr-light-v1, with their payloads or in their epoch's round), and
//! on the TFHE lanes the rest fetched by PIR once their epoch has closed
//! ([`Client::fetch_attachments`]: one per closed epoch per call, so the server sees one fetch
//! from an epoch whatever the recipient holds there).
//!
//! `omr digest` and the bindings (`omr-ffi`) both build on these; neither writes them again.
//! Nothing here writes a file: the caller keeps the bytes and saves the state.

use std::collections::BTreeMap;

use crate::client::{Client, Progress};
use crate::error::{Error, Result};
use crate::keydir::{DigestState, PendingAttachment};
use crate::retrieve::{Received, Retrieval};
use crate::seal::{self, Letter, SealKey, SEAL_OVERHEAD};

/// Open what `got` retrieved with `seal`; without one (a key directory made before sealed
/// payloads), unsealed payloads pass as [`Letter::Plain`] and sealed ones stay
/// [`Letter::Unopenable`].
pub fn open_letters(seal: Option<&SealKey>, got: &Retrieval) -> Vec<Received> {
    match seal {
        Some(k) => got.open(k),
        None => (got.messages.iter())
            .map(|m| Received {
                index: m.index,
                board_bytes: m.payload.len(),
                letter: match seal::is_sealed(&m.payload) {
                    true => Letter::Unopenable,
                    false => Letter::Plain(m.payload.clone()),
                },
                attachment: None,
            })
            .collect(),
    }
}

/// Remember in `state` the attachments that `letters` name, but for those that came with their
/// payloads (omr-light-v1: see [`arrived_attachments`]).
pub fn remember_attachments(state: &mut DigestState, got: &Retrieval, letters: &[Received]) {
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

/// What became of one attachment in a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentOutcome {
    /// Its message's board index.
    pub index: u64,
    /// Bytes of the attachment as sent (its sealed size less the seal).
    pub bytes: usize,
    pub status: AttachmentStatus,
}

/// Whether an attachment was got, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachmentStatus {
    /// Opened and checked against its letter's reference: the attachment as sent.
    Fetched {
        data: Vec<u8>,
        /// It came by PIR with its payload (omr-light-v1), not by a fetch of its own.
        with_payload: bool,
    },
    /// Not fetched this call; a later call fetches it (the text says when).
    Waiting(String),
    /// Fetched and refused (it is not what its letter names), or its reference is damaged: it
    /// is dropped from the state, since fetching it again would show the server that it failed.
    Failed(String),
}

impl AttachmentOutcome {
    fn new(p: &PendingAttachment, status: AttachmentStatus) -> Self {
        AttachmentOutcome {
            index: p.index,
            bytes: (p.bytes as usize).saturating_sub(SEAL_OVERHEAD),
            status,
        }
    }

    /// The attachment's bytes, when it was got.
    pub fn data(&self) -> Option<&[u8]> {
        match &self.status {
            AttachmentStatus::Fetched { data, .. } => Some(data),
            _ => None,
        }
    }
}

/// omr-light-v1: the attachments that came by PIR in `got`, checked against their letters'
/// references and opened with `seal`: with their payloads (the letters of this call), or for
/// letters of an earlier call, read from the board's tail while their epoch was open (their
/// references in `state`, from which they are dropped).
pub fn arrived_attachments(
    seal: Option<&SealKey>,
    state: &mut DigestState,
    got: &Retrieval,
    letters: &[Received],
) -> Vec<AttachmentOutcome> {
    let Some(seal) = seal else {
        return Vec::new();
    };
    let open = |sealed: &[u8], reference: &seal::AttachmentRef, with_payload: bool| match seal
        .open_attachment(sealed, reference)
    {
        Ok(data) => AttachmentStatus::Fetched { data, with_payload },
        Err(e) => AttachmentStatus::Failed(e.to_string()),
    };
    let mut outcomes = Vec::new();
    for m in letters {
        let (Some(sealed), Some(reference)) = (got.attachments.get(&m.index), &m.attachment) else {
            continue;
        };
        outcomes.push(AttachmentOutcome {
            index: m.index,
            bytes: (reference.len as usize).saturating_sub(SEAL_OVERHEAD),
            status: open(sealed, reference, true),
        });
    }
    state.pending_attachments.retain(|p| {
        let Some(sealed) = got.attachments.get(&p.index) else {
            return true;
        };
        let status = match p.reference() {
            Some(reference) => open(sealed, &reference, false),
            None => AttachmentStatus::Failed(
                "its reference in digest-state.json is damaged".to_string(),
            ),
        };
        outcomes.push(AttachmentOutcome::new(p, status));
        false
    });
    outcomes
}

impl Client {
    /// TFHE lanes: fetch by PIR one pending attachment of each closed epoch (board head
    /// `head`), open it with `seal`, and drop it from `state`; the others are reported
    /// [`AttachmentStatus::Waiting`] and stay. A fetched attachment that is not the one its
    /// letter names is reported [`AttachmentStatus::Failed`] and dropped too. `progress` sees
    /// `(fetches done, fetches this call)`. On omr-light-v1 every pending attachment is
    /// reported waiting: it comes in a retrieval ([`arrived_attachments`]).
    ///
    /// A failure of the server or the network ends the call with that error and leaves `state`
    /// as it was: the next call fetches the same attachments again.
    pub async fn fetch_attachments(
        &self,
        seal: &SealKey,
        state: &mut DigestState,
        head: u64,
        progress: Option<Progress>,
    ) -> Result<Vec<AttachmentOutcome>> {
        if state.pending_attachments.is_empty() {
            return Ok(Vec::new());
        }
        let params = self.params().await?;
        if params.param_set == crate::scheme::LIGHT_SET {
            // omr-light-v1: each comes in its epoch's one round of a retrieval
            // ([`arrived_attachments`]); a fetch of its own would tell the server the epoch
            // holds one.
            let why = "it comes with its epoch's PIR round, in a retrieval once the epoch closes";
            return Ok((state.pending_attachments.iter())
                .map(|p| AttachmentOutcome::new(p, AttachmentStatus::Waiting(why.into())))
                .collect());
        }
        let epoch_len = params.epoch_len.max(1);
        // The first pending attachment of each closed epoch is fetched this call.
        let mut first: BTreeMap<u64, u64> = BTreeMap::new();
        for p in &state.pending_attachments {
            let epoch = p.index / epoch_len;
            if (epoch + 1) * epoch_len <= head {
                first.entry(epoch).or_insert(p.index);
            }
        }
        let total = first.len() as u64;
        let mut outcomes = Vec::new();
        let mut done = Vec::new();
        let mut fetches = 0;
        for p in &state.pending_attachments {
            let epoch = p.index / epoch_len;
            let end = (epoch + 1) * epoch_len;
            let waiting = |why: String| AttachmentOutcome::new(p, AttachmentStatus::Waiting(why));
            if end > head {
                outcomes.push(waiting(format!(
                    "its epoch closes when the board reaches {end}"
                )));
                continue;
            }
            if first.get(&epoch) != Some(&p.index) {
                outcomes.push(waiting(
                    "one fetch per epoch per call: a later call fetches it".into(),
                ));
                continue;
            }
            let Some(reference) = p.reference() else {
                let why = "its reference in digest-state.json is damaged".to_string();
                outcomes.push(AttachmentOutcome::new(p, AttachmentStatus::Failed(why)));
                done.push(p.index);
                continue;
            };
            let got = self.fetch_attachment(seal, p.index, &reference, None).await;
            fetches += 1;
            if let Some(progress) = &progress {
                progress(fetches, total);
            }
            match got {
                Ok(data) => {
                    let status = AttachmentStatus::Fetched {
                        data,
                        with_payload: false,
                    };
                    outcomes.push(AttachmentOutcome::new(p, status));
                    done.push(p.index);
                }
                Err(Error::Rejected { code, .. }) if code == "epoch_open" => {
                    outcomes.push(waiting("its epoch is open".into()));
                }
                Err(e @ Error::Attachment { .. }) => {
                    let status = AttachmentStatus::Failed(e.to_string());
                    outcomes.push(AttachmentOutcome::new(p, status));
                    done.push(p.index);
                }
                Err(e) => return Err(e),
            }
        }
        state
            .pending_attachments
            .retain(|p| !done.contains(&p.index));
        Ok(outcomes)
    }
}
