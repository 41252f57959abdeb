//! `GET /v1/digests/{key_id}?from=INDEX`: the sum of a key's stored epoch accumulators from the
//! epoch holding `from` up to the key's cursor (at most M messages; longer ranges are paged),
//! keyswitched and switched down for transport. Never re-runs detection; encoded digests are
//! cached until the cursor moves.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use omr_api::http::{DigestQuery, ErrorBody};
use omr_api::{headers, ErrorCode};
use omr_core::{Accumulator, DigestKey};

use crate::error::ServiceError;
use crate::state::AppState;

/// Most cached encoded digests (each ≈ 166 KB for omr-v1, k̄ = 50).
const DIGEST_CACHE_ENTRIES: usize = 1024;

/// The encoded digest, with the range it covers in `omr-range-start` / `omr-range-end`, the board
/// head and the key's lag; `omr-next-from` when more of the range is on a further page.
#[utoipa::path(
    get, path = "/v1/digests/{key_id}", params(("key_id" = String, Path), DigestQuery),
    responses(
        (status = 200, description = "application/octet-stream: the omr-core Digest encoding"),
        (status = 401, body = ErrorBody, description = "No Bearer token"),
        (status = 403, body = ErrorBody, description = "Wrong token"),
        (status = 404, body = ErrorBody, description = "Unknown key"),
        (status = 429, body = ErrorBody, description = "This client's digest rate limit; retry after Retry-After seconds"),
    )
)]
pub async fn get_digest(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(key_id): Path<String>,
    query: Result<Query<DigestQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let client = state.admission.http_client(peer, &headers);
    let admitted =
        state
            .admission
            .check(crate::admission::Limit::Digests, "/v1/digests", client, 1);
    let result = match admitted {
        Ok(()) => digest(&state, &key_id, query, &headers).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(r) => {
            state
                .metrics
                .digest_requests
                .with_label_values(&["ok"])
                .inc();
            r
        }
        Err(e) => {
            state
                .metrics
                .digest_requests
                .with_label_values(&[e.code.as_str()])
                .inc();
            e.into_response()
        }
    }
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
}

async fn digest(
    state: &Arc<AppState>,
    key_id: &str,
    query: Result<Query<DigestQuery>, axum::extract::rejection::QueryRejection>,
    headers: &HeaderMap,
) -> Result<Response, ServiceError> {
    let Query(q) =
        query.map_err(|e| ServiceError::new(ErrorCode::MalformedQuery, e.body_text()))?;
    let meta = crate::auth::authorize_http(&state.store, key_id, headers).await?;
    state.presence.seen(&state.store, key_id);
    let d = build(state, &meta, q.from, q.to).await?;
    state.metrics.digest_bytes.inc_by(d.bytes.len() as u64);
    let mut h = HeaderMap::new();
    let num = |v: u64| HeaderValue::from_str(&v.to_string()).expect("digits");
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(headers::RANGE_START, num(d.range_start));
    h.insert(headers::RANGE_END, num(d.range_end));
    h.insert(headers::BOARD_HEAD, num(d.board_head));
    h.insert(headers::LAG, num(d.lag));
    h.insert(headers::EPOCH_LENGTH, num(d.epoch));
    if let Some(n) = d.next_from {
        h.insert(headers::NEXT_FROM, num(n));
    }
    Ok((StatusCode::OK, h, d.bytes).into_response())
}

/// Sum the key's epoch accumulators from the epoch holding `from` (at most M messages, and
/// stopping at the first epoch boundary at or after `to`) and encode the digest, from the cache
/// when the range has not moved. The caller authenticated and read `meta` (its cursor) just
/// before.
pub async fn build(
    state: &Arc<AppState>,
    meta: &omr_store::KeyMeta,
    from: Option<u64>,
    to: Option<u64>,
) -> Result<BuiltDigest, ServiceError> {
    let params = state.params;
    let epoch = state.config.epoch_len.clamp(1, params.max_range);
    let head = state
        .store
        .board_head()
        .await
        .map_err(|e| ServiceError::internal("reading the board head", e))?;
    let from = from.unwrap_or(meta.start_index).max(meta.start_index);
    if let Some(to) = to.filter(|&to| to <= from) {
        return Err(ServiceError::new(
            ErrorCode::MalformedQuery,
            format!("to = {to} must be greater than from = {from}"),
        ));
    }
    let plan = plan(state, meta, from, to, epoch).await?;
    let key = (meta.key_id.clone(), plan.start, plan.end);
    let cached = state
        .digests
        .lock()
        .expect("digest cache")
        .get(&key)
        .cloned();
    let (bytes, start, end, mut next_from) = match cached {
        Some(bytes) => (bytes, plan.start, plan.end, plan.next_from),
        None => {
            let (acc, more) = assemble(state, meta, &plan, to).await?;
            let (start, end) = (acc.start(), acc.end());
            let bytes = encode(state, &meta.key_id, acc).await?;
            cache_put(state, (meta.key_id.clone(), start, end), bytes.clone());
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
        epoch,
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
    state: &AppState,
    meta: &omr_store::KeyMeta,
    from: u64,
    to: Option<u64>,
    epoch: u64,
) -> Result<Plan, ServiceError> {
    let limit = (state.params.max_range / epoch + 1) as u32;
    let ranges = state
        .store
        .accumulator_ranges_from(&meta.key_id, from, limit)
        .await
        .map_err(|e| ServiceError::internal("reading accumulators", e))?;
    let (epochs, next_from) = digest_run(&ranges, state.params.max_range, to);
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

/// Read and sum the planned epochs' accumulators. The worker may have committed since the
/// bounds were read: sums what is there now, and says whether epochs remain past the sum.
async fn assemble(
    state: &AppState,
    meta: &omr_store::KeyMeta,
    plan: &Plan,
    to: Option<u64>,
) -> Result<(Accumulator, bool), ServiceError> {
    let bad = |what: &'static str| move |e: omr_core::OmrError| ServiceError::internal(what, e);
    let rows = match plan.epochs {
        0 => Vec::new(),
        n => state
            .store
            .accumulators_from(&meta.key_id, plan.start, n as u32)
            .await
            .map_err(|e| ServiceError::internal("reading accumulators", e))?,
    };
    let accs = rows
        .iter()
        .map(|r| Accumulator::from_bytes(&r.data))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad("decoding an accumulator"))?;
    let bounds: Vec<(u64, u64)> = accs.iter().map(|a| (a.start(), a.end())).collect();
    let (k, _) = digest_run(&bounds, state.params.max_range, to);
    let mut parts = accs.into_iter().take(k);
    // Nothing folded at or after `from` yet: an empty digest at the cursor.
    let Some(mut sum) = parts.next() else {
        let empty = Accumulator::new(state.params, meta.kbar as usize, meta.cursor);
        return Ok((empty, false));
    };
    for a in parts {
        sum.merge(&a).map_err(bad("merging accumulators"))?;
    }
    Ok((sum, k < bounds.len()))
}

/// Keyswitch and switch down an accumulator for transport, off the async runtime.
async fn encode(state: &AppState, key_id: &str, acc: Accumulator) -> Result<Bytes, ServiceError> {
    let dkey = digest_key(state, key_id).await?;
    let encoded = tokio::task::spawn_blocking(move || dkey.digest(&acc).map(|d| d.to_bytes()))
        .await
        .map_err(|e| ServiceError::internal("encoding a digest", e))?
        .map_err(|e| ServiceError::internal("encoding a digest", e))?;
    Ok(Bytes::from(encoded))
}

fn cache_put(state: &AppState, range: crate::state::DigestRange, bytes: Bytes) {
    let mut cache = state.digests.lock().expect("digest cache");
    if cache.len() >= DIGEST_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(range, bytes);
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

async fn digest_key(state: &AppState, key_id: &str) -> Result<Arc<DigestKey>, ServiceError> {
    if let Some(k) = state.digest_keys.lock().expect("digest keys").get(key_id) {
        return Ok(k.clone());
    }
    let bytes = state
        .store
        .digest_key(key_id)
        .await
        .map_err(|e| ServiceError::internal("loading a digest key", e))?
        .ok_or_else(|| ServiceError::unknown_key(key_id))?;
    let key = Arc::new(
        DigestKey::from_bytes(&bytes)
            .map_err(|e| ServiceError::internal("decoding a digest key", e))?,
    );
    let mut keys = state.digest_keys.lock().expect("digest keys");
    if keys.len() >= 4096 {
        keys.clear();
    }
    keys.insert(key_id.to_string(), key.clone());
    Ok(key)
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
