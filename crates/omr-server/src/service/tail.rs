//! The board's tail in memory: the newest messages, encoded as a board read serves them, so that
//! readers near the head (every online light recipient polls there once a second) are answered
//! without a statement of the store. A read from the store costs omrd more than twice the CPU of
//! a request that reads nothing, most of it the hand-over to the store's connection thread and
//! back (docs/benchmarks.md, "Polling from the board's tail").
//!
//! Consistency: the tail is one run of consecutive messages ending at a head read in the same
//! statement, so a page cut from it skips nothing, and its `head` is a head the board had. It is
//! read again from the store when a group commit of this process happened since (so a reader
//! that heard a post's acknowledgement sees it), or when it is older than
//! `board_read_cache_ms` (what another process on the same store posted). A reader further back
//! than the tail goes to the store, and so does one asking for attachments.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use omr_api::http::{BoardMessage, BoardPage};
use omr_store::{Store, StoreError};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_store::StoredMessage;

/// Messages the tail keeps at most: four times the SDK's default tail read (256), so that a
/// recipient a few polls behind is still answered from memory; ≈ 4 MiB on omr-light-v1.
pub const TAIL_MESSAGES: usize = 1024;

/// The tail and when it was read; one store read refreshes it for every waiting reader.
#[derive(Debug, Default)]
pub struct BoardTail {
    state: tokio::sync::Mutex<Tail>,
}

#[derive(Debug, Default)]
struct Tail {
    /// Messages `first .. end`, in order.
    messages: VecDeque<BoardMessage>,
    first: u64,
    end: u64,
    /// The board head the last read saw.
    head: u64,
    /// Whether it was read at all.
    read: bool,
    /// When it was last read up to the head it saw, and the ingestor's commit count just before.
    complete: Option<(Instant, u64)>,
}

impl BoardTail {
    /// At most `limit` messages from `from`, with the head, when the tail holds `from` (or
    /// `from` is past its end): read again first unless it was read within `max_age` and no
    /// commit (`commits`, the ingestor's count now) happened since. `None`: `from` is further
    /// back than the tail, ask the store. `keep` bounds the messages kept (below
    /// [`TAIL_MESSAGES`] when the board retains fewer).
    pub async fn page(
        &self,
        store: &Store,
        (commits, max_age, keep): (u64, Duration, usize),
        from: u64,
        limit: u32,
    ) -> Result<Option<BoardPage>, StoreError> {
        let mut tail = self.state.lock().await;
        // A reader behind the tail stays behind it after a refresh (the tail only moves on).
        if tail.read && from < tail.first {
            return Ok(None);
        }
        let fresh =
            (tail.complete).is_some_and(|(at, seen)| seen == commits && at.elapsed() < max_age);
        if !fresh {
            tail.refresh(store, commits, keep).await?;
        }
        // Short of the head (more than `keep` posted between its two reads): the store answers.
        if from < tail.first || tail.complete.is_none() {
            return Ok(None);
        }
        let skip = tail.messages.partition_point(|m| m.index < from);
        let messages: Vec<BoardMessage> = (tail.messages.iter().skip(skip))
            .take(limit as usize)
            .cloned()
            .collect();
        Ok(Some(BoardPage {
            next: messages.last().map_or(from, |m| m.index + 1),
            messages,
            head: tail.head,
        }))
    }
}

impl Tail {
    /// Read what was committed since the last read (one statement), or the newest `keep`
    /// messages when that is more than `keep` (or on the first read: two statements).
    async fn refresh(
        &mut self,
        store: &Store,
        commits: u64,
        keep: usize,
    ) -> Result<(), StoreError> {
        let cap = u32::try_from(keep).unwrap_or(u32::MAX).max(1);
        let started = Instant::now();
        let from = match self.read {
            true => self.end,
            false => store.board_head().await?.saturating_sub(u64::from(cap)),
        };
        let (mut head, mut rows) = store.read_page(from, cap).await?;
        let end = rows.last().map_or(from, |m| m.index + 1);
        let mut continues = self.read && rows.first().is_none_or(|m| m.index == self.end);
        if end < head && rows.len() == cap as usize {
            (head, rows) = store
                .read_page(head.saturating_sub(u64::from(cap)), cap)
                .await?;
            continues = false;
        }
        if !continues {
            self.messages.clear();
            self.end = rows.first().map_or(head, |m| m.index);
        }
        self.end = rows.last().map_or(self.end, |m| m.index + 1);
        self.messages.extend(rows.into_iter().map(board_message));
        let excess = self.messages.len().saturating_sub(keep);
        self.messages.drain(..excess);
        self.first = self.messages.front().map_or(self.end, |m| m.index);
        self.head = head;
        self.read = true;
        self.complete = (self.end >= head).then_some((started, commits));
        Ok(())
    }
}

/// A stored message as a board read serves it.
pub(super) fn board_message(m: StoredMessage) -> BoardMessage {
    BoardMessage {
        index: m.index,
        clue: B64.encode(&m.clue),
        payload: B64.encode(&m.payload),
        received_ms: m.received_ms,
        attachment: None,
    }
}
