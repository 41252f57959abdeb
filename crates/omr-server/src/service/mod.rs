//! The service core: what omrd does for a request, whatever transport carried it. Each module
//! is plain async functions over [`Service`] returning [`ServiceError`](crate::error::ServiceError);
//! `http/` and `grpc/` adapt them to their wire and import nothing of each other.
//!
//! - `board` — posting (through the group commit, `ingest`) and reading the board;
//! - `registry` — a key registration's header check, then the key's validation and storing,
//!   and deletion; `auth` — tokens, the check every call on a key makes; `invites` — invite codes;
//! - `digests` — a digest for a range: planned from the stored epochs, assembled and encoded
//!   through the scheme, cached until the cursor moves;
//! - `status` — a key's status, waiting for it to move, and the stream of it (`key_state`:
//!   caught up, detecting, waiting, unassigned);
//! - `params` — what the server says about itself;
//! - `pir` — attachment epochs built and answered by PIR; `fetch` — omr-light-v1's payload
//!   fetch (batch PIR over every closed epoch).

pub mod auth;
pub mod board;
pub mod digests;
pub mod fetch;
pub mod ingest;
pub mod invites;
pub mod key_state;
pub mod params;
pub mod pir;
pub mod registry;
pub mod status;
pub mod tail;

use std::sync::Arc;

use omr_store::Store;

use crate::config::Config;
use crate::epochs::Epochs;
use crate::metrics::Metrics;
use crate::presence::Presence;
use crate::progress::KeyProgress;
use crate::scheme::Scheme;
use crate::set::Set;
use ingest::Ingestor;

/// What the service core works with: the configuration and its rules, the store, the group
/// commit, and the state requests share (presence, progress, PIR epochs, the digest cache).
#[derive(Debug)]
pub struct Service {
    pub config: Config,
    pub set: Set,
    pub scheme: Scheme,
    pub epochs: Epochs,
    pub store: Store,
    pub ingestor: Ingestor,
    pub metrics: Metrics,
    /// Which recipients are online (throttled writes to the store).
    pub presence: Presence,
    /// Each key's cursor as commits move it, for calls waiting for a key's next message.
    pub progress: Arc<KeyProgress>,
    /// Registrations and deletions, for the worker to list its keys again.
    pub roster: Arc<crate::roster::RosterChanges>,
    /// Attachment epochs built for PIR.
    pub pir: pir::PirEpochs,
    /// Digest keys and encoded digests, for both transports.
    pub digests: digests::DigestCache,
    /// omr-light-v1's payload fetch snapshots.
    pub fetch: fetch::Snapshots,
    /// The board's newest messages, for readers near the head.
    pub board_tail: tail::BoardTail,
    /// Key uploads in progress, through either transport (`max_concurrent_uploads`).
    pub uploads: Arc<tokio::sync::Semaphore>,
}

impl Service {
    /// The core over `store`, posting through `ingestor`; `progress` is shared with the worker.
    pub fn new(
        config: Config,
        set: Set,
        store: Store,
        ingestor: Ingestor,
        metrics: Metrics,
        progress: Arc<KeyProgress>,
    ) -> Service {
        Service {
            scheme: Scheme::of(set),
            epochs: Epochs::new(config.epoch_len, set),
            presence: Presence::new(&config),
            pir: pir::PirEpochs::new(config.pir_cached_epochs),
            digests: Default::default(),
            fetch: Default::default(),
            board_tail: Default::default(),
            uploads: Arc::new(tokio::sync::Semaphore::new(
                config.max_concurrent_uploads.max(1),
            )),
            config,
            set,
            store,
            ingestor,
            metrics,
            progress,
            roster: Arc::default(),
        }
    }

    /// What serving attachment epochs by PIR takes from this server.
    pub fn pir_serving(&self) -> pir::Serving {
        pir::Serving {
            store: self.store.clone(),
            set: self.set,
            epochs: self.epochs,
            max_attachment_bytes: self.config.attachment_limit(),
            retain_digest_messages: self.config.retain_digest_messages,
            metrics: self.metrics.pir.clone(),
        }
    }

    /// `key_id`'s recipient is here (an authorized digest, status or wait call), `asking` for
    /// messages its key has not reached (the key behind the board, or a call waiting for its
    /// cursor to move): on a scheme that detects in batches (omr-light-v1) that is an ask, and
    /// the worker detects the key's open batch once per ask; otherwise it is only seen
    /// ([`crate::presence`]).
    pub fn mark_seen(&self, key_id: &str, asking: bool) {
        if self.asks(asking) {
            self.presence.asked(&self.store, key_id);
        } else {
            self.presence.seen(&self.store, key_id);
        }
    }

    /// How often a waiting call, `asking` or not, marks its key again ([`Service::mark_seen`]).
    pub fn mark_every(&self, asking: bool) -> std::time::Duration {
        if self.asks(asking) {
            self.presence.ask_every()
        } else {
            self.presence.every()
        }
    }

    /// Whether a call `asking` for messages is an ask: on a scheme that detects in batches,
    /// whose open batch is detected for an online key only when its recipient asks.
    fn asks(&self, asking: bool) -> bool {
        asking && self.set.batch().is_some()
    }

    /// For a scheme that detects in batches (omr-light-v1): the board index whose arrival makes
    /// the open batch of a key detected up to `cursor` due for its next refresh (the next
    /// refresh mark, `light_refresh_messages`); `None` for a scheme that detects every message.
    pub fn refresh_at(&self, cursor: u64) -> Option<u64> {
        let every = self.config.light_refresh_messages;
        (self.set.batch()).map(|_| self.epochs.next_refresh(cursor, every))
    }

    /// Whether a call that finds a key detected up to `cursor` with the board at `head` asks
    /// for more ([`Service::mark_seen`]): the key is behind and, on a batch scheme, the board
    /// has reached its next refresh mark (an ask before it would be answered by nothing new).
    pub fn asks_at(&self, cursor: u64, head: u64) -> bool {
        head > cursor && self.refresh_at(cursor).is_none_or(|at| head >= at)
    }

    /// The board head from the board's tail in memory when `board_read_cache_ms` allows (read
    /// again within that bound, and after each of this process's commits), else from the store.
    pub async fn recent_board_head(&self) -> Result<u64, crate::error::ServiceError> {
        match board::head_from_tail(self).await? {
            Some(head) => Ok(head),
            None => self.board_head().await,
        }
    }

    /// The board head, as a service error when the store fails.
    pub async fn board_head(&self) -> Result<u64, crate::error::ServiceError> {
        (self.store.board_head().await)
            .map_err(|e| crate::error::ServiceError::internal("reading the board head", e))
    }
}
