//! `GET /v1/digests/{key_id}?from=INDEX`: the sum of a key's stored epoch accumulators from the
//! epoch holding `from` up to the key's cursor (at most M messages; longer ranges are paged),
//! keyswitched and switched down for transport. Never re-runs detection; encoded digests are
//! cached until the cursor moves.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use omr_core::{Accumulator, DigestKey};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::ApiError;
use crate::state::AppState;

/// Most cached encoded digests (each ≈ 166 KB for omr-v1, k̄ = 50).
const DIGEST_CACHE_ENTRIES: usize = 1024;

#[derive(Debug, Deserialize, IntoParams)]
pub struct DigestQuery {
    /// First board index wanted (default: the key's start). Rounded down to an epoch start.
    pub from: Option<u64>,
    /// Stop at the first epoch boundary at or after this index (default: the key's cursor).
    /// For splitting a range that holds more than k̄ pertinent messages.
    pub to: Option<u64>,
}

/// The encoded digest, with the range it covers in `omr-range-start` / `omr-range-end`, the board
/// head and the key's lag; `omr-next-from` when more of the range is on a further page.
#[utoipa::path(
    get, path = "/v1/digests/{key_id}", params(("key_id" = String, Path), DigestQuery),
    responses(
        (status = 200, description = "application/octet-stream: the omr-core Digest encoding"),
        (status = 401, body = crate::error::ErrorBody, description = "No Bearer token"),
        (status = 403, body = crate::error::ErrorBody, description = "Wrong token"),
        (status = 404, body = crate::error::ErrorBody, description = "Unknown key"),
    )
)]
pub async fn get_digest(
    State(state): State<Arc<AppState>>,
    Path(key_id): Path<String>,
    query: Result<Query<DigestQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    match digest(&state, &key_id, query, &headers).await {
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
                .with_label_values(&[e.code])
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
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request("malformed_query", e.body_text()))?;
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing Authorization: Bearer <token>",
            )
        })?;
    let meta = state
        .store
        .key(key_id)
        .await
        .map_err(|e| ApiError::internal("loading a key", e))?
        .ok_or_else(|| unknown_key(key_id))?;
    if !crate::auth::token_matches(token, &meta.token_hash) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the token does not belong to this key",
        ));
    }
    let d = build(state, &meta, q.from, q.to).await?;
    state.metrics.digest_bytes.inc_by(d.bytes.len() as u64);
    let mut h = HeaderMap::new();
    let num = |v: u64| HeaderValue::from_str(&v.to_string()).expect("digits");
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert("omr-range-start", num(d.range_start));
    h.insert("omr-range-end", num(d.range_end));
    h.insert("omr-board-head", num(d.board_head));
    h.insert("omr-lag", num(d.lag));
    h.insert("omr-epoch-length", num(d.epoch));
    if let Some(n) = d.next_from {
        h.insert("omr-next-from", num(n));
    }
    Ok((StatusCode::OK, h, d.bytes).into_response())
}

/// Sum the key's epoch accumulators from the epoch holding `from` (at most M messages, and
/// stopping at the first epoch boundary at or after `to`) and encode the digest, from the cache when the range has not moved. The caller authenticated and
/// read `meta` (its cursor) just before.
pub async fn build(
    state: &Arc<AppState>,
    meta: &omr_store::KeyMeta,
    from: Option<u64>,
    to: Option<u64>,
) -> Result<BuiltDigest, ApiError> {
    let internal = |what: &'static str| move |e: omr_store::StoreError| ApiError::internal(what, e);
    let key_id = meta.key_id.as_str();
    let params = state.params;
    let epoch = state.config.epoch_len.clamp(1, params.max_range);
    let head = state
        .store
        .board_head()
        .await
        .map_err(internal("reading the board head"))?;
    let cursor = meta.cursor;
    let from = from.unwrap_or(meta.start_index).max(meta.start_index);
    if let Some(to) = to {
        if to <= from {
            return Err(ApiError::bad_request(
                "malformed_query",
                format!("to = {to} must be greater than from = {from}"),
            ));
        }
    }
    let limit = (params.max_range / epoch + 1) as u32;
    // Decide the range from the epochs' bounds alone: a cached digest is served without reading
    // any accumulator data.
    let ranges = state
        .store
        .accumulator_ranges_from(key_id, from, limit)
        .await
        .map_err(internal("reading accumulators"))?;
    let (n, mut next_from) = digest_run(&ranges, params.max_range, to);
    let (mut range_start, mut range_end) = match n {
        0 => (cursor, cursor),
        _ => (ranges[0].0, ranges[n - 1].1),
    };
    let cached = state
        .digests
        .lock()
        .expect("digest cache")
        .get(&(key_id.to_string(), range_start, range_end))
        .cloned();
    let bytes = match cached {
        Some(b) => b,
        None => {
            let bad = |what: &'static str| move |e: omr_core::OmrError| ApiError::internal(what, e);
            let rows = match n {
                0 => Vec::new(),
                _ => state
                    .store
                    .accumulators_from(key_id, range_start, n as u32)
                    .await
                    .map_err(internal("reading accumulators"))?,
            };
            let accs = rows
                .iter()
                .map(|r| Accumulator::from_bytes(&r.data))
                .collect::<Result<Vec<_>, _>>()
                .map_err(bad("decoding an accumulator"))?;
            // The worker may have committed since the bounds were read: sum what is there now.
            let bounds: Vec<(u64, u64)> = accs.iter().map(|a| (a.start(), a.end())).collect();
            let (k, _) = digest_run(&bounds, params.max_range, to);
            let mut parts = accs.into_iter().take(k);
            // Nothing folded at or after `from` yet: an empty digest at the cursor.
            let acc = match parts.next() {
                None => Accumulator::new(params, meta.kbar as usize, cursor),
                Some(mut sum) => {
                    for a in parts {
                        sum.merge(&a).map_err(bad("merging accumulators"))?;
                    }
                    sum
                }
            };
            if k < bounds.len() {
                next_from = Some(acc.end());
            }
            (range_start, range_end) = (acc.start(), acc.end());
            let dkey = digest_key(state, key_id).await?;
            let encoded =
                tokio::task::spawn_blocking(move || dkey.digest(&acc).map(|d| d.to_bytes()))
                    .await
                    .map_err(|e| ApiError::internal("encoding a digest", e))?
                    .map_err(bad("encoding a digest"))?;
            let encoded = Bytes::from(encoded);
            let mut cache = state.digests.lock().expect("digest cache");
            if cache.len() >= DIGEST_CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(
                (key_id.to_string(), range_start, range_end),
                encoded.clone(),
            );
            encoded
        }
    };
    if next_from.is_none() && range_end < cursor {
        next_from = Some(range_end);
    }
    Ok(BuiltDigest {
        bytes,
        range_start,
        range_end,
        board_head: head,
        lag: head.saturating_sub(cursor),
        next_from,
        epoch,
    })
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

fn unknown_key(key_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_key",
        format!("no detection key {key_id}"),
    )
}

async fn digest_key(state: &Arc<AppState>, key_id: &str) -> Result<Arc<DigestKey>, ApiError> {
    if let Some(k) = state.digest_keys.lock().expect("digest keys").get(key_id) {
        return Ok(k.clone());
    }
    let bytes = state
        .store
        .digest_key(key_id)
        .await
        .map_err(|e| ApiError::internal("loading a digest key", e))?
        .ok_or_else(|| unknown_key(key_id))?;
    let key = Arc::new(
        DigestKey::from_bytes(&bytes)
            .map_err(|e| ApiError::internal("decoding a digest key", e))?,
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
