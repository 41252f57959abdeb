//! The server's side of the fetch: the records of the served epochs, and the answer to one
//! round's query (module docs of `fetch` for the steps).

use std::collections::HashMap;

use rayon::prelude::*;

use super::layout::RECORDS_PER_ROW;
use super::layout::{encode_record, Geometry, BIT_GADGET, CLASSES, FOLD, PLAIN_BITS};
use super::BUCKETS_PER_ANSWER;
use super::{FetchAnswer, FetchKey, FetchQuery, ANSWER_C0_BITS, ANSWER_C1_BITS};
use crate::cmux::{cmux, EncryptedBit};
use crate::expand::expand;
use crate::ring::{lift, switch, Ntt};
use crate::rlwe::{seeded_c1, Ciphertext, D};

/// The records of a snapshot and its geometry.
#[derive(Debug)]
pub struct FetchDb {
    geometry: Geometry,
    records: HashMap<u64, Vec<u16>>,
}

impl FetchDb {
    /// The database of `records` (board index, bytes ≤ RECORD_BYTES) in `buckets` buckets.
    pub fn new(records: impl IntoIterator<Item = (u64, Vec<u8>)>, buckets: usize) -> FetchDb {
        let records: HashMap<u64, Vec<u16>> = (records.into_iter())
            .map(|(index, bytes)| (index, encode_record(&bytes)))
            .collect();
        let mut indices: Vec<u64> = records.keys().copied().collect();
        indices.sort_unstable();
        FetchDb {
            geometry: Geometry::new(indices, buckets),
            records,
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Plaintext `column` of grid row `row` of bucket `bucket`, NTT domain: the record at
    /// bucket position row·64 + column·8 + c in residue class c, coefficients centred mod 2^10.
    fn plaintext(&self, bucket: usize, row: usize, column: usize) -> Vec<u64> {
        let mut p = vec![0u64; D];
        let indices = &self.geometry.buckets[bucket];
        for class in 0..CLASSES {
            let at = row * RECORDS_PER_ROW + column * CLASSES + class;
            let Some(record) = indices.get(at).map(|i| &self.records[i]) else {
                break;
            };
            for (u, &v) in record.iter().enumerate() {
                let v = i64::from(v);
                let centred = if v >= 1 << (PLAIN_BITS - 1) {
                    v - (1 << PLAIN_BITS)
                } else {
                    v
                };
                p[u * CLASSES + class] = lift(centred);
            }
        }
        Ntt::of(D).fwd(&mut p);
        p
    }

    /// The answers to `query` (one per 8 buckets), every bucket on the rayon pool.
    pub fn answer(&self, key: &FetchKey, query: &FetchQuery) -> Vec<FetchAnswer> {
        let per_bucket = self.geometry.values_per_bucket();
        let expanded: Vec<Ciphertext> = (query.parts.par_iter())
            .flat_map_iter(|part| {
                let ct = Ciphertext {
                    c0: part.c0.clone(),
                    c1: seeded_c1(&part.seed),
                };
                expand(&ct, &key.expansion, part.levels)
            })
            .collect();
        let buckets = self.geometry.buckets.len();
        assert!(expanded.len() >= buckets * per_bucket, "a query too short");
        let picked: Vec<Ciphertext> = (0..buckets)
            .into_par_iter()
            .map(|b| self.bucket(key, b, &expanded[b * per_bucket..(b + 1) * per_bucket]))
            .collect();
        picked
            .chunks(BUCKETS_PER_ANSWER)
            .map(|group| {
                let mut sum = group[0].clone();
                for (class, ct) in group.iter().enumerate().skip(1) {
                    sum = sum.add(&ct.times_monomial(class as i64));
                }
                FetchAnswer {
                    c0: sum
                        .c0
                        .iter()
                        .map(|&x| switch(x, ANSWER_C0_BITS) as u16)
                        .collect(),
                    c1: sum
                        .c1
                        .iter()
                        .map(|&x| switch(x, ANSWER_C1_BITS) as u32)
                        .collect(),
                }
            })
            .collect()
    }

    /// One bucket's record in residue class 0 (times 8 by the trace, which the selector's scale
    /// Q / 2^13 makes the plaintext scale).
    fn bucket(&self, key: &FetchKey, bucket: usize, values: &[Ciphertext]) -> Ciphertext {
        let ntt = Ntt::of(D);
        let rows = self.geometry.rows;
        // First dimension: column j of the selected row, for every j.
        let mut columns: Vec<(Vec<u64>, Vec<u64>)> = vec![(vec![0; D], vec![0; D]); FOLD];
        for (row, selector) in values[..rows].iter().enumerate() {
            let (mut s0, mut s1) = (selector.c0.clone(), selector.c1.clone());
            ntt.fwd(&mut s0);
            ntt.fwd(&mut s1);
            for (column, (a0, a1)) in columns.iter_mut().enumerate() {
                let p = self.plaintext(bucket, row, column);
                ntt.mul_accumulate(a0, &s0, &p);
                ntt.mul_accumulate(a1, &s1, &p);
            }
        }
        let mut level: Vec<Ciphertext> = columns
            .into_iter()
            .map(|(mut c0, mut c1)| {
                ntt.inv(&mut c0);
                ntt.inv(&mut c1);
                Ciphertext { c0, c1 }
            })
            .collect();
        let bits: Vec<EncryptedBit> = values[rows..]
            .chunks_exact(BIT_GADGET.digits)
            .map(|regev| EncryptedBit::from_regev(regev, BIT_GADGET))
            .collect();
        // Fold: bit k of the column picks between pairs.
        for bit in &bits[..3] {
            level = level
                .chunks_exact(2)
                .map(|pair| cmux(bit, &key.square, &pair[0], &pair[1]))
                .collect();
        }
        let mut x = level.pop().expect("one plaintext left");
        // Rotation: bit k of the class moves it down by 2^k.
        for (k, bit) in bits[3..].iter().enumerate() {
            x = cmux(bit, &key.square, &x, &x.times_monomial(-(1 << k)));
        }
        // Trace onto residue class 0: x + τ(x) with the first three expansion keys.
        for j in 0..3 {
            x = x.add(&x.automorphism(key.expansion.key(j)));
        }
        x
    }
}
