//! Attachments by PIR: each closed epoch of the board (`epoch_len` indices, aligned like the
//! accumulators) becomes an `omr-pir` database whose record i is the attachment of board index
//! `epoch · epoch_len + i`, framed by `omr_pir::attachment` (its length, then its bytes,
//! zero-padded; none: all zeros). On omr-light-v1, whose digest carries no payloads, record i is
//! the whole message, payload then attachment, each framed (`frame_message`), and every epoch is
//! served whether or not the server takes attachments. Its hint is computed once per process
//! (the seed is chosen once per epoch in the store, so every process of a fleet serves the same
//! hint) and kept, with the database, for the `pir_cached_epochs` most recently used epochs.
//!
//! A query is answered on the blocking pool, one at a time: an answer already uses every core
//! (rayon), and this bounds the memory queries in flight hold.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use omr_api::ErrorCode;
use omr_pir::attachment::{frame, frame_message};
use omr_pir::{Database, Query, PIR_V1};
use tokio::sync::{OnceCell, Semaphore};

use omr_store::Store;

use crate::epochs::Epochs;
use crate::error::ServiceError;
use crate::metrics::PirMetrics;
use crate::set::Set;

/// What building and serving epochs takes from the running server (owned, so that a build can
/// outlive the request that started it).
#[derive(Debug, Clone)]
pub struct Serving {
    pub store: Store,
    /// The parameter set: what a record holds.
    pub set: Set,
    /// How the board is cut into epochs.
    pub epochs: Epochs,
    pub max_attachment_bytes: usize,
    pub retain_digest_messages: Option<u64>,
    pub metrics: PirMetrics,
}

/// The hint of closed epoch `epoch` (the same bytes for every client), building its database
/// the first time it is asked for. `admit` charges the caller's rate limit once the epoch is
/// known to be served: a refused request takes no token.
pub async fn hint(
    svc: &super::Service,
    epoch: u64,
    admit: impl FnOnce() -> Result<(), ServiceError>,
) -> Result<Bytes, ServiceError> {
    let at = svc.pir_serving();
    let range = served_range(&at, epoch).await?;
    admit()?;
    Ok(svc.pir.get(&at, epoch, range).await?.hint.clone())
}

/// The answer to `query` (its omr-pir encoding) against closed epoch `epoch`; `admit` as for
/// [`hint`]. The epoch is checked first: a query to an epoch not served is refused for that,
/// whatever it is.
pub async fn answer(
    svc: &super::Service,
    epoch: u64,
    query: &[u8],
    admit: impl FnOnce() -> Result<(), ServiceError>,
) -> Result<Vec<u8>, ServiceError> {
    let at = svc.pir_serving();
    let range = served_range(&at, epoch).await?;
    // Decoded before the charge: a query that does not decode takes no rate-limit token.
    let query = Query::from_bytes(query)
        .map_err(|e| ServiceError::new(ErrorCode::MalformedPirQuery, e.to_string()))?;
    admit()?;
    svc.pir.answer(&at, epoch, range, query).await
}

/// The most bytes a query to this server's epochs takes (its epochs' database shape).
pub fn max_query_bytes(svc: &super::Service) -> Result<usize, ServiceError> {
    let max = match svc.set {
        Set::Light(_) => svc.config.attachment_limit(),
        Set::Tfhe(_) => svc.config.attachment_limit().max(1),
    };
    let shape = (svc.epochs.pir_shape(svc.set, max))
        .map_err(|e| ServiceError::new(ErrorCode::UnknownEpoch, e))?;
    Ok(shape.query_bytes())
}

/// Count a hint or query request (HTTP or gRPC) by `route` and outcome (`ok` or the error
/// code).
pub fn count_request<T>(metrics: &PirMetrics, route: &str, result: &Result<T, ServiceError>) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    metrics.requests.with_label_values(&[route, outcome]).inc();
}

/// One epoch's database and its encoded hint.
#[derive(Debug)]
pub struct BuiltEpoch {
    pub epoch: u64,
    pub db: Database,
    pub hint: Bytes,
}

type Slot = Arc<OnceCell<Arc<BuiltEpoch>>>;

/// The built epochs of this process (most recently used last) and the one-answer-at-a-time
/// permit.
#[derive(Debug)]
pub struct PirEpochs {
    capacity: usize,
    slots: Mutex<VecDeque<(u64, Slot)>>,
    answering: Semaphore,
}

impl PirEpochs {
    pub fn new(capacity: usize) -> PirEpochs {
        PirEpochs {
            capacity: capacity.max(1),
            slots: Mutex::new(VecDeque::new()),
            answering: Semaphore::new(1),
        }
    }

    /// The slot of `epoch`, marked most recently used; the least recently used beyond the
    /// capacity are dropped (a request holding one keeps it alive until it is done).
    fn slot(&self, epoch: u64) -> Slot {
        let mut slots = self.slots.lock().expect("PIR epochs lock");
        let slot = match slots.iter().position(|(e, _)| *e == epoch) {
            Some(i) => slots.remove(i).expect("a slot at i").1,
            None => Slot::default(),
        };
        slots.push_back((epoch, slot.clone()));
        while slots.len() > self.capacity {
            slots.pop_front();
        }
        slot
    }

    /// Epoch `epoch`, whose board range [`served_range`] gave as `(start, end)`, built (at most
    /// one build per epoch at a time). The build runs in a task of its own: a request that gives
    /// up (its timeout) does not cancel it, and the next request finds it done or joins it.
    async fn get(
        &self,
        at: &Serving,
        epoch: u64,
        (start, end): (u64, u64),
    ) -> Result<Arc<BuiltEpoch>, ServiceError> {
        let slot = self.slot(epoch);
        if let Some(built) = slot.get() {
            return Ok(built.clone());
        }
        let at = at.clone();
        let task = tokio::spawn(async move {
            let init = || async {
                let started = Instant::now();
                let built = build(&at, epoch, start, end).await;
                let result = if built.is_ok() { "ok" } else { "error" };
                at.metrics.builds.with_label_values(&[result]).inc();
                (at.metrics.build_seconds).observe(started.elapsed().as_secs_f64());
                if let Ok(b) = &built {
                    tracing::info!(
                        epoch,
                        first_index = start,
                        end_index = end,
                        hint_bytes = b.hint.len(),
                        seconds = started.elapsed().as_secs_f64(),
                        "PIR database of an attachment epoch built"
                    );
                }
                built.map(Arc::new)
            };
            slot.get_or_try_init(init).await.cloned()
        });
        task.await
            .map_err(|e| ServiceError::internal("PIR build task", e))?
    }

    /// Answer `query` against epoch `epoch`, served over `range`.
    async fn answer(
        &self,
        at: &Serving,
        epoch: u64,
        range: (u64, u64),
        query: Query,
    ) -> Result<Vec<u8>, ServiceError> {
        let built = self.get(at, epoch, range).await?;
        let _permit = self
            .answering
            .acquire()
            .await
            .map_err(|_| ServiceError::new(ErrorCode::Unavailable, "shutting down"))?;
        let started = Instant::now();
        let answer = tokio::task::spawn_blocking(move || built.db.answer(&query))
            .await
            .map_err(|e| ServiceError::internal("PIR answer task", e))?
            .map_err(|e| ServiceError::new(ErrorCode::MalformedPirQuery, e.to_string()))?;
        (at.metrics.answer_seconds).observe(started.elapsed().as_secs_f64());
        Ok(answer.to_bytes())
    }
}

/// The board range of `epoch` if the server serves it.
async fn served_range(at: &Serving, epoch: u64) -> Result<(u64, u64), ServiceError> {
    let unknown = |why: String| ServiceError::new(ErrorCode::UnknownEpoch, why);
    if at.max_attachment_bytes == 0 && at.set.batch().is_none() {
        return Err(unknown(
            "this server takes no attachments (max_attachment_bytes = 0)".into(),
        ));
    }
    let (start, end) = (at.epochs.range(epoch))
        .ok_or_else(|| unknown(format!("epoch {epoch} is past any board")))?;
    let head = at
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    if start > head {
        return Err(unknown(format!(
            "epoch {epoch} holds board indices {start}..{end} and the board is at {head}: it \
             has not begun"
        )));
    }
    if end > head {
        return Err(ServiceError::new(
            ErrorCode::EpochOpen,
            format!(
                "epoch {epoch} holds board indices {start}..{end} and the board is at {head}: \
                 it closes when the board reaches {end}"
            ),
        ));
    }
    if end <= at.epochs.retired_below(at.retain_digest_messages, head) {
        return Err(unknown(format!(
            "epoch {epoch} (board indices {start}..{end}) was deleted by retention \
             (retain_digest_messages)"
        )));
    }
    Ok((start, end))
}

async fn build(at: &Serving, epoch: u64, start: u64, end: u64) -> Result<BuiltEpoch, ServiceError> {
    let shape = (at.epochs.pir_shape(at.set, at.max_attachment_bytes))
        .map_err(|e| ServiceError::internal("PIR shape", e))?;
    let attachments = (at.store.attachments(start, end).await)
        .map_err(|e| ServiceError::internal("reading an epoch's attachments", e))?;
    let records = match at.set {
        Set::Tfhe(_) => (attachments.into_iter())
            .map(|(index, bytes)| (index, frame(&bytes)))
            .collect(),
        Set::Light(_) => message_records(&at.store, start, end, attachments).await?,
    };
    let seed = (at.store.pir_seed(epoch, rand::random()).await)
        .map_err(|e| ServiceError::internal("the epoch's PIR seed", e))?;
    tokio::task::spawn_blocking(move || -> Result<BuiltEpoch, String> {
        let mut db = Database::new(&PIR_V1, shape).map_err(|e| e.to_string())?;
        for (index, record) in records {
            db.set_record((index - start) as usize, &record)
                .map_err(|e| format!("record of board index {index}: {e}"))?;
        }
        let hint = Bytes::from(db.preprocess(seed).to_bytes());
        Ok(BuiltEpoch { epoch, db, hint })
    })
    .await
    .map_err(|e| ServiceError::internal("PIR build task", e))?
    .map_err(|e| ServiceError::internal("building an epoch's PIR database", e))
}

/// The records of the board's messages in `[start, end)`: every message, its payload and its
/// attachment (from `attachments`; none: empty) framed (the board has every index of a closed
/// epoch that retention kept). An omr-light-v1 epoch's PIR database, and the payload fetch's
/// snapshot (no attachments), are made of these.
pub(super) async fn message_records(
    store: &Store,
    start: u64,
    end: u64,
    attachments: Vec<(u64, Vec<u8>)>,
) -> Result<Vec<(u64, Vec<u8>)>, ServiceError> {
    let mut attachments: std::collections::HashMap<u64, Vec<u8>> =
        attachments.into_iter().collect();
    let mut records = Vec::with_capacity((end - start) as usize);
    let mut next = start;
    while next < end {
        let page = (store.read(next, (end - next).min(1 << 12) as u32).await)
            .map_err(|e| ServiceError::internal("reading the board's messages", e))?;
        let Some(last) = page.last().map(|m| m.index) else {
            break;
        };
        for m in page.into_iter().filter(|m| m.index < end) {
            let attachment = attachments.remove(&m.index).unwrap_or_default();
            records.push((m.index, frame_message(&m.payload, &attachment)));
        }
        next = last + 1;
    }
    Ok(records)
}
