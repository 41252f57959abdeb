//! The fetch end to end: records byte-exact through query, answer and decoding.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::layout::{assign, RECORD_BYTES};
use super::*;

fn record(index: u64) -> Vec<u8> {
    // A varying length, so that the zero padding is exercised too.
    let len = 100 + (index as usize * 37) % (RECORD_BYTES - 100);
    (0..len)
        .map(|i| (index as usize * 131 + i * 7) as u8)
        .collect()
}

#[test]
fn fifty_records_come_back_byte_exact_and_dummies_cost_nothing_visible() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let db = FetchDb::new((1000..4000u64).map(|i| (i, record(i))), BUCKETS);
    let secret = FetchSecret::from_seed(&[3; 32]);
    let key = secret.key(&mut rng);
    // First and last index, and 48 between.
    let mut wanted: Vec<u64> = (0..48).map(|i| 1001 + i * 61).collect();
    wanted.extend([1000, 3999]);
    let (placed, left) = assign(&wanted, BUCKETS);
    assert!(left.is_empty());
    let query = secret.query(db.geometry(), &placed, &mut rng);
    let answers = db.answer(&key, &query);
    assert_eq!(answers.len(), BUCKETS.div_ceil(BUCKETS_PER_ANSWER));
    let got = secret.decode(&placed, &answers);
    assert_eq!(got.len(), 50);
    for (index, bytes) in got {
        let want = record(index);
        assert_eq!(&bytes[..want.len()], &want[..], "record {index}");
        assert!(bytes[want.len()..].iter().all(|&b| b == 0));
    }
    // A round with fewer wanted records has the same shape.
    let (few, _) = assign(&[2000], BUCKETS);
    let small = secret.query(db.geometry(), &few, &mut rng);
    assert_eq!(small.wire_bytes(), query.wire_bytes());
    assert_eq!(small.parts.len(), query.parts.len());
}

#[test]
fn values_travel_in_few_parts() {
    assert_eq!(chunk_levels(4096), vec![12]);
    assert_eq!(chunk_levels(5925), vec![12, 11]);
    assert_eq!(chunk_levels(100), vec![8]);
    assert_eq!(chunk_levels(8192 + 2049), vec![12, 12, 12]);
}
