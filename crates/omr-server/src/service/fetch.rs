//! omr-light-v1's payload fetch (`omr_light::fetch`): a recipient uploads its fetch key once,
//! then fetches the payloads of its messages in rounds of a fixed shape (75 buckets, up to 50
//! records) from a snapshot, without the server learning which.
//!
//! Two snapshots are served:
//! - **closed** (`GET /v1/fetch`): every closed, retained epoch. Built when a request finds that
//!   an epoch has closed since the last one, transformed within `light_fetch_prepared_mb`, and
//!   kept with the one before it, so that a round made just before an epoch closed is still
//!   answered.
//! - **open** (`GET /v1/fetch/open`): the open epoch's messages so far, so that a payload is
//!   fetchable seconds after its post on a board of any rate. Rebuilt when a request needs a
//!   message past it (by default: the board head), at most once per
//!   `light_fetch_open_rebuild_ms`; a request that comes sooner waits for that rebuild. It
//!   holds at most one epoch (4,096 payloads), so a rebuild costs tens of milliseconds, and a
//!   busy board costs one per interval however many recipients ask. The last few are kept, so
//!   a round made against one a moment old is still answered.
//!
//! Rounds are answered one at a time on the blocking pool (each already uses every core).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use omr_api::http::FetchRange;
use omr_api::ErrorCode;
use omr_light::fetch::wire::answers_to_bytes;
use omr_light::fetch::{FetchDb, FetchKey, FetchQuery, BUCKETS, RECORDS_PER_FETCH};
use omr_light::LightParams;
use tokio::sync::Semaphore;

use super::Service;
use crate::error::ServiceError;
use crate::set::Set;

/// A built snapshot.
#[derive(Debug)]
pub struct Snapshot {
    pub db: FetchDb,
    /// When it was built.
    pub built: Instant,
}

impl Snapshot {
    /// The board indices it holds.
    pub fn range(&self) -> (u64, u64) {
        self.db.geometry().range
    }

    /// What a client needs of it to make a round against it.
    pub fn fetch_range(&self) -> FetchRange {
        let g = self.db.geometry();
        FetchRange {
            start: g.range.0,
            end: g.range.1,
            rows: g.rows as u32,
            buckets: BUCKETS as u32,
            records_per_round: RECORDS_PER_FETCH as u32,
        }
    }
}

/// Closed snapshots kept: the newest and the one before it.
const CLOSED_KEPT: usize = 2;

/// Open-epoch snapshots kept: the newest and the two before it (a round takes a second or two
/// and may queue behind others while the snapshot is rebuilt).
const OPEN_KEPT: usize = 3;

/// The snapshots of this process (the last [`CLOSED_KEPT`] closed, the last [`OPEN_KEPT`] open)
/// and the permits.
#[derive(Debug)]
pub struct Snapshots {
    kept: Mutex<Vec<Arc<Snapshot>>>,
    open: Mutex<Vec<Arc<Snapshot>>>,
    building: tokio::sync::Mutex<()>,
    open_building: tokio::sync::Mutex<()>,
    answering: Semaphore,
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots {
            kept: Mutex::new(Vec::new()),
            open: Mutex::new(Vec::new()),
            building: tokio::sync::Mutex::new(()),
            open_building: tokio::sync::Mutex::new(()),
            answering: Semaphore::new(1),
        }
    }
}

fn light(svc: &Service) -> Result<&'static LightParams, ServiceError> {
    match svc.set {
        Set::Light(p) => Ok(p),
        Set::Tfhe(p) => Err(ServiceError::new(
            ErrorCode::UnknownRoute,
            format!(
                "this server runs {}: the payload fetch is omr-light-v1's (TFHE digests carry \
                 their payloads)",
                p.name
            ),
        )),
    }
}

/// The range a snapshot serves now: every closed epoch that retention keeps.
async fn served_range(svc: &Service) -> Result<(u64, u64), ServiceError> {
    let head = svc.board_head().await?;
    let len = svc.epochs.size();
    let end = svc.epochs.start_of(head);
    let start = svc
        .epochs
        .retired_below(svc.config.retain_digest_messages, head);
    if start >= end {
        return Err(ServiceError::new(
            ErrorCode::UnknownEpoch,
            format!(
                "no epoch to fetch from: the board is at {head} and epochs close every {len} \
                 messages"
            ),
        ));
    }
    Ok((start, end))
}

/// The snapshot of the range served now, built if an epoch closed since the last.
pub async fn current(svc: &Service) -> Result<Arc<Snapshot>, ServiceError> {
    light(svc)?;
    let range = served_range(svc).await?;
    if let Some(s) = find(svc, range) {
        return Ok(s);
    }
    let _one_build = svc.fetch.building.lock().await;
    if let Some(s) = find(svc, range) {
        return Ok(s);
    }
    let snapshot = build(svc, range, "closed").await?;
    keep(&svc.fetch.kept, &snapshot, CLOSED_KEPT);
    Ok(snapshot)
}

/// Add `snapshot` to `list`, keeping the newest `most`.
fn keep(list: &Mutex<Vec<Arc<Snapshot>>>, snapshot: &Arc<Snapshot>, most: usize) {
    let mut list = list.lock().expect("snapshots");
    list.push(snapshot.clone());
    let drop = list.len().saturating_sub(most);
    list.drain(..drop);
}

/// The snapshot of the board messages `range`, transformed within `light_fetch_prepared_mb`.
async fn build(
    svc: &Service,
    range: (u64, u64),
    kind: &'static str,
) -> Result<Arc<Snapshot>, ServiceError> {
    let started = Instant::now();
    let records = super::pir::message_records(&svc.store, range.0, range.1, Vec::new()).await?;
    let cap = svc.config.light_fetch_prepared_mb << 20;
    let snapshot = tokio::task::spawn_blocking(move || {
        let mut db = FetchDb::new(records, BUCKETS);
        if db.prepared_bytes_if_prepared() <= cap {
            db.prepare();
        }
        Snapshot {
            db,
            built: Instant::now(),
        }
    })
    .await
    .map_err(|e| ServiceError::internal("building the fetch snapshot", e))?;
    let seconds = started.elapsed().as_secs_f64();
    if kind == "closed" {
        tracing::info!(
            first_index = range.0,
            end_index = range.1,
            rows = snapshot.db.geometry().rows,
            prepared_mib = snapshot.db.prepared_bytes() >> 20,
            seconds,
            "omr-light-v1 payload fetch snapshot built"
        );
    } else {
        tracing::debug!(
            first_index = range.0,
            end_index = range.1,
            rows = snapshot.db.geometry().rows,
            seconds,
            "omr-light-v1 open-epoch fetch snapshot built"
        );
    }
    svc.metrics
        .pir
        .fetch_snapshot_seconds
        .with_label_values(&[kind])
        .observe(seconds);
    Ok(Arc::new(snapshot))
}

/// The open epoch's snapshot, holding at least the messages before `min_end` (default: the
/// board head; at most the head), rebuilt when it does not, at most once per
/// `light_fetch_open_rebuild_ms` (a request that comes sooner waits for the rebuild).
pub async fn open(svc: &Service, min_end: Option<u64>) -> Result<Arc<Snapshot>, ServiceError> {
    light(svc)?;
    let head = svc.board_head().await?;
    let start = svc.epochs.start_of(head);
    if head == start {
        return Err(ServiceError::new(
            ErrorCode::UnknownEpoch,
            format!(
                "the open epoch holds no message yet: the board is at {head}, an epoch \
                 boundary (GET /v1/fetch serves the closed epochs)"
            ),
        ));
    }
    let want = min_end.unwrap_or(head).clamp(start + 1, head);
    let covers = |svc: &Service| {
        let open = svc.fetch.open.lock().expect("snapshots");
        (open.iter().rev())
            .find(|s| s.range().0 == start && s.range().1 >= want)
            .cloned()
    };
    if let Some(s) = covers(svc) {
        return Ok(s);
    }
    let _one_build = svc.fetch.open_building.lock().await;
    if let Some(s) = covers(svc) {
        return Ok(s);
    }
    let last = (svc.fetch.open.lock().expect("snapshots").last()).map(|s| s.built);
    if let Some(built) = last {
        let interval = Duration::from_millis(svc.config.light_fetch_open_rebuild_ms);
        tokio::time::sleep(interval.saturating_sub(built.elapsed())).await;
    }
    // The board may have moved on, past this epoch's end too: the snapshot holds this epoch's
    // messages up to the head now (records never change once committed).
    let end = svc.board_head().await?.min(start + svc.epochs.size());
    let snapshot = build(svc, (start, end), "open").await?;
    // An earlier epoch's snapshots: that epoch is the closed snapshot's now.
    (svc.fetch.open.lock().expect("snapshots")).retain(|s| s.range().0 == start);
    keep(&svc.fetch.open, &snapshot, OPEN_KEPT);
    Ok(snapshot)
}

/// The snapshot of `range` among `list`'s.
fn find_in(list: &Mutex<Vec<Arc<Snapshot>>>, range: (u64, u64)) -> Option<Arc<Snapshot>> {
    let list = list.lock().expect("snapshots");
    list.iter().find(|s| s.range() == range).cloned()
}

fn find(svc: &Service, range: (u64, u64)) -> Option<Arc<Snapshot>> {
    find_in(&svc.fetch.kept, range)
}

/// Store `bytes` as the fetch key of `key_id` (whose token `authorization` must carry), once it
/// decodes as an omr-light-v1 fetch key.
pub async fn put_key(
    svc: &Service,
    key_id: &str,
    authorization: Option<&str>,
    bytes: Vec<u8>,
) -> Result<(), ServiceError> {
    super::auth::authorize(&svc.store, key_id, authorization).await?;
    let p = light(svc)?;
    let (bytes, decoded) = tokio::task::spawn_blocking(move || {
        let r = FetchKey::from_bytes(&bytes).map(|(_, set)| set);
        (bytes, r)
    })
    .await
    .map_err(|e| ServiceError::internal("decoding a fetch key", e))?;
    let set = decoded.map_err(|e| {
        ServiceError::new(
            ErrorCode::InvalidFetchKey,
            format!("the fetch key does not decode: {e}"),
        )
    })?;
    if set.id != p.id {
        return Err(ServiceError::new(
            ErrorCode::InvalidFetchKey,
            format!(
                "the fetch key is for {}, this server runs {}",
                set.name, p.name
            ),
        ));
    }
    let stored = (svc.store.put_fetch_key(key_id, &bytes).await)
        .map_err(|e| ServiceError::internal("storing a fetch key", e))?;
    if !stored {
        return Err(ServiceError::unknown_key(key_id));
    }
    tracing::info!(%key_id, bytes = bytes.len(), "fetch key stored");
    Ok(())
}

/// The most bytes a round's query takes on this server (for the body limit).
pub fn max_query_bytes() -> usize {
    // A bucket of a 2^20-message snapshot: 3·2^20 / 75 records, 64 to a row.
    FetchQuery::max_encoded_len((3usize << 20).div_ceil(BUCKETS * 64) + 1, BUCKETS)
}

/// The answers to the round `query` (its encoding) of `key_id`; `admit` charges the rate limit
/// once the round is known to be answerable.
pub async fn answer(
    svc: &Service,
    key_id: &str,
    authorization: Option<&str>,
    query: &[u8],
    admit: impl FnOnce() -> Result<(), ServiceError>,
) -> Result<Vec<u8>, ServiceError> {
    super::auth::authorize(&svc.store, key_id, authorization).await?;
    let p = light(svc)?;
    let malformed = |why: String| ServiceError::new(ErrorCode::MalformedPirQuery, why);
    let (query, _) = FetchQuery::from_bytes(query, max_query_bytes())
        .map_err(|e| malformed(format!("the fetch query does not decode: {e}")))?;
    let kept = find(svc, query.range).or_else(|| find_in(&svc.fetch.open, query.range));
    let snapshot = match kept {
        Some(s) => s,
        // Not an epoch boundary: a round against an open-epoch snapshot no longer kept.
        None if !svc.epochs.is_boundary(query.range.1) => {
            return Err(ServiceError::new(
                ErrorCode::UnknownEpoch,
                format!(
                    "the fetch is for board indices {}..{}, an open-epoch snapshot this server \
                     no longer keeps (GET /v1/fetch/open, then make the round again)",
                    query.range.0, query.range.1
                ),
            ));
        }
        None => {
            let now = current(svc).await?;
            if now.range() != query.range {
                return Err(ServiceError::new(
                    ErrorCode::UnknownEpoch,
                    format!(
                        "the fetch is for board indices {}..{}; this server serves {}..{} now \
                         (GET /v1/fetch, then make the round again)",
                        query.range.0,
                        query.range.1,
                        now.range().0,
                        now.range().1
                    ),
                ));
            }
            now
        }
    };
    snapshot.db.check(&query).map_err(malformed)?;
    let key = (svc.store.fetch_key(key_id).await)
        .map_err(|e| ServiceError::internal("loading a fetch key", e))?
        .ok_or_else(|| {
            ServiceError::new(
                ErrorCode::NoFetchKey,
                format!("key {key_id} has no fetch key: PUT /v1/keys/{key_id}/fetch-key first"),
            )
        })?;
    admit()?;
    let _permit = (svc.fetch.answering.acquire().await)
        .map_err(|_| ServiceError::new(ErrorCode::Unavailable, "shutting down"))?;
    let started = Instant::now();
    let answers = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
        let (key, _) =
            FetchKey::from_bytes(&key).map_err(|e| format!("a stored fetch key: {e}"))?;
        let answers = snapshot.db.answer(&key, &query)?;
        Ok(answers_to_bytes(p, &answers))
    })
    .await
    .map_err(|e| ServiceError::internal("answering a fetch", e))?
    .map_err(|e| ServiceError::internal("answering a fetch", e))?;
    tracing::debug!(%key_id, seconds = started.elapsed().as_secs_f64(), "fetch round answered");
    Ok(answers)
}
