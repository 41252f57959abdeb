//! The public board: a decoded message is checked against the server's [`Rules`] (parameter
//! set, payload, attachment, postage: [`check_message`]) before anything is queued; good ones go
//! to the group commit and are counted once committed ([`post`]); a refused one is counted by its
//! error code ([`rejected`]); [`read`] is a page of the board from an index (near the head, from
//! the tail this process keeps in memory: `tail.rs`).

use std::collections::HashMap;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{BoardMessage, BoardPage};
use omr_api::ErrorCode;
use omr_store::{Appended, NewMessage};

use super::ingest::IngestError;
use super::tail::{board_message, TAIL_MESSAGES};
use super::Service;
use crate::error::ServiceError;
use crate::set::Set;

/// Most board messages one read returns.
pub const MAX_READ: u32 = 1000;

/// Sealed attachment bytes past which a page read with its attachments ends (after the message
/// that passed it): 1 MiB, 1.4 MiB as the page's base64.
pub const MAX_PAGE_ATTACHMENT_BYTES: usize = 1 << 20;

/// What a posted message must satisfy: the server's parameter set, its postage (0: off) and
/// its largest attachment (0: none taken).
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub set: Set,
    pub postage_bits: u32,
    pub max_attachment_bytes: usize,
}

impl Rules {
    /// The rules of a running server.
    pub fn of(svc: &Service) -> Self {
        Rules {
            set: svc.set,
            postage_bits: svc.config.postage_bits,
            max_attachment_bytes: svc.config.attachment_limit(),
        }
    }
}

/// A message whose clue decoded under `rules.set` (the transport checked that), as stored
/// once its payload, attachment and postage stamp pass `rules`.
pub fn check_message(
    rules: Rules,
    clue: Vec<u8>,
    payload: Vec<u8>,
    attachment: Vec<u8>,
    nonce: Option<u64>,
) -> Result<NewMessage, ServiceError> {
    (rules.set.validate_payload(&payload)).map_err(|e| ServiceError::from_omr("payload", e))?;
    check_attachment(rules, &attachment)?;
    check_postage(rules, &clue, &payload, &attachment, nonce)?;
    Ok(NewMessage {
        clue,
        payload,
        attachment,
    })
}

/// An attachment no longer than `max_attachment_bytes`, and none when that is 0.
fn check_attachment(rules: Rules, attachment: &[u8]) -> Result<(), ServiceError> {
    let max = rules.max_attachment_bytes;
    if attachment.len() <= max {
        return Ok(());
    }
    let why = if max == 0 {
        "this server takes no attachments (max_attachment_bytes = 0)".to_string()
    } else {
        format!(
            "the attachment is {} bytes; this server takes at most {max} (max_attachment_bytes)",
            attachment.len()
        )
    };
    Err(ServiceError::new(ErrorCode::AttachmentTooLarge, why))
}

/// With `postage_bits` > 0, the message's stamp (over the clue bytes as stored): refused with
/// `postage_required` without a nonce, `postage_invalid` with one that falls short. One
/// SHA-256 of the message, before anything is queued.
fn check_postage(
    rules: Rules,
    clue: &[u8],
    payload: &[u8],
    attachment: &[u8],
    nonce: Option<u64>,
) -> Result<(), ServiceError> {
    if rules.postage_bits == 0 {
        return Ok(());
    }
    (rules.set.postage(clue, payload))
        .with_attachment(attachment)
        .check(rules.postage_bits, nonce)
        .map_err(|e| ServiceError::from_omr("message", e))
}

/// A clue of the server's parameter set.
pub fn check_params(set: Set, got: &str) -> Result<(), ServiceError> {
    if got != set.name() {
        return Err(ServiceError::new(
            ErrorCode::ParamSetMismatch,
            format!(
                "clue uses parameter set {got}; this server runs {}",
                set.name()
            ),
        ));
    }
    Ok(())
}

/// Queue `messages` (known good) for the group commit and count them once committed under
/// `route` (`single` or `batch`); the first index.
pub async fn post(
    svc: &Service,
    messages: Vec<NewMessage>,
    route: &str,
) -> Result<u64, ServiceError> {
    let count = messages.len() as u64;
    let bytes: usize = messages
        .iter()
        .map(|m| m.clue.len() + m.payload.len())
        .sum();
    let first = match svc.ingestor.submit(messages).await {
        Ok(Appended::Stored { first }) => first,
        Ok(Appended::Duplicate { position, index }) => {
            return Err(ServiceError::duplicate(position, count as usize, index))
        }
        Ok(Appended::Repeated { position, of }) => {
            return Err(ServiceError::new(
                ErrorCode::DuplicateMessage,
                format!(
                    "messages {of} and {position} of the batch are identical; nothing was \
                     appended"
                ),
            ))
        }
        Err(IngestError::Closed) => {
            return Err(ServiceError::new(
                ErrorCode::Unavailable,
                "the server is shutting down; nothing was stored, retry",
            ))
        }
        Err(IngestError::Store(e)) => {
            return Err(ServiceError::internal("appending to the board", e))
        }
    };
    (svc.metrics.messages_accepted)
        .with_label_values(&[route])
        .inc_by(count);
    svc.metrics.message_bytes.inc_by(bytes as u64);
    Ok(first)
}

/// Count a refused post by its error code, and return the error.
pub fn rejected(svc: &Service, err: ServiceError) -> ServiceError {
    (svc.metrics.messages_rejected)
        .with_label_values(&[err.code.as_str()])
        .inc();
    err
}

/// A page of the board to read: from an index, at most a number of messages.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    from: u64,
    limit: u32,
    attachments: bool,
}

impl Page {
    /// At most `limit` (1 ..= [`MAX_READ`], default [`MAX_READ`]) messages from `from` (default
    /// 0), with their attachments when `attachments`; refused before anything is read or
    /// charged.
    pub fn new(
        from: Option<u64>,
        limit: Option<u32>,
        attachments: Option<bool>,
    ) -> Result<Page, ServiceError> {
        let limit = limit.unwrap_or(MAX_READ);
        if limit == 0 || limit > MAX_READ {
            return Err(ServiceError::new(
                ErrorCode::MalformedQuery,
                format!("limit must be 1..={MAX_READ}"),
            ));
        }
        Ok(Page {
            from: from.unwrap_or(0),
            limit,
            attachments: attachments.unwrap_or(false),
        })
    }
}

/// The board messages of `page`, with the board head; with their attachments if it asks, the
/// page ending after the message whose attachment takes the page's past
/// [`MAX_PAGE_ATTACHMENT_BYTES`].
pub async fn read(svc: &Service, page: Page) -> Result<BoardPage, ServiceError> {
    let Page {
        from,
        limit,
        attachments,
    } = page;
    if !attachments {
        if let Some(page) = from_tail(svc, from, limit).await? {
            svc.metrics.board_reads.with_label_values(&["memory"]).inc();
            return Ok(page);
        }
    }
    svc.metrics.board_reads.with_label_values(&["store"]).inc();
    let (head, mut rows) = (svc.store.read_page(from, limit).await)
        .map_err(|e| ServiceError::internal("reading the board", e))?;
    let mut attached: HashMap<u64, Vec<u8>> = HashMap::new();
    if let (true, Some(last)) = (attachments, rows.last()) {
        attached = (svc.store.attachments(from, last.index + 1).await)
            .map_err(|e| ServiceError::internal("reading attachments", e))?
            .into_iter()
            .collect();
        // The page ends after the message whose attachment takes it to the bound; the rest
        // are neither encoded nor sent.
        let mut bytes = 0;
        let ends = rows.iter().position(|m| {
            bytes += attached.get(&m.index).map_or(0, Vec::len);
            bytes >= MAX_PAGE_ATTACHMENT_BYTES
        });
        rows.truncate(ends.map_or(rows.len(), |i| i + 1));
    }
    let next = rows.last().map(|m| m.index + 1).unwrap_or(from);
    let messages = (rows.into_iter())
        .map(|m| {
            let attachment = attached.remove(&m.index).map(|a| B64.encode(a));
            BoardMessage {
                attachment,
                ..board_message(m)
            }
        })
        .collect();
    Ok(BoardPage {
        messages,
        next,
        head,
    })
}

/// The board head as the board's tail in memory has it, when `board_read_cache_ms` allows.
pub(super) async fn head_from_tail(svc: &Service) -> Result<Option<u64>, ServiceError> {
    Ok(from_tail(svc, u64::MAX, 0).await?.map(|page| page.head))
}

/// The page from the board's tail in memory, when `board_read_cache_ms` allows one and the tail
/// holds `from`.
async fn from_tail(
    svc: &Service,
    from: u64,
    limit: u32,
) -> Result<Option<BoardPage>, ServiceError> {
    let max_age = Duration::from_millis(svc.config.board_read_cache_ms);
    // A board that keeps fewer messages than the tail would: the tail keeps no more.
    let keep = (svc.config.retain_messages).map_or(TAIL_MESSAGES, |r| {
        TAIL_MESSAGES.min(usize::try_from(r).unwrap_or(usize::MAX))
    });
    if max_age.is_zero() || keep == 0 {
        return Ok(None);
    }
    let bounds = (svc.ingestor.commits(), max_age, keep);
    (svc.board_tail.page(&svc.store, bounds, from, limit).await)
        .map_err(|e| ServiceError::internal("reading the board", e))
}
