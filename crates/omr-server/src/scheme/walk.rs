//! How the worker walks the board for a scheme: [`Walk`], and its two strategies. [`PerMessage`]
//! detects each message once and folds it into the key's state, any run of messages a job;
//! [`Batched`] is a [`BatchScheme`]'s: fixed batches, each detected whole from its first
//! message, the work every key shares done once per batch and one pass serving many keys. A
//! scheme names its walk (`DetectionScheme::Walk`); the worker asks the walk what to do, never
//! which scheme it serves.

use omr_core::OmrError;
use omr_store::StoredMessage;

use super::{BatchScheme, DetectionScheme};
use crate::epochs::Epochs;

/// What a key's next job detects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// The messages from the key's cursor on (at most the walk's job limit), folded into its
    /// state so far.
    Continue,
    /// The batch `[first, first + count)`, detected whole from its first message into a new
    /// state that replaces the key's state for the batch.
    Batch { first: u64, count: usize },
}

/// How a turn fills the pool with keys served together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// Keys at one batch and reach, in one pass over its shared work: at most `max_keys`
    /// (`None`: the worker's default).
    ByBatch { max_keys: Option<usize> },
    /// Keys side by side, each message on a thread, until every thread has one.
    ByThreads,
}

/// How the worker walks the board for scheme `S`: everything the worker's turns, plans and
/// jobs ask that depends on how the scheme detects.
pub trait Walk<S: DetectionScheme>: Send + Sync + 'static {
    /// Messages one job detects at most, `detect_batch` being the configured run.
    fn job_limit(scheme: &S, detect_batch: usize) -> usize;

    /// The board index a key's detection may reach with the board at `head`, `open` when its
    /// online recipient asked for the open batch since it was last detected, `refresh_every`
    /// being `light_refresh_messages`.
    fn reach(scheme: &S, epochs: Epochs, head: u64, open: bool, refresh_every: u64) -> u64;

    /// The next job of a key whose next message to detect is `cursor`, detecting nothing at or
    /// past `reach`; `None` when it has nothing below `reach`.
    fn span(scheme: &S, epochs: Epochs, cursor: u64, reach: u64) -> Option<Span>;

    /// The group of a key whose next message is `cursor`: keys served together in one pass are
    /// of one group.
    fn group_of(scheme: &S, cursor: u64) -> u64;

    /// How a turn fills the pool.
    fn grouping(scheme: &S) -> Grouping;

    /// Whether a key's turn ends after each of its jobs that ends an epoch, so that keys behind
    /// go through the board batch by batch together and each batch's shared work is prepared
    /// once for all of them (otherwise a turn runs until the key detected a load's worth).
    fn yields_each_epoch() -> bool;

    /// Whether an online key's open batch is detected again up to refresh marks as its
    /// recipient asks (`light_refresh_messages` applies).
    fn refreshes_open_batches() -> bool;

    /// Whether the batch `[first, first + count)` is still prepared, so that a job need not
    /// read its messages (a cheap check before reading anything). Asked only of a walk whose
    /// [`span`](Self::span) gives batches: by default nothing is prepared.
    fn has_prepared(scheme: &S, first: u64, count: usize) -> bool {
        let _ = (scheme, first, count);
        false
    }

    /// `key`'s state for the batch `[first, first + count)` from its preparation, `None` when
    /// it is no longer held (the job then reads the batch). Runs on a detection pool. By
    /// default nothing is prepared.
    fn detect_prepared(scheme: &S, key: &S::Key, first: u64, count: usize) -> Option<S::State> {
        let _ = (scheme, key, first, count);
        None
    }

    /// The states of `keys` for the batch `[first, first + count)`, in their order, from
    /// `messages` (the batch's, from its first index) or, when `messages` is empty, from its
    /// preparation (`None` when it is no longer held). Runs on a detection pool. By default one
    /// key after another from `messages`, nothing being prepared.
    fn detect_many(
        scheme: &S,
        keys: &[&S::Key],
        first: u64,
        count: usize,
        messages: &[StoredMessage],
    ) -> Result<Option<Vec<S::State>>, OmrError> {
        let _ = count;
        if messages.is_empty() {
            return Ok(None);
        }
        (keys.iter())
            .map(|k| scheme.detect_and_fold(k, S::new_state(k, first), messages))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// The walk of a scheme that detects each message on its own: a job is any run of messages
/// after the key's cursor, folded into its state; nothing is prepared, no batch is shared.
#[derive(Debug, Clone, Copy)]
pub struct PerMessage;

impl<S: DetectionScheme> Walk<S> for PerMessage {
    fn job_limit(_: &S, detect_batch: usize) -> usize {
        detect_batch.max(1)
    }

    fn reach(_: &S, _: Epochs, _: u64, _: bool, _: u64) -> u64 {
        u64::MAX
    }

    fn span(_: &S, _: Epochs, cursor: u64, reach: u64) -> Option<Span> {
        (cursor < reach).then_some(Span::Continue)
    }

    fn group_of(_: &S, _: u64) -> u64 {
        0
    }

    fn grouping(_: &S) -> Grouping {
        Grouping::ByThreads
    }

    fn yields_each_epoch() -> bool {
        false
    }

    fn refreshes_open_batches() -> bool {
        false
    }
}

/// The walk of a [`BatchScheme`]: batches of its size, one per epoch, each detected whole from
/// its first message. A key that is not online detects full batches only; an online key whose
/// recipient asked detects its open batch up to the last refresh mark at or below the head
/// (the batch is detected again from its first message, so a pass over the key is spread over
/// `refresh_every` new messages, and every key refreshed to one mark shares its preparation).
#[derive(Debug, Clone, Copy)]
pub struct Batched;

impl<S: BatchScheme> Walk<S> for Batched {
    fn job_limit(scheme: &S, _: usize) -> usize {
        scheme.batch_messages()
    }

    fn reach(scheme: &S, epochs: Epochs, head: u64, open: bool, refresh_every: u64) -> u64 {
        let d = scheme.batch_messages() as u64;
        if open {
            epochs.refresh_mark(head, refresh_every)
        } else {
            head / d * d
        }
    }

    /// The batch so far of `cursor`'s epoch, up to `reach`: the board has no gaps below its
    /// head, so it is `[start, end)`.
    fn span(_: &S, epochs: Epochs, cursor: u64, reach: u64) -> Option<Span> {
        let first = epochs.start_of(cursor);
        let end = reach.min(epochs.next_boundary(first));
        (end > cursor).then(|| Span::Batch {
            first,
            count: (end - first) as usize,
        })
    }

    fn group_of(scheme: &S, cursor: u64) -> u64 {
        cursor / scheme.batch_messages() as u64
    }

    fn grouping(scheme: &S) -> Grouping {
        Grouping::ByBatch {
            max_keys: scheme.keys_per_pass(),
        }
    }

    fn yields_each_epoch() -> bool {
        true
    }

    fn refreshes_open_batches() -> bool {
        true
    }

    fn has_prepared(scheme: &S, first: u64, count: usize) -> bool {
        scheme.has_prepared(first, count)
    }

    fn detect_prepared(scheme: &S, key: &S::Key, first: u64, count: usize) -> Option<S::State> {
        scheme.detect_prepared(key, first, count)
    }

    fn detect_many(
        scheme: &S,
        keys: &[&S::Key],
        first: u64,
        count: usize,
        messages: &[StoredMessage],
    ) -> Result<Option<Vec<S::State>>, OmrError> {
        scheme.detect_many(keys, first, count, messages)
    }
}
