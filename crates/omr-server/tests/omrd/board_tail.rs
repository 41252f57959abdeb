//! The board's tail in memory (`omr_server::service::tail`) against each store: a page from it
//! is the store's page for the same `from` and `limit`; a commit of this process shows at once,
//! another writer's post once the bound has passed (and not before, while the tail is fresh);
//! a burst larger than the tail makes it the newest messages; a reader behind it is sent to the
//! store.

use std::time::Duration;

use omr_api::http::BoardPage;
use omr_server::service::tail::BoardTail;
use omr_store::{NewMessage, Store};
use omr_test_support::{test_each_backend, TestDb};

const HOUR: Duration = Duration::from_secs(3600);

/// `count` distinct messages appended in one transaction, as another process would.
async fn append(store: &Store, count: usize) {
    let head = store.board_head().await.unwrap();
    let messages: Vec<NewMessage> = (0..count as u64)
        .map(|i| NewMessage {
            clue: format!("clue {}", head + i).into_bytes(),
            payload: format!("payload {}", head + i).into_bytes(),
            attachment: Vec::new(),
        })
        .collect();
    store.append(&messages).await.unwrap();
}

fn indices(page: &BoardPage) -> Vec<u64> {
    page.messages.iter().map(|m| m.index).collect()
}

/// The store's own page, as (indices, next, head).
async fn store_page(store: &Store, from: u64, limit: u32) -> (Vec<u64>, u64, u64) {
    let (head, rows) = store.read_page(from, limit).await.unwrap();
    let indices: Vec<u64> = rows.iter().map(|m| m.index).collect();
    let next = indices.last().map_or(from, |i| i + 1);
    (indices, next, head)
}

/// The tail's page from `from` (at most 100 messages) as (indices, next, head); `None` when it
/// sends the reader to the store.
async fn served(
    tail: &BoardTail,
    store: &Store,
    bounds: (u64, Duration, usize),
    from: u64,
) -> Option<(Vec<u64>, u64, u64)> {
    let page = tail.page(store, bounds, from, 100).await.unwrap()?;
    Some((indices(&page), page.next, page.head))
}

async fn tail_pages_are_the_stores(db: &TestDb) {
    let store = db.store();
    let tail = BoardTail::default();
    let keep = 20;
    // An empty board: an empty page at 0.
    let empty = tail.page(store, (0, HOUR, keep), 0, 10).await.unwrap();
    let empty = empty.expect("the empty board's tail answers from 0");
    assert_eq!((indices(&empty), empty.next, empty.head), (vec![], 0, 0));

    append(store, 50).await;
    for from in [0, 29, 30, 31, 45, 49, 50, 51, 70] {
        for limit in [1, 5, 1000] {
            let page = tail
                .page(store, (1, HOUR, keep), from, limit)
                .await
                .unwrap();
            let expected = store_page(store, from, limit).await;
            match page {
                // The newest 20 messages are 30..50: a reader before them goes to the store.
                None => assert!(
                    from < 30,
                    "from {from}: the tail holds it but did not answer"
                ),
                Some(page) => {
                    assert!(from >= 30, "from {from}: answered from behind the tail");
                    assert_eq!(
                        (indices(&page), page.next, page.head),
                        expected,
                        "from {from}"
                    );
                    for m in &page.messages {
                        assert_eq!(m.clue, b64(format!("clue {}", m.index)));
                        assert_eq!(m.payload, b64(format!("payload {}", m.index)));
                    }
                }
            }
        }
    }
}

fn b64(text: String) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

async fn commits_show_at_once_others_within_the_bound(db: &TestDb) {
    let store = db.store();
    let tail = BoardTail::default();
    append(store, 5).await;
    assert_eq!(
        served(&tail, store, (0, HOUR, 1024), 0).await,
        Some(((0..5).collect(), 5, 5))
    );

    // Another process posts: within the bound, with no commit of this process since, the tail
    // answers as it was read (a consistent page, the head it saw).
    append(store, 1).await;
    assert_eq!(
        served(&tail, store, (0, HOUR, 1024), 3).await,
        Some((vec![3, 4], 5, 5))
    );
    // A commit of this process: read again, so a post acknowledged here is never missed.
    assert_eq!(
        served(&tail, store, (1, HOUR, 1024), 3).await,
        Some((vec![3, 4, 5], 6, 6))
    );
    // Past the bound: read again.
    append(store, 2).await;
    assert_eq!(
        served(&tail, store, (1, Duration::ZERO, 1024), 5).await,
        Some((vec![5, 6, 7], 8, 8))
    );
}

async fn a_burst_larger_than_the_tail_leaves_the_newest(db: &TestDb) {
    let store = db.store();
    let tail = BoardTail::default();
    let keep = 8;
    append(store, 3).await;
    assert_eq!(
        served(&tail, store, (0, HOUR, keep), 0).await,
        Some((vec![0, 1, 2], 3, 3))
    );
    append(store, 30).await;
    // A reader at 3 is now behind the tail (25..33): the store answers it.
    assert_eq!(served(&tail, store, (1, HOUR, keep), 3).await, None);
    assert_eq!(
        served(&tail, store, (1, HOUR, keep), 25).await,
        Some(((25..33).collect(), 33, 33))
    );
    // And it keeps moving on, one read per commit.
    append(store, 4).await;
    assert_eq!(
        served(&tail, store, (2, HOUR, keep), 30).await,
        Some(((30..37).collect(), 37, 37))
    );
    assert_eq!(served(&tail, store, (2, HOUR, keep), 28).await, None);
}

test_each_backend!(
    tail_pages_are_the_stores,
    commits_show_at_once_others_within_the_bound,
    a_burst_larger_than_the_tail_leaves_the_newest,
);
