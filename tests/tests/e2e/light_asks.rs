//! omr-light-v1's open batch detected when its recipient asks, on each store: a status call
//! that finds the key behind asks once, and a call waiting for the cursor to pass new messages
//! asks again; each ask is one pass over the key, and the messages posted in between cost
//! none (before, an online recipient's key was detected again on every new message, asked or
//! not, for as long as it stayed online).

use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_test_support::{light_message, test_each_backend, wait_until, TestDb};
use reqwest::StatusCode;
use serde_json::Value;

use crate::light::{light_server, CATCH_UP};

test_each_backend!(an_online_key_s_open_batch_is_detected_once_each_time_its_recipient_asks);

async fn an_online_key_s_open_batch_is_detected_once_each_time_its_recipient_asks(db: &TestDb) {
    // A status call that finds the key behind asks once: one pass over the open batch. Three
    // more messages, then a call waiting for the cursor to pass them asks again: one more pass,
    // over the batch from its first message, and none for the messages in between (before, an
    // online recipient's key was detected again on every new message, asked or not).
    let s = light_server(db).await;
    let api = s.client();
    let r = api.register_light().await;
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let message = |i: u64| {
        let to = if i % 3 == 1 {
            r.secret.address()
        } else {
            stranger.clone()
        };
        light_message(&to, format!("message {i}").as_bytes())
    };
    let status = |wait_past: Option<u64>| {
        let mut path = format!("/v1/keys/{}/status", r.key_id);
        if let Some(past) = wait_past {
            path += &format!("?wait_past={past}&timeout_secs=60");
        }
        let request = api.http().get(api.url(&path)).bearer_auth(&r.token);
        async move {
            let response = request.send().await.expect("status");
            assert_eq!(response.status(), StatusCode::OK);
            response.json::<Value>().await.expect("status JSON")
        }
    };
    // Open batches detected as asked, and detection jobs committed (every pass, asked or not).
    let counted = || async {
        let open = api.metric("omr_detect_open_batches_total").await;
        let jobs = api.metric("omr_detect_batch_seconds_count").await;
        (open.unwrap_or(0.0), jobs.unwrap_or(0.0))
    };
    api.post_all((0..5).map(message).collect()).await;
    assert_eq!(status(None).await["lag"], 5);
    // Waited on the counter, not on the key's status: a status call that found the key still
    // behind would ask again (and the key's lag gauge reads the last plan, from before the posts).
    wait_until(CATCH_UP, "the open batch detected as asked", || async {
        counted().await.1 >= 1.0
    })
    .await;
    let caught_up = status(None).await;
    assert_eq!(
        (&caught_up["cursor"], &caught_up["lag"]),
        (&5.into(), &0.into())
    );
    assert_eq!(counted().await, (1.0, 1.0), "one pass");

    api.post_all((5..8).map(message).collect()).await;
    assert_eq!(
        status(Some(5)).await["cursor"],
        8,
        "the wait asked for the batch"
    );
    assert_eq!(
        counted().await,
        (2.0, 2.0),
        "one more pass, none for the posts"
    );
    let (start, end, got) = api.light_caught_up(&r).await;
    assert_eq!((start, end, got), (0, 8, vec![1, 4, 7]));
}
