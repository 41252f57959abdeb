//! What `omr digest` remembers between calls for a registered key (`digest-state.json`):
//! where retrieval stands, the indices already seen, and what is still to fetch.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Registration;

/// Where `omr digest` stands for one registered key.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DigestState {
    /// The key these figures are for (a new registration starts over).
    pub key_id: String,
    /// Every pertinent message before this index has been retrieved.
    pub next_from: u64,
    /// Indices already retrieved in the epoch holding `next_from` (a digest starts at an epoch
    /// boundary, so the next one covers them again).
    pub seen: BTreeSet<u64>,
    /// Attachments named by retrieved letters and not fetched yet (one fetch per epoch per
    /// call: the rest wait for the next).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_attachments: Vec<PendingAttachment>,
    /// omr-light-v1: messages detected whose payloads have not been fetched by PIR yet (their
    /// epoch is open, or it held more than one round's queries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_payloads: Vec<u64>,
    /// omr-light-v1: the first epoch whose PIR round has not been made (every epoch the key's
    /// retrievals cover gets one round, whatever it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_pir_epoch: Option<u64>,
}

/// An attachment to fetch: its message's board index and its reference (sealed length,
/// SHA-256 in hex).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingAttachment {
    pub index: u64,
    pub bytes: u32,
    pub sha256: String,
}

impl PendingAttachment {
    pub fn new(index: u64, r: &crate::seal::AttachmentRef) -> Self {
        PendingAttachment {
            index,
            bytes: r.len,
            sha256: hex::encode(r.sha256),
        }
    }

    /// The reference again; `None` if the state file was edited into nonsense.
    pub fn reference(&self) -> Option<crate::seal::AttachmentRef> {
        let sha256 = hex::decode(&self.sha256).ok()?.try_into().ok()?;
        Some(crate::seal::AttachmentRef {
            len: self.bytes,
            sha256,
        })
    }
}

impl DigestState {
    /// A fresh state for a registration: nothing retrieved yet.
    pub fn new(reg: &Registration) -> Self {
        DigestState {
            key_id: reg.key_id.clone(),
            next_from: reg.start_index,
            ..DigestState::default()
        }
    }
}
