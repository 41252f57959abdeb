//! The fetch end to end: records byte-exact through query, answer and decoding.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::layout::{assign, RECORD_BYTES};
use super::wire::{answers_from_bytes, answers_len, answers_to_bytes};
use super::*;
use crate::params::OMR_LIGHT_V1;

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
    // The key and the query cross the wire, as they do to omrd.
    let key_bytes = secret.key(&mut rng).to_bytes(&OMR_LIGHT_V1);
    assert_eq!(key_bytes.len(), FetchKey::encoded_len());
    let (key, _) = FetchKey::from_bytes(&key_bytes).unwrap();
    // First and last index, and 48 between.
    let mut wanted: Vec<u64> = (0..48).map(|i| 1001 + i * 61).collect();
    wanted.extend([1000, 3999]);
    let (placed, left) = assign(&wanted, BUCKETS);
    assert!(left.is_empty());
    let query = secret.query(db.geometry(), &placed, &mut rng);
    let g = db.geometry();
    let limit = FetchQuery::max_encoded_len(g.rows, BUCKETS);
    let query_bytes = query.to_bytes(&OMR_LIGHT_V1);
    assert_eq!(query_bytes.len(), limit);
    let (query, _) = FetchQuery::from_bytes(&query_bytes, limit).unwrap();
    let answers = db.answer(&key, &query).unwrap();
    assert_eq!(answers.len(), BUCKETS.div_ceil(BUCKETS_PER_ANSWER));
    let answer_bytes = answers_to_bytes(&OMR_LIGHT_V1, &answers);
    assert_eq!(answer_bytes.len(), answers_len(BUCKETS));
    let answers = answers_from_bytes(&answer_bytes, answers.len()).unwrap();
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
    assert_eq!(small.to_bytes(&OMR_LIGHT_V1).len(), query_bytes.len());
    // A query for another snapshot is refused before any work.
    let other = FetchDb::new((1000..4001u64).map(|i| (i, record(i))), BUCKETS);
    assert!(other
        .answer(&key, &small)
        .unwrap_err()
        .contains("1000..4000"));
}

#[test]
fn values_travel_in_few_parts() {
    assert_eq!(chunk_levels(4096), vec![12]);
    assert_eq!(chunk_levels(5925), vec![12, 11]);
    assert_eq!(chunk_levels(100), vec![8]);
    assert_eq!(chunk_levels(8192 + 2049), vec![12, 12, 12]);
}

#[test]
fn malformed_fetch_encodings_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    let db = FetchDb::new((0..600u64).map(|i| (i, record(i))), BUCKETS);
    let secret = FetchSecret::from_seed(&[4; 32]);
    let (placed, _) = assign(&[5, 77], BUCKETS);
    let bytes = secret
        .query(db.geometry(), &placed, &mut rng)
        .to_bytes(&OMR_LIGHT_V1);
    let limit = FetchQuery::max_encoded_len(db.geometry().rows, BUCKETS);
    assert!(FetchQuery::from_bytes(&bytes, limit).is_ok());
    // Truncated, padded, too large for the limit.
    assert!(FetchQuery::from_bytes(&bytes[..bytes.len() - 1], limit).is_err());
    let mut long = bytes.clone();
    long.push(0);
    assert!(FetchQuery::from_bytes(&long, limit + 1).is_err());
    assert!(FetchQuery::from_bytes(&bytes, limit - 1).is_err());
    // A part with levels its geometry does not make.
    let header = crate::codec::HEADER_LEN + 8 + 8 + 4 + 4 + 1;
    let mut levels = bytes.clone();
    levels[header] ^= 1;
    assert!(FetchQuery::from_bytes(&levels, limit).is_err());
    // A coefficient of Q or more (all ones in the first 62 bits of the first c0).
    let mut big = bytes.clone();
    big[header + 1 + 32..header + 1 + 32 + 7].fill(0xff);
    big[header + 1 + 32 + 7] |= 0x3f;
    assert!(FetchQuery::from_bytes(&big, limit).is_err());
    // A key cut short, or a query where a key is expected.
    let key = secret.key(&mut rng).to_bytes(&OMR_LIGHT_V1);
    assert!(FetchKey::from_bytes(&key[..key.len() - 5]).is_err());
    assert!(FetchKey::from_bytes(&bytes).is_err());
    // Answers of the wrong count.
    let answers = answers_to_bytes(&OMR_LIGHT_V1, &[]);
    assert!(answers_from_bytes(&answers, 10).is_err());
}
