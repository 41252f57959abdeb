//! Capacity end to end, on each store: a worker whose memory budget holds fewer keys than it
//! serves time-shares them and every digest is still exact; the lag metrics cover every
//! registered key, including keys no worker holds and keys that wait for their turn, and so does
//! GetKeyStatus; a recipient that comes online is served at once, and while an offline key's
//! batch runs, and the offline keys' batches go on while an online key's batch runs. Keys whose
//! backlogs alone cannot fill the pool are served together in one turn (TFHE: side by side;
//! omr-light-v1: one pass over the batch for the group), every digest exact.

use omr_api::http::KeyStatus;
use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_proto::v1::registration_header::Start;
use omr_test_support::{
    insecure_keys, light_messages_to, quick_detection, quick_light, seeded_rng, test_each_backend,
    wait_until, RawClient, Recipient, TestDb, TestServer,
};
use rand::Rng;
use std::sync::atomic::Ordering;
use std::time::Duration;

test_each_backend!(
    more_keys_than_memory_holds_are_all_detected_exactly,
    lag_metrics_cover_unassigned_and_waiting_keys,
    an_online_key_is_served_while_an_offline_batch_runs,
    an_offline_key_is_served_while_an_online_batch_runs,
    keys_a_few_messages_behind_are_served_together_exactly,
    light_keys_at_one_batch_share_a_pass_exactly,
);

const SETTLE: Duration = Duration::from_secs(60);

/// Bytes one expanded key of the insecure test set takes in memory.
fn insecure_key_bytes() -> u64 {
    insecure_keys(4).detection_key.expand().memory_bytes() as u64
}

async fn more_keys_than_memory_holds_are_all_detected_exactly(db: &TestDb) {
    let budget = 2 * insecure_key_bytes() + 1;
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.key_memory_bytes = budget;
        c.key_max_wait_secs = 1;
    })
    .await;
    let api = s.client();
    let mut recipients = Vec::new();
    for _ in 0..6 {
        recipients.push(api.register(insecure_keys(4), Start::StartIndex(0)).await);
    }
    let noise = insecure_keys(4);
    let mut rng = seeded_rng("more_keys_than_memory_holds_are_all_detected_exactly");
    let mut want = vec![Vec::new(); recipients.len()];
    let mut left = vec![4; recipients.len()];
    for i in 0..30 {
        let payload = format!("message {i}").into_bytes();
        let to = rng.gen_range(0..recipients.len() + 1);
        if to < recipients.len() && left[to] > 0 {
            left[to] -= 1;
            let idx = api.post(&recipients[to].keys.clue_key, &payload).await;
            want[to].push((idx, payload));
        } else {
            api.post(&noise.clue_key, &payload).await;
        }
    }
    for (r, w) in recipients.iter().zip(&want) {
        let got = api.caught_up_digest(r, None).await.messages;
        assert_eq!(&got, w, "{:?}: key {}", db.backend(), r.key_id);
    }
    // Six keys served through a budget of two: at least six loads, never more than two held.
    let mut loads = 0.0;
    for source in ["disk", "store"] {
        let name = format!("omr_key_load_seconds_count{{source=\"{source}\"}}");
        loads += api.metric(&name).await.unwrap_or(0.0);
    }
    assert!(loads >= 6.0, "{loads} key loads for 6 keys");
    let loaded = api
        .metric("omr_keys_loaded")
        .await
        .expect("omr_keys_loaded");
    assert!(loaded <= 2.0, "{loaded} keys in memory, budget of 2");
    let bytes = api.metric("omr_key_memory_bytes").await.expect("bytes");
    assert!(
        bytes <= budget as f64,
        "{bytes} bytes in memory > budget {budget}"
    );
    s.stop().await;
}

async fn lag_metrics_cover_unassigned_and_waiting_keys(db: &TestDb) {
    // No worker: the key is behind and unassigned, and the lag says so in the API process.
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.role = omr_server::Role::Api;
    })
    .await;
    let api = s.client();
    let lonely = api.register(insecure_keys(4), Start::FromNow(true)).await;
    api.post(&lonely.keys.clue_key, b"for nobody yet").await;
    assert_eq!(api.metric("omr_max_key_lag").await, Some(1.0));
    assert_eq!(api.metric("omr_keys_behind").await, Some(1.0));
    assert_eq!(api.metric("omr_keys_unassigned").await, Some(1.0));
    let age = api.metric("omr_oldest_undetected_seconds").await;
    assert!(age.is_some_and(|a| a >= 0.0), "{age:?}");
    assert_eq!(status(&s, &lonely).await.state, "unassigned");

    // A worker with room for one key: the first key is loaded and caught up; a second key,
    // with one message (less than a load's worth) and a long maximum wait, waits its turn.
    let s = s
        .restart_configured(|c| {
            c.role = omr_server::Role::Both;
            c.key_memory_bytes = insecure_key_bytes() + 1;
            c.key_max_wait_secs = 3600;
        })
        .await;
    let api = s.client();
    api.caught_up_digest(&lonely, None).await;
    let min_batch = api.metric("omr_min_load_batch").await.unwrap_or(0.0);
    assert!(min_batch > 1.0, "a load is worth {min_batch} messages");
    let waiting = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let idx = api.post(&waiting.keys.clue_key, b"wait for it").await;
    // The first key detects the new message too (every key detects every message); the second
    // is left waiting.
    let lag = |key_id: &str| format!("omr_key_lag{{key_id=\"{key_id}\"}}");
    let (first, second) = (lag(&lonely.key_id), lag(&waiting.key_id));
    wait_until(
        SETTLE,
        "the first key caught up and the second waits",
        || async {
            api.metric(&first).await == Some(0.0)
                && api.metric(&second).await == Some(1.0)
                && api.metric("omr_keys_waiting").await == Some(1.0)
        },
    )
    .await;
    assert_eq!(api.metric("omr_max_key_lag").await, Some(1.0));
    assert_eq!(api.metric("omr_keys_unassigned").await, Some(0.0));
    let st = status(&s, &waiting).await;
    assert_eq!((st.state.as_str(), st.lag), ("waiting", 1), "{st:?}");
    assert!(st.eta_secs.is_some(), "{st:?}");

    // Asking made its recipient online: it is served at once, although memory is full and its
    // backlog is less than a load's worth.
    let digest = api.caught_up_digest(&waiting, None).await;
    assert_eq!(digest.messages, vec![(idx, b"wait for it".to_vec())]);
    assert_eq!(status(&s, &waiting).await.state, "caught_up");
    s.stop().await;
}

async fn an_online_key_is_served_while_an_offline_batch_runs(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let (offline, online) = offline_and_online(&s).await;

    // Offline keys' detection jobs are held: the offline key's batch starts and stays in flight.
    let faults = s.faults();
    faults.hold_bulk_jobs.store(true, Ordering::SeqCst);
    let first = api.post(&online.keys.clue_key, b"first").await;
    wait_held(
        &faults.bulk_jobs_held,
        "the offline key's batch is in flight",
    )
    .await;
    // A new message meanwhile: the online key detects it without waiting for that batch.
    let second = api.post(&online.keys.clue_key, b"second").await;
    wait_until(SETTLE, "the online key passed both messages", || async {
        cursor(&s, &online).await > second
    })
    .await;
    assert!(
        cursor(&s, &offline).await <= first,
        "the offline key's batch was held"
    );
    assert_eq!(faults.bulk_jobs_held.load(Ordering::SeqCst), 1);

    // Released, the offline key catches up; both digests are exact.
    faults.hold_bulk_jobs.store(false, Ordering::SeqCst);
    let digest = api.caught_up_digest(&online, None).await;
    let want = vec![(first, b"first".to_vec()), (second, b"second".to_vec())];
    assert_eq!(digest.messages, want);
    assert!(api
        .caught_up_digest(&offline, None)
        .await
        .messages
        .is_empty());
    s.stop().await;
}

async fn an_offline_key_is_served_while_an_online_batch_runs(db: &TestDb) {
    // One epoch for the whole test: the offline key's turn does not yield at a boundary.
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.epoch_len = 64;
    })
    .await;
    let api = s.client();
    let (offline, online) = offline_and_online(&s).await;

    // The offline key's first batch is held in flight (the online key, served first, is not).
    let faults = s.faults();
    faults.hold_bulk_jobs.store(true, Ordering::SeqCst);
    let noise = insecure_keys(4);
    let first = api.post(&noise.clue_key, b"first").await;
    wait_held(
        &faults.bulk_jobs_held,
        "the offline key's batch is in flight",
    )
    .await;
    // Messages meanwhile: the online key's batch starts beside it, and is held in its turn.
    faults.hold_online_jobs.store(true, Ordering::SeqCst);
    let mut want = (Vec::new(), Vec::new());
    for i in 0..12 {
        let payload = format!("message {i}").into_bytes();
        let (to, list) = match i % 3 {
            0 => (&offline.keys.clue_key, &mut want.0),
            1 => (&online.keys.clue_key, &mut want.1),
            _ => (&noise.clue_key, &mut Vec::new()),
        };
        let idx = api.post(to, &payload).await;
        list.push((idx, payload));
    }
    let last = want
        .0
        .last()
        .map_or(first, |m| m.0)
        .max(want.1.last().map_or(first, |m| m.0));
    wait_held(&faults.online_jobs_held, "an online batch is in flight").await;

    // The offline batch released, the offline key goes through the board batch after batch
    // (three messages each) while the online batch is still held.
    faults.hold_bulk_jobs.store(false, Ordering::SeqCst);
    wait_until(SETTLE, "the offline key passed every message", || async {
        cursor(&s, &offline).await > last
    })
    .await;
    assert!(
        cursor(&s, &online).await <= first + 1,
        "the online key's batch was held"
    );
    assert_eq!(faults.online_jobs_held.load(Ordering::SeqCst), 1);

    // Released, the online key catches up; both digests are exact.
    faults.hold_online_jobs.store(false, Ordering::SeqCst);
    assert_eq!(api.caught_up_digest(&online, None).await.messages, want.1);
    assert_eq!(api.caught_up_digest(&offline, None).await.messages, want.0);
    s.stop().await;
}

/// An offline key and an online one (its recipient asked), once the worker sees it online.
async fn offline_and_online(s: &TestServer) -> (Recipient, Recipient) {
    let api = s.client();
    let offline = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let online = api.register(insecure_keys(4), Start::FromNow(true)).await;
    status(s, &online).await; // its recipient asks: it is online
    wait_until(SETTLE, "the worker sees one online key", || async {
        api.metric("omr_keys_online").await == Some(1.0)
    })
    .await;
    (offline, online)
}

/// Wait until a job is held (`held`: one of the fault hooks' counts).
async fn wait_held(held: &std::sync::atomic::AtomicU32, what: &str) {
    wait_until(SETTLE, what, || async { held.load(Ordering::SeqCst) >= 1 }).await;
}

/// `r`'s cursor in the store.
async fn cursor(s: &TestServer, r: &Recipient) -> u64 {
    let cursor = s.state().store.cursor(&r.key_id).await;
    cursor.expect("cursor").unwrap_or(0)
}

async fn keys_a_few_messages_behind_are_served_together_exactly(db: &TestDb) {
    // Eight threads, batches of three: one key a few messages behind cannot fill the pool.
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.worker_threads = 8;
    })
    .await;
    let api = s.client();
    let mut recipients = Vec::new();
    for _ in 0..4 {
        recipients.push(api.register(insecure_keys(4), Start::StartIndex(0)).await);
    }
    let noise = insecure_keys(4);
    // A first message loads every key (a key not in memory is served alone; once the first
    // load measured a key's size, the next keys load side by side).
    api.post(&noise.clue_key, b"first").await;
    wait_for_cursors(&s, recipients.iter().map(|r| r.key_id.as_str()), 1).await;
    let (turns_before, keys_before) = group_turns(&api).await;

    // Then every post puts all four keys, in memory, one message behind together.
    let mut rng = seeded_rng("keys_a_few_messages_behind_are_served_together_exactly");
    let mut want = vec![Vec::new(); recipients.len()];
    for i in 0..12 {
        let payload = format!("message {i}").into_bytes();
        let to = rng.gen_range(0..recipients.len() + 1);
        if to < recipients.len() && want[to].len() < 4 {
            let idx = api.post(&recipients[to].keys.clue_key, &payload).await;
            want[to].push((idx, payload));
        } else {
            api.post(&noise.clue_key, &payload).await;
        }
    }
    for (r, w) in recipients.iter().zip(&want) {
        let got = api.caught_up_digest(r, None).await;
        assert_eq!((got.end, &got.messages), (13, w), "key {}", r.key_id);
    }
    let (turns, keys) = group_turns(&api).await;
    let (turns, keys) = (turns - turns_before, keys - keys_before);
    assert!(turns >= 1.0, "no turn served several keys");
    assert!(keys >= 2.0 * turns, "{keys} keys in {turns} group turns");
    s.stop().await;
}

async fn light_keys_at_one_batch_share_a_pass_exactly(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_light).await;
    let api = s.client();
    let mut recipients = Vec::new();
    for _ in 0..3 {
        recipients.push(api.register_light().await);
    }
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    let mut rng = seeded_rng("light_keys_at_one_batch_share_a_pass_exactly");
    let mut want = vec![Vec::new(); recipients.len()];
    let mut post =
        |indices| light_messages_to(&mut rng, &recipients, &stranger, indices, 400, &mut want);
    // The recipients stay offline. The first batch loads every key, one turn each; at the
    // second they are all in memory at one batch: one pass over it serves the group.
    let first = post(0..d);
    let second = post(d..2 * d + 3);
    let ids = || recipients.iter().map(|r| r.key_id.as_str());
    api.post_all(first).await;
    wait_for_cursors(&s, ids(), d).await;
    assert_eq!(group_turns(&api).await, (0.0, 0.0));
    api.post_all(second).await;
    wait_for_cursors(&s, ids(), 2 * d).await;
    assert_eq!(group_turns(&api).await, (1.0, 3.0));
    for (r, w) in recipients.iter().zip(&want) {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, 2 * d + 3), "key {}", r.key_id);
        assert_eq!(&got, w, "key {}", r.key_id);
    }
    s.stop().await;
}

/// `omr_detect_group_turns_total` and `omr_detect_group_keys_total`.
async fn group_turns(api: &RawClient) -> (f64, f64) {
    let turns = api.metric("omr_detect_group_turns_total").await;
    let keys = api.metric("omr_detect_group_keys_total").await;
    (turns.expect("group turns"), keys.expect("group keys"))
}

/// Wait until every key of `key_ids` has detected the board up to `end`.
async fn wait_for_cursors<'a>(
    s: &TestServer,
    key_ids: impl IntoIterator<Item = &'a str> + Clone,
    end: u64,
) {
    let store = &s.state().store;
    wait_until(Duration::from_secs(120), "every key caught up", || async {
        for key_id in key_ids.clone() {
            if store.cursor(key_id).await.expect("cursor").unwrap_or(0) < end {
                return false;
            }
        }
        true
    })
    .await;
}

/// `GET /v1/keys/{key_id}/status` for `r`.
async fn status(s: &TestServer, r: &Recipient) -> KeyStatus {
    let response = reqwest::Client::new()
        .get(s.url(&format!("/v1/keys/{}/status", r.key_id)))
        .bearer_auth(&r.token)
        .send()
        .await
        .expect("status request");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("a status body")
}
