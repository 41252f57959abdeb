//! One round of omr-light-v1's payload fetch as omrd answers it (docs/light/STUDY.md §7.1):
//! k = 50 records among 2^16, the snapshot's plaintexts transformed beforehand, on one thread
//! (a round's figure is its CPU). Also an expansion of a round's shape alone (5,925 values, the
//! part the query's key switches cost), so that a change to the expansion shows apart from the
//! buckets' work.
//!
//!     cargo bench -p omr-bench --bench fetch
//!
//! Building the snapshot takes a few seconds and ≈ 1 GiB (2^16 records, as an epoch of a full
//! board's retention holds).

use criterion::{criterion_group, criterion_main, Criterion};
use omr_light::expand::{expand_each, place, ExpansionKeys};
use omr_light::fetch::layout::{assign, RECORD_BYTES};
use omr_light::fetch::{FetchDb, FetchSecret, BUCKETS};
use omr_light::rlwe::{Ciphertext, Secret};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const RECORDS: u64 = 1 << 16;

fn record(index: u64) -> Vec<u8> {
    (0..RECORD_BYTES)
        .map(|i| (index as usize * 131 + i * 7) as u8)
        .collect()
}

fn round(c: &mut Criterion) {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut db = FetchDb::new((0..RECORDS).map(|i| (i, record(i))), BUCKETS);
    db.prepare();
    let secret = FetchSecret::from_seed(&[5; 32]);
    let key = secret.key(&mut rng);
    let wanted: Vec<u64> = (0..50).map(|i| 17 + i * 1_301).collect();
    let (placed, left) = assign(&wanted, BUCKETS);
    assert!(left.is_empty(), "50 records fit in 75 buckets");
    let query = secret.query(db.geometry(), &placed, &mut rng);
    // The round decodes: what is timed is a working answer.
    let answers = db.answer(&key, &query).expect("answer");
    for (index, bytes) in secret.decode(&placed, &answers) {
        assert_eq!(bytes, record(index), "record {index}");
    }
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let mut g = c.benchmark_group("fetch");
    g.sample_size(10);
    g.bench_function("round, k = 50 among 2^16, one thread", |b| {
        b.iter(|| one.install(|| db.answer(&key, &query).expect("answer")))
    });
    // The same expansion as a round's: 75 buckets of 79 values, in a part of 12 levels and
    // one of 11 (its unused tail pruned).
    let s = Secret::generate(&mut rng);
    let keys = ExpansionKeys::generate(&s, 11, &mut rng);
    let parts: Vec<(u32, usize, Ciphertext)> = [(12, 4_096), (11, 5_925 - 4_096)]
        .into_iter()
        .map(|(levels, count)| {
            let values: Vec<u64> = (0..count as u64).map(|v| v % 1_024).collect();
            (levels, count, s.encrypt(&place(&values, levels), &mut rng))
        })
        .collect();
    g.bench_function("expansion of a round's 5,925 values, one thread", |b| {
        b.iter(|| {
            one.install(|| {
                for (levels, count, ct) in &parts {
                    expand_each(ct.clone(), &keys, *levels, *count, &|v, ct| {
                        std::hint::black_box((v, ct));
                    });
                }
            })
        })
    });
    g.finish();
}

criterion_group!(benches, round);
criterion_main!(benches);
