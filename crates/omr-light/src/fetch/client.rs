//! The recipient's side of the fetch: its secret, the one-time key, the query of a round and
//! the decoding of the answers.

use rand::RngCore;

use super::layout::{decode_record, Geometry, Position, BIT_GADGET, CLASSES, PLAIN_BITS};
use super::MIN_PART_LEVELS;
use super::{chunk_levels, FetchAnswer, FetchKey, FetchQuery, QueryPart, BUCKETS_PER_ANSWER};
use super::{ANSWER_C0_BITS, ANSWER_C1_BITS};
use crate::expand::{place, ExpansionKeys};
use crate::params::PRIME_Q as Q;
use crate::ring::exact_product;
use crate::rlwe::{Secret, D};
use crate::sample::stream;

/// The scale of a selector: Q / 2^13, so that the trace's factor 8 brings the record to the
/// plaintext scale Q / 2^10.
pub(crate) fn selector_scale() -> u64 {
    Q >> (PLAIN_BITS + 3)
}

/// A recipient's fetch secret.
pub struct FetchSecret {
    pub(crate) secret: Secret,
    coefficients: Vec<i64>,
}

impl std::fmt::Debug for FetchSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FetchSecret { .. }")
    }
}

impl FetchSecret {
    /// The fetch secret of a recipient's 32-byte seed (a stream of its own).
    pub fn from_seed(seed: &[u8; 32]) -> FetchSecret {
        let mut rng = stream(seed, 2);
        let coefficients = crate::sample::cbd1(&mut rng, D);
        FetchSecret {
            secret: Secret::from_coefficients(coefficients.clone()),
            coefficients,
        }
    }

    /// The one-time key: the 12 expansion keys and the key switching key from S² to S.
    pub fn key(&self, rng: &mut impl RngCore) -> FetchKey {
        FetchKey {
            expansion: ExpansionKeys::generate(&self.secret, MIN_PART_LEVELS, rng),
            square: self.secret.square_key(rng),
        }
    }

    /// The query of one round: `wanted` are (bucket, board index) pairs from
    /// [`super::layout::assign`]; every other bucket asks for its first record.
    pub fn query(
        &self,
        geometry: &Geometry,
        wanted: &[(usize, u64)],
        rng: &mut impl RngCore,
    ) -> FetchQuery {
        let per_bucket = geometry.values_per_bucket();
        let mut values = vec![0u64; geometry.buckets.len() * per_bucket];
        for (b, block) in values.chunks_exact_mut(per_bucket).enumerate() {
            let at = wanted.iter().find(|w| w.0 == b);
            let p = at
                .and_then(|&(_, index)| geometry.position(b, index))
                .unwrap_or(Position::of(0));
            block[p.row] = selector_scale();
            let bits = (0..3).map(|k| (p.column >> k) & 1);
            let bits = bits.chain((0..3).map(|k| (p.class >> k) & 1));
            for (k, bit) in bits.enumerate() {
                for i in 0..BIT_GADGET.digits {
                    let at = geometry.rows + k * BIT_GADGET.digits + i;
                    block[at] = BIT_GADGET.factor(i) * bit as u64;
                }
            }
        }
        let mut parts = Vec::new();
        let mut rest = &values[..];
        for levels in chunk_levels(values.len()) {
            let take = rest.len().min(1 << levels);
            let m = place(&rest[..take], levels);
            rest = &rest[take..];
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            let c0 = self.secret.encrypt_seeded(&m, &seed, rng);
            parts.push(QueryPart { levels, seed, c0 });
        }
        FetchQuery {
            range: geometry.range,
            rows: geometry.rows,
            buckets: geometry.buckets.len(),
            parts,
        }
    }

    /// The records of `wanted` from the answers to its round (a record that comes back is
    /// [`super::layout::RECORD_BYTES`] long, zero-padded).
    pub fn decode(&self, wanted: &[(usize, u64)], answers: &[FetchAnswer]) -> Vec<(u64, Vec<u8>)> {
        wanted
            .iter()
            .map(|&(bucket, index)| {
                let answer = &answers[bucket / BUCKETS_PER_ANSWER];
                let class = bucket % BUCKETS_PER_ANSWER;
                let values = self.decrypt(answer);
                let coefficients: Vec<u16> = (0..D / CLASSES)
                    .map(|u| values[u * CLASSES + class])
                    .collect();
                (index, decode_record(&coefficients))
            })
            .collect()
    }

    /// The 10-bit plaintext of one answer: c0·2^4 + c1·S modulo 2^18, rounded to 10 bits.
    fn decrypt(&self, answer: &FetchAnswer) -> Vec<u16> {
        let c1: Vec<i64> = answer.c1.iter().map(|&v| v as i64).collect();
        let c1_s = exact_product(&c1, &self.coefficients);
        let shift = ANSWER_C1_BITS - ANSWER_C0_BITS;
        let modulus = 1i64 << ANSWER_C1_BITS;
        let drop = ANSWER_C1_BITS - PLAIN_BITS;
        (0..D)
            .map(|i| {
                let phase = ((answer.c0[i] as i64) << shift) + c1_s[i];
                let phase = phase.rem_euclid(modulus);
                let rounded = (phase + (1 << (drop - 1))) >> drop;
                (rounded & ((1 << PLAIN_BITS) - 1)) as u16
            })
            .collect()
    }
}
