//! A key's digest for a range: the sum of its stored epoch states from the epoch holding `from`
//! up to its cursor (at most M messages; longer ranges are paged), encoded for transport by the
//! scheme. Never re-runs detection; encoded digests are cached until the cursor moves. Both
//! transports serve [`get`] (HTTP `GET /v1/digests/{key_id}`, gRPC `GetDigest`).
//!
//! A client polling its whole digest asks the same question again and again: the last answer
//! for each key is kept in memory with what authorizes it, and served again with no store read
//! while the key's cursor has not moved (the worker of this process, and on PostgreSQL every
//! worker, announces each commit through `progress`) and for at most [`answers::MAX_AGE`] (what a
//! key deleted through another process, or an announcement lost, may go unseen here).

mod answers;

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use omr_api::ErrorCode;

use super::Service;
use crate::error::ServiceError;
use crate::scheme::{DetectionScheme, Scheme};

/// Most cached encoded digests (each ≈ 166 KB for omr-v1, k̄ = 50).
const DIGEST_CACHE_ENTRIES: usize = 1024;
/// Most cached digest keys.
const DIGEST_KEY_ENTRIES: usize = 4096;

/// (key id, range start, range end) of an encoded digest.
pub type DigestRange = (String, u64, u64);

/// Decoded digest keys by key id (of the running scheme's type), encoded digests by range (valid
/// until the cursor moves; `Bytes`, so that an answer shares the cached encoding), and each
/// key's last answer for its whole range.
#[derive(Debug, Default)]
pub struct DigestCache {
    keys: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
    encoded: Mutex<HashMap<DigestRange, Bytes>>,
    answers: answers::Answers,
}

/// A built digest and what it covers.
#[derive(Debug, Clone)]
pub struct BuiltDigest {
    pub bytes: Bytes,
    pub range_start: u64,
    pub range_end: u64,
    pub board_head: u64,
    pub lag: u64,
    pub next_from: Option<u64>,
    pub epoch: u64,
    /// The key's cursor: every message below it has been detected.
    pub detected_up_to: u64,
    /// omr-light-v1: where the key's next refresh comes ([`Service::refresh_at`]).
    pub refresh_at: Option<u64>,
}

/// The digest of `key_id` from `from` (up to `to`) for a caller presenting `authorization`
/// (its recipient, who is now online, and who asks for its open batch when its key is behind:
/// [`Service::mark_seen`]). `admit` charges the caller's rate limit (the transport
/// knows who the caller is), once the request is authorized: a refused request takes no token.
pub async fn get(
    svc: &Service,
    key_id: &str,
    authorization: Option<&str>,
    from: Option<u64>,
    to: Option<u64>,
    admit: impl FnOnce() -> Result<(), ServiceError>,
) -> Result<BuiltDigest, ServiceError> {
    let whole = from.is_none() && to.is_none();
    if let Some((meta, mut built)) = svc.digests.answers.answer(key_id).filter(|_| whole) {
        super::auth::authorize_with(&meta, authorization)?;
        admit()?;
        let head = svc.recent_board_head().await?.max(built.board_head);
        (built.board_head, built.lag) = (head, head.saturating_sub(meta.cursor));
        svc.metrics.digest_answers_kept.inc();
        svc.mark_seen(key_id, svc.asks_at(meta.cursor, head));
        return Ok(built);
    }
    // Subscribed before the key is read: a commit after the read is announced to it.
    let progress = whole.then(|| svc.progress.subscribe(key_id));
    let meta = super::auth::authorize(&svc.store, key_id, authorization).await?;
    admit()?;
    let built = build(svc, &meta, from, to).await;
    let asks = |d: &BuiltDigest| svc.asks_at(d.detected_up_to, d.board_head);
    svc.mark_seen(key_id, built.as_ref().is_ok_and(asks));
    if let (Ok(built), Some(progress)) = (&built, progress) {
        svc.digests.answers.keep(meta, built.clone(), progress);
    }
    built
}

/// Count a digest request (either transport, refusals included) by outcome: `ok`,
/// `not_modified` (the client holds this digest: `unchanged`) or the error code; and the bytes
/// answered.
pub fn count(svc: &Service, result: &Result<BuiltDigest, ServiceError>, unchanged: bool) {
    let outcome = match result {
        Ok(_) if unchanged => "not_modified",
        Ok(d) => {
            svc.metrics.digest_bytes.inc_by(d.bytes.len() as u64);
            "ok"
        }
        Err(e) => e.code.as_str(),
    };
    (svc.metrics.digest_requests)
        .with_label_values(&[outcome])
        .inc();
}

/// Sum the key's epoch accumulators from the epoch holding `from` (at most M messages, and
/// stopping at the first epoch boundary at or after `to`) and encode the digest, from the cache
/// when the range has not moved. The caller authenticated and read `meta` (its cursor) just
/// before.
pub async fn build(
    svc: &Service,
    meta: &omr_store::KeyMeta,
    from: Option<u64>,
    to: Option<u64>,
) -> Result<BuiltDigest, ServiceError> {
    match &svc.scheme {
        Scheme::Tfhe(s) => build_with(s, svc, meta, from, to).await,
        Scheme::Light(s) => build_with(s, svc, meta, from, to).await,
    }
}

async fn build_with<S: DetectionScheme>(
    scheme: &S,
    svc: &Service,
    meta: &omr_store::KeyMeta,
    from: Option<u64>,
    to: Option<u64>,
) -> Result<BuiltDigest, ServiceError> {
    let head = svc.board_head().await?;
    let from = from.unwrap_or(meta.start_index).max(meta.start_index);
    if let Some(to) = to.filter(|&to| to <= from) {
        return Err(ServiceError::new(
            ErrorCode::MalformedQuery,
            format!("to = {to} must be greater than from = {from}"),
        ));
    }
    // Rounded down to its epoch's start, as the API says: a `from` inside the epoch being
    // folded (even at the cursor) gets that epoch's digest, not an empty one at the cursor.
    let from = svc.epochs.start_of(from).max(meta.start_index);
    let plan = plan(svc, meta, from, to).await?;
    let key = (meta.key_id.clone(), plan.start, plan.end);
    let cached = svc.digests.encoded(&key);
    let (bytes, start, end, mut next_from) = match cached {
        Some(bytes) => (bytes, plan.start, plan.end, plan.next_from),
        None => {
            let (state, more) = assemble(scheme, svc, meta, &plan, to).await?;
            let (start, end) = S::range(&state);
            let bytes = encode(scheme, svc, &meta.key_id, state).await?;
            (svc.digests).put_encoded((meta.key_id.clone(), start, end), bytes.clone());
            (bytes, start, end, more.then_some(end).or(plan.next_from))
        }
    };
    if next_from.is_none() && end < meta.cursor {
        next_from = Some(end);
    }
    Ok(BuiltDigest {
        bytes,
        range_start: start,
        range_end: end,
        board_head: head,
        lag: head.saturating_sub(meta.cursor),
        next_from,
        epoch: svc.epochs.size(),
        detected_up_to: meta.cursor,
        refresh_at: svc.refresh_at(meta.cursor),
    })
}

/// The range a digest from `from` covers, decided from the stored epochs' bounds alone, so that
/// a cached digest is served without reading any accumulator data.
#[derive(Debug)]
struct Plan {
    start: u64,
    end: u64,
    /// Epochs summed (0: nothing folded at or after `from` yet).
    epochs: usize,
    next_from: Option<u64>,
}

async fn plan(
    svc: &Service,
    meta: &omr_store::KeyMeta,
    from: u64,
    to: Option<u64>,
) -> Result<Plan, ServiceError> {
    let limit = svc.epochs.per_digest(svc.set);
    let ranges = svc
        .store
        .accumulator_ranges_from(&meta.key_id, from, limit)
        .await
        .map_err(|e| ServiceError::internal("reading accumulators", e))?;
    let (epochs, next_from) = digest_run(&ranges, svc.set.max_range(), to);
    let (start, end) = match epochs {
        0 => (meta.cursor, meta.cursor),
        n => (ranges[0].0, ranges[n - 1].1),
    };
    Ok(Plan {
        start,
        end,
        epochs,
        next_from,
    })
}

/// Read and sum the planned epochs' states. The worker may have committed since the bounds
/// were read: sums what is there now, and says whether epochs remain past the sum.
async fn assemble<S: DetectionScheme>(
    scheme: &S,
    svc: &Service,
    meta: &omr_store::KeyMeta,
    plan: &Plan,
    to: Option<u64>,
) -> Result<(S::State, bool), ServiceError> {
    let bad = |what: &'static str| move |e: omr_core::OmrError| ServiceError::internal(what, e);
    let rows = match plan.epochs {
        0 => Vec::new(),
        n => svc
            .store
            .accumulators_from(&meta.key_id, plan.start, n as u32)
            .await
            .map_err(|e| ServiceError::internal("reading accumulators", e))?,
    };
    let states = rows
        .iter()
        .map(|r| scheme.decode_state(&r.data))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad("decoding an accumulator"))?;
    let bounds: Vec<(u64, u64)> = states.iter().map(S::range).collect();
    let (k, _) = digest_run(&bounds, svc.set.max_range(), to);
    let mut parts = states.into_iter().take(k);
    // Nothing folded at or after `from` yet: an empty digest at the cursor.
    let Some(mut sum) = parts.next() else {
        let empty = scheme.empty_state(meta.kbar as usize, meta.cursor);
        return Ok((empty, false));
    };
    for a in parts {
        S::merge(&mut sum, &a).map_err(bad("merging accumulators"))?;
    }
    Ok((sum, k < bounds.len()))
}

/// Encode a state for transport (TFHE: keyswitch and switch down), off the async runtime.
async fn encode<S: DetectionScheme>(
    scheme: &S,
    svc: &Service,
    key_id: &str,
    state: S::State,
) -> Result<Bytes, ServiceError> {
    let dkey = digest_key(scheme, svc, key_id).await?;
    let encoded = tokio::task::spawn_blocking(move || S::encode_digest(&dkey, state))
        .await
        .map_err(|e| ServiceError::internal("encoding a digest", e))?
        .map_err(|e| ServiceError::internal("encoding a digest", e))?;
    Ok(Bytes::from(encoded))
}

/// How many of the epochs `ranges` (sorted by start) one digest sums: consecutive from the
/// first, at most `max_range` messages in all, none starting at or after `to`. Also where the
/// next page starts when epochs remain.
fn digest_run(ranges: &[(u64, u64)], max_range: u64, to: Option<u64>) -> (usize, Option<u64>) {
    let Some(&(first, mut end)) = ranges.first() else {
        return (0, None);
    };
    for (i, &(s, e)) in ranges.iter().enumerate().skip(1) {
        if s != end || e - first > max_range || to.is_some_and(|to| s >= to) {
            return (i, Some(end));
        }
        end = e;
    }
    (ranges.len(), None)
}

/// `key_id`'s digest key, decoded once and cached.
async fn digest_key<S: DetectionScheme>(
    scheme: &S,
    svc: &Service,
    key_id: &str,
) -> Result<Arc<S::DigestKey>, ServiceError> {
    let cached = svc
        .digests
        .keys
        .lock()
        .expect("digest keys")
        .get(key_id)
        .cloned();
    if let Some(k) = cached.and_then(|k| k.downcast::<S::DigestKey>().ok()) {
        return Ok(k);
    }
    let bytes = (svc.store.digest_key(key_id).await)
        .map_err(|e| ServiceError::internal("loading a digest key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    let key = Arc::new(
        (scheme.digest_key(&bytes))
            .map_err(|e| ServiceError::internal("decoding a digest key", e))?,
    );
    let mut keys = svc.digests.keys.lock().expect("digest keys");
    if keys.len() >= DIGEST_KEY_ENTRIES {
        keys.clear();
    }
    keys.insert(key_id.to_string(), key.clone());
    Ok(key)
}

impl BuiltDigest {
    /// What names this digest for a conditional request (HTTP's ETag, gRPC's `etag`): its
    /// range, which decides its bytes (a key's stored states for a range never change; a range
    /// detected again after a crash is detected to the same bytes).
    pub fn etag(&self) -> String {
        format!("\"{}-{}\"", self.range_start, self.range_end)
    }

    /// Whether a client holding the digest named `etag` (an `If-None-Match` value: one tag or
    /// several, weak or strong, or `*`) holds this one.
    pub fn held(&self, etag: Option<&str>) -> bool {
        let ours = self.etag();
        let tags = etag
            .map(|e| e.split(',').map(str::trim))
            .into_iter()
            .flatten();
        tags.map(|t| t.trim_start_matches("W/"))
            .any(|t| t == "*" || t == ours)
    }
}

impl DigestCache {
    /// Forget `key_id`'s answer (the key was deleted).
    pub fn forget(&self, key_id: &str) {
        self.answers.forget(key_id);
    }

    fn encoded(&self, range: &DigestRange) -> Option<Bytes> {
        self.encoded
            .lock()
            .expect("digest cache")
            .get(range)
            .cloned()
    }

    fn put_encoded(&self, range: DigestRange, bytes: Bytes) {
        let mut cache = self.encoded.lock().expect("digest cache");
        if cache.len() >= DIGEST_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(range, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::digest_run;

    #[test]
    fn a_digest_sums_consecutive_epochs_up_to_the_range_and_to() {
        let e = [(0, 4), (4, 8), (8, 12), (12, 14)];
        assert_eq!(digest_run(&[], 16, None), (0, None));
        assert_eq!(digest_run(&e, 16, None), (4, None));
        assert_eq!(digest_run(&e, 8, None), (2, Some(8)));
        assert_eq!(digest_run(&e, 16, Some(8)), (2, Some(8)));
        assert_eq!(digest_run(&e, 16, Some(9)), (3, Some(12)));
        // A gap (retention, or a key registered mid-epoch) ends the digest.
        assert_eq!(digest_run(&[(0, 4), (8, 12)], 16, None), (1, Some(4)));
        // A first epoch starting mid-way counts from its start.
        assert_eq!(digest_run(&[(3, 4), (4, 8)], 5, None), (2, None));
        assert_eq!(digest_run(&[(3, 4), (4, 8)], 4, None), (1, Some(4)));
    }
}
