//! The board on each backend: gapless appends, ordered reads, the head.

use crate::common::messages;
use omr_store::{Appended, NewMessage, StoreError};
use omr_test_support::{test_each_backend, TestDb};

test_each_backend!(appends_are_gapless_and_read_in_order);

async fn appends_are_gapless_and_read_in_order(db: &TestDb) {
    let store = db.store();
    assert_eq!(store.board_head().await.unwrap(), 0);
    assert!(store.read(0, 10).await.unwrap().is_empty());
    // An empty append stores nothing and returns the head.
    assert_eq!(store.append(&[]).await.unwrap(), 0);

    let a = messages("a", 3);
    let b = messages("b", 2);
    assert_eq!(store.append(&a).await.unwrap(), 0);
    assert_eq!(store.append(&b).await.unwrap(), 3);
    assert_eq!(store.board_head().await.unwrap(), 5);

    let all = store.read(0, 100).await.unwrap();
    let indices: Vec<u64> = all.iter().map(|m| m.index).collect();
    assert_eq!(indices, vec![0, 1, 2, 3, 4]);
    for (m, want) in all.iter().zip(a.iter().chain(&b)) {
        assert_eq!((&m.clue, &m.payload), (&want.clue, &want.payload));
        assert!(m.received_ms > 0);
    }
    // From an index, at most `limit`, in order.
    let page: Vec<u64> = store
        .read(2, 2)
        .await
        .unwrap()
        .iter()
        .map(|m| m.index)
        .collect();
    assert_eq!(page, vec![2, 3]);
    assert!(store.read(5, 10).await.unwrap().is_empty());
    assert!(store.read(u64::MAX, 10).await.unwrap().is_empty());

    // More rows than one multi-row INSERT holds.
    let many = messages("many", 2500);
    assert_eq!(store.append(&many).await.unwrap(), 5);
    assert_eq!(store.board_head().await.unwrap(), 2505);
    let read = store.read(5, 3000).await.unwrap();
    assert_eq!(read.len(), 2500);
    for (k, (m, want)) in read.iter().zip(&many).enumerate() {
        assert_eq!(m.index, 5 + k as u64);
        assert_eq!(m.payload, want.payload);
    }
}

test_each_backend!(a_page_names_the_head_with_its_messages);

/// `read_page` gives the head and the messages of one statement: with messages, past the last
/// one (the head alone), and on an empty board.
async fn a_page_names_the_head_with_its_messages(db: &TestDb) {
    let store = db.store();
    assert_eq!(store.read_page(0, 10).await.unwrap(), (0, Vec::new()));
    let a = messages("page", 4);
    store.append(&a).await.unwrap();
    let (head, page) = store.read_page(1, 2).await.unwrap();
    assert_eq!(head, 4);
    assert_eq!(page, store.read(1, 2).await.unwrap());
    let indices: Vec<u64> = page.iter().map(|m| m.index).collect();
    assert_eq!(indices, vec![1, 2]);
    assert_eq!(page[1].clue, a[2].clue);
    assert_eq!(store.read_page(0, 10).await.unwrap().1.len(), 4);
    assert_eq!(store.read_page(4, 10).await.unwrap(), (4, Vec::new()));
    assert_eq!(
        store.read_page(u64::MAX, 10).await.unwrap(),
        (4, Vec::new())
    );
}

test_each_backend!(concurrent_appends_get_disjoint_contiguous_ranges);

async fn concurrent_appends_get_disjoint_contiguous_ranges(db: &TestDb) {
    let store = db.store();
    const TASKS: usize = 8;
    const EACH: usize = 10;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let batch = messages(&format!("t{t}"), EACH);
                (t, store.append(&batch).await.unwrap())
            })
        })
        .collect();
    let mut firsts = Vec::new();
    for task in tasks {
        firsts.push(task.await.unwrap());
    }
    assert_eq!(store.board_head().await.unwrap(), (TASKS * EACH) as u64);
    let board = store.read(0, 1000).await.unwrap();
    assert_eq!(board.len(), TASKS * EACH);
    for (i, m) in board.iter().enumerate() {
        assert_eq!(m.index, i as u64, "gap or reordering at {i}");
    }
    // Each append's messages are the `EACH` consecutive indices from its first.
    for (t, first) in firsts {
        for k in 0..EACH {
            let m = &board[first as usize + k];
            assert_eq!(m.payload, format!("payload t{t} {k}").into_bytes());
        }
    }
}

test_each_backend!(
    a_message_on_the_board_is_never_appended_again,
    concurrent_appends_of_the_same_bytes_store_one
);

async fn a_message_on_the_board_is_never_appended_again(db: &TestDb) {
    let store = db.store();
    let a = messages("a", 2);
    assert_eq!(store.append(&a).await.unwrap(), 0);
    // The whole append is refused, naming the first message already stored.
    let again = [messages("x", 1), a[1..].to_vec()].concat();
    match store.append(&again).await {
        Err(StoreError::Duplicate { position, index }) => assert_eq!((position, index), (1, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.board_head().await.unwrap(), 2);

    // Groups of one append, each all or nothing: a later group repeating an earlier one's
    // message is a duplicate of the index it was just given; a group repeating a message of its
    // own is refused; the others are stored contiguously.
    let b = messages("b", 2);
    let c = messages("c", 1);
    let repeated = vec![c[0].clone(), c[0].clone()];
    let d = messages("d", 3);
    let groups: Vec<&[NewMessage]> = vec![&b, &b[1..], &repeated, &a[..1], &d];
    let outcomes = store.append_groups(&groups).await.unwrap();
    assert_eq!(
        outcomes,
        vec![
            Appended::Stored { first: 2 },
            Appended::Duplicate {
                position: 0,
                index: 3
            },
            Appended::Repeated { position: 1, of: 0 },
            Appended::Duplicate {
                position: 0,
                index: 0
            },
            Appended::Stored { first: 4 },
        ]
    );
    assert_eq!(store.board_head().await.unwrap(), 7);
    let board = store.read(0, 10).await.unwrap();
    let payloads: Vec<&[u8]> = board.iter().map(|m| m.payload.as_slice()).collect();
    let want: Vec<&[u8]> = a
        .iter()
        .chain(&b)
        .chain(&d)
        .map(|m| m.payload.as_slice())
        .collect();
    assert_eq!(payloads, want);
    // A different attachment makes a different message.
    let mut with = a[0].clone();
    with.attachment = b"attached".to_vec();
    assert_eq!(store.append(&[with]).await.unwrap(), 7);
}

async fn concurrent_appends_of_the_same_bytes_store_one(db: &TestDb) {
    let store = db.store();
    let same = messages("same", 3);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, same) = (store.clone(), same.clone());
            tokio::spawn(async move { store.append(&same).await })
        })
        .collect();
    let mut stored = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(first) => {
                assert_eq!(first, 0);
                stored += 1;
            }
            Err(StoreError::Duplicate { position, index }) => assert_eq!((position, index), (0, 0)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(store.board_head().await.unwrap(), 3);
}
