//! The server's side of the fetch: the records of the served epochs, and the answer to one
//! round's query (module docs of `fetch` for the steps).
//!
//! Expansion yields a query's values in order, depth first and in parallel subtrees
//! (`expand::expand_each`); each value goes straight to its bucket (a selector is multiplied
//! into the bucket's eight column sums, a bit's row is kept), and a bucket whose values are
//! all in is folded, rotated and traced at once. So the memory in flight is a few buckets, not
//! the thousands of expanded ciphertexts.

use std::collections::HashMap;
use std::sync::Mutex;

use rayon::prelude::*;

use super::layout::{encode_record, Geometry, BIT_GADGET, CLASSES, FOLD, PLAIN_BITS};
use super::layout::{ENCRYPTED_BITS, RECORDS_PER_ROW};
use super::BUCKETS_PER_ANSWER;
use super::{FetchAnswer, FetchKey, FetchQuery, ANSWER_C0_BITS, ANSWER_C1_BITS};
use crate::cmux::{cmux, EncryptedBit};
use crate::expand::{expand_each, MAX_LEVELS};
use crate::ring::{lift, switch, Ntt};
use crate::rlwe::{seeded_c1, Ciphertext, D};

/// The records of a snapshot and its geometry.
pub struct FetchDb {
    geometry: Geometry,
    /// Every record's coefficients, centred mod 2^10, as residues.
    records: HashMap<u64, Vec<u64>>,
    /// Every plaintext in the NTT domain, bucket by bucket, row by row (`prepare`).
    prepared: Option<Vec<Vec<u64>>>,
}

impl std::fmt::Debug for FetchDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchDb")
            .field("records", &self.records.len())
            .field("rows", &self.geometry.rows)
            .field("prepared", &self.prepared.is_some())
            .finish()
    }
}

/// A bucket while its values come in.
struct Pending {
    /// Column sums of the first dimension, NTT domain.
    columns: Vec<(Vec<u64>, Vec<u64>)>,
    /// The bits' Regev rows as they arrive.
    rows: Vec<Option<Ciphertext>>,
    /// Values received.
    received: usize,
}

impl FetchDb {
    /// The database of `records` (board index, bytes ≤ RECORD_BYTES) in `buckets` buckets.
    pub fn new(records: impl IntoIterator<Item = (u64, Vec<u8>)>, buckets: usize) -> FetchDb {
        let centre = |v: u16| {
            let v = i64::from(v);
            lift(if v >= 1 << (PLAIN_BITS - 1) {
                v - (1 << PLAIN_BITS)
            } else {
                v
            })
        };
        let records: HashMap<u64, Vec<u64>> = (records.into_iter())
            .map(|(index, bytes)| {
                (
                    index,
                    encode_record(&bytes).into_iter().map(centre).collect(),
                )
            })
            .collect();
        let mut indices: Vec<u64> = records.keys().copied().collect();
        indices.sort_unstable();
        FetchDb {
            geometry: Geometry::new(indices, buckets),
            records,
            prepared: None,
        }
    }

    /// Transforms every plaintext once (32 KiB each: 3 × 8 KiB per 640-byte record, the three
    /// copies at 62 bits a coefficient), so that an answer only multiplies: about a fifth of an
    /// answer's CPU, paid once per snapshot instead.
    pub fn prepare(&mut self) {
        let rows = self.geometry.rows;
        let cells: Vec<(usize, usize, usize)> = (0..self.geometry.buckets.len())
            .flat_map(|b| (0..rows).flat_map(move |r| (0..FOLD).map(move |c| (b, r, c))))
            .collect();
        let prepared = (cells.par_iter())
            .map(|&(b, r, c)| {
                let mut p = vec![0u64; D];
                self.plaintext(b, r, c, &mut p);
                p
            })
            .collect();
        self.prepared = Some(prepared);
    }

    /// Bytes [`FetchDb::prepare`] would keep.
    pub fn prepared_bytes_if_prepared(&self) -> usize {
        self.geometry.buckets.len() * self.geometry.rows * FOLD * D * 8
    }

    /// Bytes the prepared plaintexts take (0 before [`FetchDb::prepare`]).
    pub fn prepared_bytes(&self) -> usize {
        self.prepared.as_ref().map_or(0, |p| p.len() * D * 8)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Plaintext `column` of grid row `row` of bucket `bucket`, NTT domain: the record at
    /// bucket position row·64 + column·8 + c in residue class c.
    fn plaintext(&self, bucket: usize, row: usize, column: usize, out: &mut [u64]) {
        out.fill(0);
        let indices = &self.geometry.buckets[bucket];
        for class in 0..CLASSES {
            let at = row * RECORDS_PER_ROW + column * CLASSES + class;
            let Some(record) = indices.get(at).map(|i| &self.records[i]) else {
                break;
            };
            for (u, &v) in record.iter().enumerate() {
                out[u * CLASSES + class] = v;
            }
        }
        Ntt::of(D).fwd(out);
    }

    /// Why `query` is not for this snapshot, if it is not.
    pub fn check(&self, query: &FetchQuery) -> Result<(), String> {
        let g = &self.geometry;
        if query.range != g.range || query.rows != g.rows || query.buckets != g.buckets.len() {
            return Err(format!(
                "the query is for board indices {}..{} in {} buckets of {} rows; this snapshot \
                 is {}..{} in {} buckets of {} rows",
                query.range.0,
                query.range.1,
                query.buckets,
                query.rows,
                g.range.0,
                g.range.1,
                g.buckets.len(),
                g.rows
            ));
        }
        Ok(())
    }

    /// The answers to `query` (one per 8 buckets); refused when [`FetchDb::check`] refuses it.
    pub fn answer(&self, key: &FetchKey, query: &FetchQuery) -> Result<Vec<FetchAnswer>, String> {
        self.check(query)?;
        let per_bucket = self.geometry.values_per_bucket();
        let buckets = self.geometry.buckets.len();
        let pending: Vec<Mutex<Option<Pending>>> = (0..buckets).map(|_| Mutex::new(None)).collect();
        let done: Vec<Mutex<Option<Ciphertext>>> = (0..buckets).map(|_| Mutex::new(None)).collect();
        // Part i carries the values from the sum of the parts before it, as many as fit.
        let total = buckets * per_bucket;
        let mut first = 0;
        let mut parts = Vec::with_capacity(query.parts.len());
        for part in &query.parts {
            let count = (1usize << part.levels).min(total - first);
            parts.push((part, first, count));
            first += count;
        }
        parts.par_iter().for_each(|&(part, first, count)| {
            let ct = Ciphertext {
                c0: part.c0.clone(),
                c1: seeded_c1(&part.seed),
            };
            expand_each(ct, &key.expansion, part.levels, count, &|v, ct| {
                let v = first + v;
                let (b, k) = (v / per_bucket, v % per_bucket);
                if let Some(finished) = self.receive(b, k, ct, &pending[b]) {
                    *done[b].lock().expect("bucket") = Some(self.finish(key, finished));
                }
            });
        });
        let picked: Vec<Ciphertext> = (done.into_iter())
            .map(|d| {
                d.into_inner()
                    .expect("bucket")
                    .expect("a query covers every bucket")
            })
            .collect();
        Ok(picked
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
            .collect())
    }

    /// Value k of bucket b: a selector goes into the column sums, a bit's row is kept. Returns
    /// the bucket once its last value is in.
    fn receive(
        &self,
        b: usize,
        k: usize,
        ct: Ciphertext,
        slot: &Mutex<Option<Pending>>,
    ) -> Option<Pending> {
        let ntt = Ntt::of(D);
        let rows = self.geometry.rows;
        let mut guard = slot.lock().expect("bucket");
        let state = guard.get_or_insert_with(|| Pending {
            columns: vec![(vec![0; D], vec![0; D]); FOLD],
            rows: vec![None; ENCRYPTED_BITS * BIT_GADGET.digits],
            received: 0,
        });
        if k < rows {
            let (s0, s1) = (ct.c0, ct.c1);
            let mut scratch = vec![0u64; D];
            for (column, (a0, a1)) in state.columns.iter_mut().enumerate() {
                let p = match &self.prepared {
                    Some(prepared) => &prepared[(b * rows + k) * FOLD + column],
                    None => {
                        self.plaintext(b, k, column, &mut scratch);
                        &scratch
                    }
                };
                ntt.mul_accumulate(a0, &s0, p);
                ntt.mul_accumulate(a1, &s1, p);
            }
        } else {
            state.rows[k - rows] = Some(ct);
        }
        state.received += 1;
        (state.received == self.geometry.values_per_bucket()).then(|| guard.take().expect("state"))
    }

    /// One bucket's record in residue class 0 (times 8 by the trace, which the selector's scale
    /// Q / 2^13 makes the plaintext scale).
    fn finish(&self, key: &FetchKey, state: Pending) -> Ciphertext {
        let ntt = Ntt::of(D);
        let mut level: Vec<Ciphertext> = (state.columns.into_iter())
            .map(|(mut c0, mut c1)| {
                ntt.inv(&mut c0);
                ntt.inv(&mut c1);
                Ciphertext { c0, c1 }
            })
            .collect();
        let mut rows = state.rows.into_iter().map(|r| r.expect("every row in"));
        let bits: Vec<EncryptedBit> = (0..ENCRYPTED_BITS)
            .map(|_| {
                let regev = rows.by_ref().take(BIT_GADGET.digits).collect();
                EncryptedBit::from_regev(regev, BIT_GADGET)
            })
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
            x = x.add(&x.automorphism(key.expansion.key(j, MAX_LEVELS)));
        }
        x
    }
}
