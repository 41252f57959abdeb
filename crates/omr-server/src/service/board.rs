//! The public board: messages (validated by the transport that decoded them) go to the group
//! commit and are counted once committed; a refused one is counted by its error code; reading
//! is a page of the board from an index.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::{BoardMessage, BoardPage};
use omr_api::ErrorCode;
use omr_store::{NewMessage, StoredMessage};

use super::ingest::IngestError;
use super::Service;
use crate::error::ServiceError;

/// Most board messages one read returns.
pub const MAX_READ: u32 = 1000;

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
    let first = svc.ingestor.submit(messages).await.map_err(|e| match e {
        IngestError::Closed => ServiceError::new(
            ErrorCode::Unavailable,
            "the server is shutting down; nothing was stored, retry",
        ),
        IngestError::Store(e) => ServiceError::internal("appending to the board", e),
    })?;
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

/// At most `limit` (1 ..= [`MAX_READ`], default all of them) board messages from `from`
/// (default 0), with the board head.
pub async fn read(
    svc: &Service,
    from: Option<u64>,
    limit: Option<u32>,
) -> Result<BoardPage, ServiceError> {
    let from = from.unwrap_or(0);
    let limit = limit.unwrap_or(MAX_READ);
    if limit == 0 || limit > MAX_READ {
        return Err(ServiceError::new(
            ErrorCode::MalformedQuery,
            format!("limit must be 1..={MAX_READ}"),
        ));
    }
    let head = svc.board_head().await?;
    let rows = (svc.store.read(from, limit).await)
        .map_err(|e| ServiceError::internal("reading the board", e))?;
    let next = rows.last().map(|m| m.index + 1).unwrap_or(from);
    Ok(BoardPage {
        messages: rows.into_iter().map(board_message).collect(),
        next,
        head,
    })
}

fn board_message(m: StoredMessage) -> BoardMessage {
    BoardMessage {
        index: m.index,
        clue: B64.encode(&m.clue),
        payload: B64.encode(&m.payload),
        received_ms: m.received_ms,
    }
}
