//! omr-light-v1's refresh policy on each store: however often a client polls its digest through
//! the raw API (HTTP and gRPC, not the SDK), an online key's open batch is detected only at the
//! refresh marks (every `light_refresh_messages` messages): at most one pass per key and mark,
//! counted by `/metrics`; the answers say how far detection went and where the next refresh
//! comes, and the digests stay exact.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use omr_light::{Digest, SecretKey, OMR_LIGHT_V1};
use omr_test_support::{
    light_message, test_each_backend, wait_until, LightRecipient, RawClient, TestDb,
};
use reqwest::StatusCode;
use serde_json::Value;

use crate::detection::{grpc_digest, grpc_digest_held};
use crate::light::{light_server_with, CATCH_UP};

/// Messages between two refreshes in these tests.
const EVERY: u64 = 8;
/// Messages posted at once: fewer than [`EVERY`], so the board crosses a mark now and then
/// while the pollers ask all along.
const WAVE: u64 = 5;

test_each_backend!(raw_digest_pollers_cost_one_pass_per_refresh_mark_whatever_their_rate);

async fn raw_digest_pollers_cost_one_pass_per_refresh_mark_whatever_their_rate(db: &TestDb) {
    let s = light_server_with(db, |c| c.light_refresh_messages = EVERY).await;
    let api = s.client();
    let by_http = Arc::new(api.register_light().await);
    let by_grpc = Arc::new(api.register_light().await);
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let to = |i: u64| match i % 5 {
        1 => Some(&by_http),
        3 => Some(&by_grpc),
        _ => None,
    };
    let post = |range: std::ops::Range<u64>| {
        let messages = range
            .map(|i| {
                let address = to(i).map_or(stranger.clone(), |r| r.secret.address());
                light_message(&address, format!("message {i}").as_bytes())
            })
            .collect();
        api.post_all(messages)
    };
    let want = |r: &Arc<LightRecipient>, below: u64| -> Vec<u64> {
        (0..below)
            .filter(|&i| to(i).is_some_and(|t| Arc::ptr_eq(t, r)))
            .collect()
    };

    // Two clients poll their digests as fast as they are answered, one over each transport,
    // for as long as the board grows.
    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicU64::new(0));
    let pollers = [
        tokio::spawn(poll(
            api.clone(),
            by_http.clone(),
            false,
            stop.clone(),
            polls.clone(),
        )),
        tokio::spawn(poll(
            api.clone(),
            by_grpc.clone(),
            true,
            stop.clone(),
            polls.clone(),
        )),
    ];
    let asked_since = |before: u64| {
        let polls = polls.clone();
        async move { polls.load(Ordering::Relaxed) >= before + 10 }
    };
    let waves = 7;
    for wave in 0..waves {
        post(wave * WAVE..(wave + 1) * WAVE).await;
        let before = polls.load(Ordering::Relaxed);
        wait_until(CATCH_UP, "the pollers ask again", || asked_since(before)).await;
    }
    let head = waves * WAVE; // 35: marks at 8, 16, 24 and 32
    let mark = head / EVERY * EVERY;
    for r in [&by_http, &by_grpc] {
        let what = format!("{} detected up to the mark {mark}", r.key_id);
        wait_until(CATCH_UP, what, || async {
            answer(&api, r, false).await.detected_up_to == mark
        })
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    for p in pollers {
        p.await.expect("a poller");
    }

    // However often they asked, each key's open batch was detected at most once per mark.
    let asked = polls.load(Ordering::Relaxed);
    let marks = head / EVERY;
    let passes = api
        .metric("omr_detect_open_batches_total")
        .await
        .unwrap_or(0.0);
    let jobs = api
        .metric("omr_detect_batch_seconds_count")
        .await
        .unwrap_or(0.0);
    let refreshes = api.metric("omr_light_refreshes_total").await.unwrap_or(0.0);
    assert!(
        asked >= 10 * waves,
        "the pollers asked {asked} times: too few to test the bound"
    );
    assert!(
        (2.0..=2.0 * marks as f64).contains(&passes),
        "{passes} passes for 2 keys and {marks} marks, after {asked} polls"
    );
    assert_eq!(jobs, passes, "every detection job was a refresh");
    assert!((1.0..=marks as f64).contains(&refreshes), "{refreshes}");
    assert_eq!(
        api.metric("omr_light_refresh_messages").await,
        Some(EVERY as f64)
    );
    assert!(api.metric("omr_light_refresh_seconds_total").await > Some(0.0));

    // The answers: detected up to the mark, the next refresh at the next mark, the digest
    // exact up to the mark (the messages after it wait for the next one).
    for (r, grpc) in [(&by_http, false), (&by_grpc, true)] {
        let a = answer(&api, r, grpc).await;
        assert_eq!(
            (a.start, a.end, a.refresh_at, a.lag),
            (0, mark, Some(mark + EVERY), head - mark)
        );
        assert_eq!(a.pertinent, want(r, mark), "{}", r.key_id);
        let status = status(&api, r).await;
        assert_eq!(
            (&status["cursor"], &status["refresh_at"]),
            (&mark.into(), &(mark + EVERY).into())
        );
    }

    // The board reaches the next mark: the next ask detects it, and every message is in.
    let next = mark + EVERY;
    post(head..next).await;
    for (r, grpc) in [(&by_http, false), (&by_grpc, true)] {
        let what = format!("{} detected up to the mark {next}", r.key_id);
        wait_until(CATCH_UP, what, || async {
            answer(&api, r, grpc).await.detected_up_to == next
        })
        .await;
        let a = answer(&api, r, grpc).await;
        assert_eq!((a.end, a.lag, a.refresh_at), (next, 0, Some(next + EVERY)));
        assert_eq!(a.pertinent, want(r, next), "{}", r.key_id);
    }
    // Most answers came from memory (no store read), yet every one above moved with the cursor.
    let kept = api
        .metric("omr_digest_answers_kept_total")
        .await
        .unwrap_or(0.0);
    assert!(kept > 0.0, "{kept}");

    // A client that names the digest it holds gets its headers alone while it is the same.
    let (key_id, token) = (&by_http.key_id, &by_http.token);
    let first = api.digest_of(key_id, token, None).await;
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(etag, format!("\"0-{next}\""));
    let url = api.url(&format!("/v1/digests/{key_id}"));
    let again = api
        .http()
        .get(&url)
        .bearer_auth(token)
        .header("if-none-match", &etag);
    let again = again.send().await.expect("a conditional digest request");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(
        again.headers()["omr-detected-up-to"],
        next.to_string().as_str()
    );
    assert!(again.bytes().await.unwrap().is_empty());
    let other = api
        .http()
        .get(&url)
        .bearer_auth(token)
        .header("if-none-match", "\"0-1\"");
    assert_eq!(other.send().await.unwrap().status(), StatusCode::OK);
    let tag = format!("\"0-{next}\"");
    let (key_id, token) = (&by_grpc.key_id, &by_grpc.token);
    let (h, _, chunks) = grpc_digest_held(&api, key_id, token, Some(tag.clone())).await;
    assert!(
        h.unchanged && h.etag == tag && chunks == 0,
        "{h:?}, {chunks} chunks"
    );
    let unchanged = r#"omr_digest_requests_total{outcome="not_modified"}"#;
    assert_eq!(api.metric(unchanged).await, Some(2.0));
}

/// One digest answer, over either transport, decoded.
struct Answer {
    start: u64,
    end: u64,
    lag: u64,
    detected_up_to: u64,
    refresh_at: Option<u64>,
    pertinent: Vec<u64>,
}

async fn answer(api: &RawClient, r: &LightRecipient, grpc: bool) -> Answer {
    let (start, end, lag, detected_up_to, refresh_at, bytes) = if grpc {
        let (h, bytes) = grpc_digest(api, &r.key_id, &r.token).await;
        let refresh_at = h.refresh_at;
        (
            h.range_start,
            h.range_end,
            h.lag,
            h.detected_up_to,
            refresh_at,
            bytes,
        )
    } else {
        let response = api.digest_of(&r.key_id, &r.token, None).await;
        assert_eq!(response.status(), StatusCode::OK);
        let header = |name: &str| -> Option<u64> {
            let value = response.headers().get(name)?;
            Some(value.to_str().ok()?.parse().expect("a number"))
        };
        let number = |name: &str| header(name).unwrap_or_else(|| panic!("no {name}"));
        let (start, end) = (number("omr-range-start"), number("omr-range-end"));
        let (lag, detected) = (number("omr-lag"), number("omr-detected-up-to"));
        let refresh_at = header("omr-refresh-at");
        let bytes = response.bytes().await.expect("digest bytes").to_vec();
        (start, end, lag, detected, refresh_at, bytes)
    };
    let digest = Digest::from_bytes(&bytes).expect("a light digest decodes");
    assert_eq!(
        digest.messages(),
        end - start,
        "the digest covers its range"
    );
    Answer {
        start,
        end,
        lag,
        detected_up_to,
        refresh_at,
        pertinent: r.secret.pertinent(&digest),
    }
}

/// `GET /v1/keys/{key_id}/status` as JSON.
async fn status(api: &RawClient, r: &LightRecipient) -> Value {
    let path = format!("/v1/keys/{}/status", r.key_id);
    let response = api.http().get(api.url(&path)).bearer_auth(&r.token);
    let response = response.send().await.expect("status");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("status JSON")
}

/// A client polling `r`'s digest (over gRPC or HTTP) until `stop`, each answer decoded and
/// checked to cover its range; `polls` counts them.
async fn poll(
    api: RawClient,
    r: Arc<LightRecipient>,
    grpc: bool,
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        answer(&api, &r, grpc).await;
        polls.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
