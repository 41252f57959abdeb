//! What a recipient retrieves ([`Inbox`]) and follows ([`InboxListener`]). The work is the
//! SDK's: `Client::retrieve`, `omr_client::mailbox` (open the letters, remember and fetch the
//! attachments), `Client::wait_for_news`; this turns it into records.
//!
//! Commit on delivery: a retrieval does not move the key directory's state. Its [`Inbox`]
//! carries a receipt (the state it started from and the state after it), and
//! [`acknowledge`] saves the new state once the caller has kept the messages. A retrieval
//! cancelled, failed, or finished and never acknowledged changes nothing: the next returns the
//! same messages. A follower acknowledges each inbox when its listener returns.

use std::sync::PoisonError;

use omr_client::keydir::DigestState;
use omr_client::mailbox::{self, AttachmentOutcome, AttachmentStatus};
use omr_client::{Follow, Letter, Received, Retrieval, FOLLOW_RETRY};
use serde::{Deserialize, Serialize};

use crate::error::{OmrError, Result};
use crate::keys::KeyDirectory;

/// How [`Attachment::status`] starts for one a later call gets.
const WAITING: &str = "waiting";

/// A message retrieved for the recipient.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ReceivedMessage {
    /// Its board index.
    pub index: u64,
    /// The payload as sent: opened when it was sealed, as posted when it was not; `None` when
    /// it is sealed and this key cannot open it (a false positive of detection, or a forgery).
    pub payload: Option<Vec<u8>>,
    /// Whether it was sealed (posted unsealed, anyone could read it).
    pub sealed: bool,
    /// Whether this key opened it.
    pub opened: bool,
    /// Its length on the board (sealed: 50 bytes more than the payload, 86 with an attachment).
    pub board_bytes: u64,
    /// Whether its letter names an attachment (it comes in [`Inbox::attachments`] of this or
    /// a later call).
    pub has_attachment: bool,
}

impl From<&Received> for ReceivedMessage {
    fn from(m: &Received) -> Self {
        ReceivedMessage {
            index: m.index,
            payload: m.letter.bytes().map(<[u8]>::to_vec),
            sealed: m.letter.was_sealed(),
            opened: matches!(m.letter, Letter::Opened(_)),
            board_bytes: m.board_bytes as u64,
            has_attachment: m.attachment.is_some(),
        }
    }
}

/// What became of an attachment in this call.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Attachment {
    /// Its message's board index.
    pub index: u64,
    /// Its length as sent.
    pub bytes: u64,
    /// The attachment, when it was got this call.
    pub data: Option<Vec<u8>>,
    /// `fetched`, `waiting (…why…)` (a later call gets it), or `failed: …` (it is not what its
    /// letter names; dropped).
    pub status: String,
}

impl From<AttachmentOutcome> for Attachment {
    fn from(o: AttachmentOutcome) -> Self {
        let (data, status) = match o.status {
            AttachmentStatus::Fetched { data, .. } => (Some(data), "fetched".to_string()),
            AttachmentStatus::Waiting(why) => (None, format!("{WAITING} ({why})")),
            AttachmentStatus::Failed(why) => (None, format!("failed: {why}")),
        };
        Attachment {
            index: o.index,
            bytes: o.bytes as u64,
            data,
            status,
        }
    }
}

/// What one retrieval found.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Inbox {
    /// Messages not retrieved before, in board order.
    pub messages: Vec<ReceivedMessage>,
    /// Attachments got, waiting or failed this call.
    pub attachments: Vec<Attachment>,
    /// omr-light-v1: messages detected whose payloads come on a later call.
    pub pending_payloads: Vec<u64>,
    /// Messages whose attachments are still to fetch.
    pub pending_attachments: Vec<u64>,
    /// Board range examined: every message for the key in `[from_index, to_index)` has now
    /// been retrieved (but for the pending ones).
    pub from_index: u64,
    pub to_index: u64,
    pub board_head: u64,
    /// Board messages the server has not detected for the key yet.
    pub lag: u64,
    /// Why the attachments could not be fetched this call (the server or the network; a
    /// later call tries again), when that happened.
    pub attachment_error: Option<String>,
    /// What `KeyDirectory.acknowledge` saves (opaque): until this inbox is acknowledged the
    /// key directory's state stays where it was, and the next retrieval returns these
    /// messages again.
    pub receipt: Vec<u8>,
}

impl Inbox {
    /// Whether a follower should hear of it (`fresh_pending`: it holds a pending payload not
    /// announced before).
    fn has_news(&self, fresh_pending: bool) -> bool {
        !self.messages.is_empty()
            || self
                .attachments
                .iter()
                .any(|a| !a.status.starts_with(WAITING))
            || fresh_pending
    }
}

#[uniffi::export]
impl KeyDirectory {
    /// Say that `inbox` (from [`crate::Client::retrieve`]) has been kept: the directory's state
    /// moves past its messages, and the next retrieval starts after them. Until then each
    /// retrieval returns them again, so a crash or a cancel between retrieving and keeping
    /// loses nothing. Acknowledging the same inbox again does nothing. An inbox retrieved
    /// before another one that was acknowledged first is refused (`stale_inbox`) and saves
    /// nothing: the next retrieval returns what it held beyond that one.
    ///
    /// ```python
    /// inbox = await client.retrieve(keys)
    /// store(inbox.messages)          # the application's own, durable
    /// keys.acknowledge(inbox)
    /// ```
    pub fn acknowledge(&self, inbox: Inbox) -> Result<()> {
        acknowledge(self, &inbox.receipt)
    }
}

/// An inbox's receipt: the key directory's state before its retrieval and after.
#[derive(Serialize, Deserialize)]
struct Receipt {
    before: DigestState,
    after: DigestState,
}

/// Save the state the retrieval of an inbox with `receipt` reached, if the key directory is
/// still where that retrieval started (acknowledging it again does nothing); see
/// [`crate::KeyDirectory::acknowledge`].
pub(crate) fn acknowledge(keys: &KeyDirectory, receipt: &[u8]) -> Result<()> {
    let receipt: Receipt = serde_json::from_slice(receipt).map_err(|e| {
        OmrError::invalid(
            "bad_receipt",
            format!("this inbox's receipt is not one a retrieval made: {e}"),
        )
    })?;
    let _saving = keys.saving.lock().unwrap_or_else(PoisonError::into_inner);
    let reg = keys.require_registration()?;
    let now = keys.dir.digest_state(&reg)?;
    if now == receipt.after {
        return Ok(());
    }
    if receipt.after.key_id != reg.key_id {
        return Err(OmrError::invalid(
            "stale_inbox",
            format!(
                "this inbox is for key {}, and {} is now registered as key {}",
                receipt.after.key_id,
                keys.dir.path().display(),
                reg.key_id
            ),
        ));
    }
    if now != receipt.before {
        return Err(OmrError::invalid(
            "stale_inbox",
            format!(
                "{} has moved since this inbox was retrieved (another inbox was acknowledged \
                 first): nothing saved; what this one holds beyond that comes again on the \
                 next retrieval",
                keys.dir.path().display()
            ),
        ));
    }
    keys.dir.save_digest_state(&receipt.after)?;
    Ok(())
}

/// Receives what [`crate::Client::follow`] finds.
#[uniffi::export(callback_interface)]
pub trait InboxListener: Send + Sync {
    /// A retrieval found new messages, attachments, or messages whose payloads are pending.
    /// Return false to stop following. Raising ends the follow with the error.
    fn on_inbox(&self, inbox: Inbox) -> Result<bool, OmrError>;
}

/// One retrieval for `keys`; the key directory's state is saved by [`acknowledge`].
pub(crate) async fn retrieve(
    client: &omr_client::Client,
    keys: &KeyDirectory,
    fetch_attachments: bool,
) -> Result<Inbox> {
    let _one_at_a_time = keys.retrieving.lock().await;
    let dir = &keys.dir;
    let reg = keys.require_registration()?;
    let secret = dir.secret()?;
    // A directory made before sealed payloads: sealed ones stay closed.
    let seal = dir.seal_key_if_any()?;
    let before = dir.digest_state(&reg)?;
    let mut state = before.clone();
    let got: Retrieval = client.retrieve(&secret, &reg, &mut state, None).await?;
    let letters = mailbox::open_letters(seal.as_ref(), &got);
    let mut attachments: Vec<Attachment> =
        (mailbox::arrived_attachments(seal.as_ref(), &mut state, &got, &letters).into_iter())
            .map(Attachment::from)
            .collect();
    mailbox::remember_attachments(&mut state, &got, &letters);
    let mut attachment_error = None;
    if let (true, Some(seal)) = (fetch_attachments, &seal) {
        // On a failure the state keeps its attachments pending: the letters are returned now.
        let mut after = state.clone();
        match (client.fetch_attachments(seal, &mut after, got.board_head, None)).await {
            Ok(outcomes) => {
                attachments.extend(outcomes.into_iter().map(Attachment::from));
                state = after;
            }
            Err(e) => attachment_error = Some(e.to_string()),
        }
    }
    let pending_attachments = state.pending_attachments.iter().map(|p| p.index).collect();
    let receipt = Receipt {
        before,
        after: state,
    };
    Ok(Inbox {
        messages: letters.iter().map(ReceivedMessage::from).collect(),
        attachments,
        pending_payloads: got.pending.clone(),
        pending_attachments,
        from_index: got.from,
        to_index: got.to,
        board_head: got.board_head,
        lag: got.lag,
        attachment_error,
        receipt: serde_json::to_vec(&receipt).expect("a digest state serializes"),
    })
}

/// Follow `keys` until the listener says stop (or raises); see [`crate::Client::follow`].
/// Each inbox is acknowledged when the listener returns (whether it says go on or stop); one
/// it raised on is not, and comes again on the next retrieval.
pub(crate) async fn follow(
    client: &omr_client::Client,
    keys: &KeyDirectory,
    listener: Box<dyn InboxListener>,
) -> Result<()> {
    let reg = keys.require_registration()?;
    let secret = keys.dir.secret()?;
    let mut follow = Follow::new(keys.dir.digest_state(&reg)?.next_from, []);
    // The first round retrieves at once: what arrived while nobody followed.
    let mut cursor = 0;
    loop {
        match retrieve(client, keys, true).await {
            Ok(inbox) => {
                let fresh = follow.retrieved(inbox.to_index, cursor, &inbox.pending_payloads);
                let receipt = inbox.receipt.clone();
                let go_on = if inbox.has_news(!fresh.is_empty()) {
                    // The listener may take its time (a database write, a queue with a
                    // consumer behind it): the runtime's other tasks move to other threads.
                    tokio::task::block_in_place(|| listener.on_inbox(inbox))?
                } else {
                    true
                };
                match acknowledge(keys, &receipt) {
                    // Another acknowledged first: the next round starts from its state.
                    Err(e) if e.code() == "stale_inbox" => {}
                    r => r?,
                }
                if !go_on {
                    return Ok(());
                }
            }
            Err(e) if is_transient(&e) => tokio::time::sleep(FOLLOW_RETRY).await,
            Err(e) => return Err(e),
        }
        cursor = follow.news(client, &secret, &reg, |_| {}).await?;
    }
}

fn is_transient(e: &OmrError) -> bool {
    matches!(
        e,
        OmrError::Unavailable {
            retryable: true,
            ..
        } | OmrError::Refused {
            retryable: true,
            ..
        }
    )
}
