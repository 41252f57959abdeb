//! Board notifications: on PostgreSQL another connection's append wakes a listener; on SQLite
//! (one process) there is nothing to listen to.

use std::time::Duration;

use crate::common::messages;
use omr_test_support::{test_each_backend, TestDb};
use tokio::sync::mpsc;

test_each_backend!(board_notifications_report_appends_from_other_connections);

async fn board_notifications_report_appends_from_other_connections(db: &TestDb) {
    let store = db.store();
    if store.is_embedded() {
        let mut called = false;
        tokio::time::timeout(
            Duration::from_secs(1),
            store.board_notifications(|| called = true),
        )
        .await
        .expect("returns at once on SQLite");
        assert!(!called);
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .board_notifications(move || {
                    let _ = tx.send(());
                })
                .await
        })
    };
    // The listener may not be listening yet: append until a notification arrives.
    let mut arrived = false;
    for round in 0..50 {
        store
            .append(&messages(&format!("r{round}"), 1))
            .await
            .unwrap();
        if let Ok(Some(())) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            arrived = true;
            break;
        }
    }
    assert!(arrived, "no board notification within 10 s of appending");
    listener.abort();
}
