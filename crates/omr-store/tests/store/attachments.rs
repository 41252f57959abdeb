//! Attachments on each backend: stored with their messages in one transaction (all or nothing),
//! read back by range, deleted by epoch with their seeds; the first PIR seed of an epoch wins.

use crate::common::messages;
use omr_store::NewMessage;
use omr_test_support::{test_each_backend, TestDb};

test_each_backend!(attachments_are_stored_with_their_messages_and_read_by_range);

async fn attachments_are_stored_with_their_messages_and_read_by_range(db: &TestDb) {
    let store = db.store();
    let mut batch = messages("a", 6);
    batch[1].attachment = vec![1; 3000];
    batch[4].attachment = b"four".to_vec();
    assert_eq!(store.append(&batch).await.unwrap(), 0);
    store.append(&messages("b", 2)).await.unwrap();
    let one = NewMessage {
        attachment: vec![9; 10],
        ..messages("c", 1).remove(0)
    };
    assert_eq!(store.append(&[one]).await.unwrap(), 8);

    let all = store.attachments(0, 100).await.unwrap();
    assert_eq!(
        all,
        vec![(1, vec![1; 3000]), (4, b"four".to_vec()), (8, vec![9; 10])]
    );
    assert_eq!(
        store.attachments(2, 8).await.unwrap(),
        vec![(4, b"four".to_vec())]
    );
    assert!(store.attachments(5, 8).await.unwrap().is_empty());
    // The board itself does not carry them.
    assert_eq!(store.read(1, 1).await.unwrap()[0].payload, b"payload a 1");
}

test_each_backend!(attachments_go_a_whole_epoch_at_a_time_with_their_seeds);

async fn attachments_go_a_whole_epoch_at_a_time_with_their_seeds(db: &TestDb) {
    let store = db.store();
    let mut batch = messages("a", 12);
    for m in &mut batch {
        m.attachment = m.payload.clone();
    }
    store.append(&batch).await.unwrap();
    let seeds: Vec<[u8; 32]> =
        futures::future::join_all((0..3).map(|e| store.pir_seed(e, [e as u8 + 1; 32])))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    assert_eq!(seeds, vec![[1; 32], [2; 32], [3; 32]]);
    // Epochs of 4: everything below index 8 goes, in batches of 3.
    assert_eq!(store.delete_attachments_before(8, 4, 3).await.unwrap(), 3);
    assert_eq!(store.delete_attachments_before(8, 4, 3).await.unwrap(), 3);
    assert_eq!(store.delete_attachments_before(8, 4, 3).await.unwrap(), 2);
    assert_eq!(store.delete_attachments_before(8, 4, 3).await.unwrap(), 0);
    let left: Vec<u64> = store
        .attachments(0, 100)
        .await
        .unwrap()
        .iter()
        .map(|a| a.0)
        .collect();
    assert_eq!(left, vec![8, 9, 10, 11]);
    // Epochs 0 and 1 lost their seeds (a new one would be taken); epoch 2 kept its own.
    assert_eq!(store.pir_seed(0, [7; 32]).await.unwrap(), [7; 32]);
    assert_eq!(store.pir_seed(2, [7; 32]).await.unwrap(), [3; 32]);
}

test_each_backend!(the_first_seed_of_an_epoch_wins_even_when_racing);

async fn the_first_seed_of_an_epoch_wins_even_when_racing(db: &TestDb) {
    let store = db.store();
    let racers = (0..8u8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move { store.pir_seed(5, [i; 32]).await.unwrap() })
    });
    let seeds: Vec<[u8; 32]> = futures::future::join_all(racers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(seeds.iter().all(|s| *s == seeds[0]), "{seeds:?}");
    assert_eq!(store.pir_seed(5, [99; 32]).await.unwrap(), seeds[0]);
}
