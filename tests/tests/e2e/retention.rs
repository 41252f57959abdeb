//! Retention end to end on each store: the board keeps the newest messages and deletes older
//! ones only once every key has detected them; digests (accumulators) are untouched; a key may
//! not start below what retention kept.

use std::time::Duration;

use omr_core::{keygen, INSECURE_TEST};
use omr_proto::v1::registration_header::Start;
use omr_server::Role;
use omr_test_support::{
    insecure_keys, quick_detection, test_each_backend, wait_for, RawClient, TestDb, TestServer,
};
use serde_json::Value;
use tokio_stream::StreamExt as _;

/// Retention passes run every second; a few of them fit in this.
const RETENTION_RUNS: Duration = Duration::from_secs(20);

/// The board from index 0 once its first message is `first` (retention deleted everything
/// below it); panics if that does not happen within [`RETENTION_RUNS`].
async fn board_once_it_starts_at(api: &RawClient, first: u64) -> Value {
    let what = format!("retention has deleted the board below {first}");
    wait_for(RETENTION_RUNS, what, || async {
        let page = api.board(0, 1000).await;
        (page["messages"][0]["index"].as_u64() == Some(first)).then_some(page)
    })
    .await
}

fn indices(page: &Value) -> Vec<u64> {
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["index"].as_u64().unwrap())
        .collect()
}

test_each_backend!(
    retention_deletes_only_what_every_key_has_detected,
    retention_keeps_what_a_key_has_not_detected,
);

async fn retention_deletes_only_what_every_key_has_detected(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.retain_messages = Some(4);
        c.retention_interval_secs = 1;
    })
    .await;
    let api = s.client();
    let r = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let mut want = Vec::new();
    for i in 0..12u64 {
        let payload = format!("m{i}").into_bytes();
        let noise = keygen(&INSECURE_TEST, 1);
        if i % 5 == 0 {
            api.post(&r.keys.clue_key, &payload).await;
            want.push((i, payload));
        } else {
            api.post(&noise.as_ref().unwrap().clue_key, &payload).await;
        }
    }
    let got = api.caught_up_digest(&r, None).await.messages;
    assert_eq!(got, want);
    // The board keeps the newest 4; the digest (accumulators) is untouched.
    let page = board_once_it_starts_at(&api, 8).await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 4);
    let got = api.caught_up_digest(&r, None).await.messages;
    assert_eq!(got, want, "{:?}", db.backend());
    s.stop().await;
}

/// Key `a` has detected the whole board, key `b` (registered at index 4 while no worker runs)
/// nothing: retention, asked to keep only the newest 4 of 12, deletes just [0, 4). Once a
/// worker lets `b` catch up, `b` finds its messages in [4, 12) and retention moves on to 8.
async fn retention_keeps_what_a_key_has_not_detected(db: &TestDb) {
    let s = TestServer::start_configured(db, quick_detection).await;
    let api = s.client();
    let a = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let (b_keys, noise) = (insecure_keys(4), insecure_keys(4));
    let (mut want_a, mut want_b) = (Vec::new(), Vec::new());
    for i in 0..12u64 {
        let payload = format!("m{i}").into_bytes();
        let (to, want) = match i {
            0 | 10 => (&a.keys, Some(&mut want_a)),
            5 | 9 => (&b_keys, Some(&mut want_b)),
            _ => (&noise, None),
        };
        assert_eq!(api.post(&to.clue_key, &payload).await, i);
        if let Some(want) = want {
            want.push((i, payload));
        }
    }
    assert_eq!(api.caught_up_digest(&a, None).await.messages, want_a);

    // No worker from here on: `b` registers at 4 and stays there.
    let s = s.restart_configured(|c| c.role = Role::Api).await;
    let b = s.client().register(b_keys, Start::StartIndex(4)).await;
    let s = s
        .restart_configured(|c| {
            c.retain_messages = Some(4);
            c.retention_interval_secs = 1;
        })
        .await;
    let api = s.client();
    // `b`'s cursor cannot move, so every retention pass deletes exactly [0, 4): once that has
    // happened, what `b` has not detected must all be there.
    let page = board_once_it_starts_at(&api, 4).await;
    assert_eq!(indices(&page), (4..12).collect::<Vec<_>>(), "{page}");
    assert_eq!(db.store().cursor(&b.key_id).await.unwrap(), Some(4));

    // A worker again: `b` detects [4, 12) and gets exactly its messages; then retention
    // deletes up to the newest 4, and `a`'s digest is unchanged.
    let s = s.restart_configured(|c| c.role = Role::Both).await;
    let api = s.client();
    assert_eq!(api.caught_up_digest(&b, None).await.messages, want_b);
    let page = board_once_it_starts_at(&api, 8).await;
    assert_eq!(indices(&page), (8..12).collect::<Vec<_>>(), "{page}");
    assert_eq!(api.caught_up_digest(&a, None).await.messages, want_a);
    s.stop().await;
}

test_each_backend!(a_start_index_below_the_retained_board_is_refused_from_the_header);

/// Once retention has deleted [0, 4), a key asking to start at 3 would wait forever for
/// messages that are gone: it is refused from its header (FAILED_PRECONDITION naming the oldest
/// retained index) and nothing is stored; starting at 4 is fine.
async fn a_start_index_below_the_retained_board_is_refused_from_the_header(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.retain_messages = Some(2);
        c.retention_interval_secs = 1;
    })
    .await;
    let api = s.client();
    let (a, noise) = (
        api.register(insecure_keys(4), Start::FromNow(true)).await,
        insecure_keys(4),
    );
    for i in 0..6u64 {
        let to = if i % 3 == 0 { &a.keys } else { &noise };
        assert_eq!(api.post(&to.clue_key, format!("m{i}").as_bytes()).await, i);
    }
    api.caught_up_digest(&a, None).await;
    board_once_it_starts_at(&api, 4).await;

    // The header alone, then a stream that never sends a key byte: the refusal cannot have
    // waited for the key.
    let late = insecure_keys(4);
    let key = late.detection_key.to_bytes();
    let requests =
        omr_proto::registration_requests(INSECURE_TEST.name, 4, Start::StartIndex(3), &key);
    let only_header =
        tokio_stream::iter(requests.into_iter().take(1)).chain(futures::stream::pending());
    let refused = tokio::time::timeout(
        Duration::from_secs(30),
        api.detector().await.register_detection_key(only_header),
    )
    .await
    .expect("refused without waiting for key bytes")
    .expect_err("index 3 was deleted by retention");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("start index 3")
            && refused
                .message()
                .contains("oldest retained board message (4)"),
        "{refused:?}"
    );
    assert_eq!(db.store().key_count().await.unwrap(), 1);
    let metrics = api.metrics().await;
    assert!(
        metrics.contains(r#"omr_key_registrations_total{outcome="refused"} 1"#),
        "{metrics}"
    );

    // At the oldest retained index it registers, and detects from there.
    let b = api.register(late, Start::StartIndex(4)).await;
    assert_eq!(
        db.store().cursor(&b.key_id).await.unwrap().map(|c| c >= 4),
        Some(true)
    );
    s.stop().await;
}
