//! The client's side: queries for a record, and decoding their answer with the hint.

use rand::{CryptoRng, Rng, RngCore};
use rayon::prelude::*;

use crate::error::PirError;
use crate::gauss::Gaussian;
use crate::matrix;
use crate::params::{Params, Shape};
use crate::wire::{Answer, Hint, Query};

/// What a client keeps between a query and its answer: the record asked for and the LWE
/// secrets. Secret: never sent, never logged.
pub struct Fetch {
    params: &'static Params,
    shape: Shape,
    record: usize,
    /// chunks × n.
    secrets: Vec<u32>,
}

impl std::fmt::Debug for Fetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetch").finish_non_exhaustive()
    }
}

impl Fetch {
    /// The record this fetch asks for.
    pub fn record(&self) -> usize {
        self.record
    }
}

impl Hint {
    /// The queries that fetch record `record`, one per chunk, each with a fresh secret and
    /// error: q_j = A·s_j + e_j + Δ·u_{chunks·record + j}. Their bytes have one length whatever
    /// the record, and under LWE they are indistinguishable from uniform.
    pub fn query(
        &self,
        record: usize,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(Query, Fetch), PirError> {
        let shape = self.shape;
        if record >= shape.records {
            return Err(PirError::NoSuchRecord {
                index: record,
                records: shape.records,
            });
        }
        let n = self.params.lwe_dimension;
        let columns = shape.columns();
        let gaussian = Gaussian::new(self.params.sigma);
        let mut secrets = vec![0u32; shape.chunks * n];
        gaussian.fill(rng, &mut secrets);
        let mut values = matrix::query_product(&self.seed, n, columns, &secrets);
        let mut errors = vec![0u32; columns];
        for (j, q) in values.chunks_exact_mut(columns).enumerate() {
            gaussian.fill(rng, &mut errors);
            for (x, e) in q.iter_mut().zip(&errors) {
                *x = x.wrapping_add(*e);
            }
            let selected = &mut q[shape.chunks * record + j];
            *selected = selected.wrapping_add(self.params.delta());
        }
        let query = Query {
            params: self.params,
            shape,
            values,
        };
        let fetch = Fetch {
            params: self.params,
            shape,
            record,
            secrets,
        };
        Ok((query, fetch))
    }

    /// Queries for a record chosen uniformly at random: what a client sends when it has nothing
    /// to fetch but must not show it (the answer is decoded and thrown away).
    pub fn dummy_query(&self, rng: &mut (impl RngCore + CryptoRng)) -> (Query, Fetch) {
        let record = rng.gen_range(0..self.shape.records);
        self.query(record, rng).expect("a record of the database")
    }

    /// The record `fetch` asked for, from the server's `answer`: record_bytes bytes, padding
    /// included. A wrong byte is possible only with the probability of
    /// [`Params::log2_record_failure`] or when the server misbehaves; callers that need
    /// integrity authenticate the record itself (attachments are sealed).
    pub fn decode(&self, fetch: &Fetch, answer: &Answer) -> Result<Vec<u8>, PirError> {
        let half_delta = self.params.delta() / 2;
        let plain_shift = 32 - self.params.plaintext_bits;
        // v = Δ·(byte - 128) + noise; byte = round(v / Δ) + 128 mod 256.
        Ok(self
            .unmasked(fetch, answer)?
            .into_iter()
            .map(|v| (v.wrapping_add(half_delta) >> plain_shift) as u8 ^ 0x80)
            .collect())
    }

    /// answer - round(H)·s for every chunk: Δ·(byte - 128) plus the noise, record order.
    pub(crate) fn unmasked(&self, fetch: &Fetch, answer: &Answer) -> Result<Vec<u32>, PirError> {
        let shape = self.shape;
        if fetch.params != self.params || fetch.shape != shape {
            return Err(PirError::Mismatch {
                what: "fetch",
                why: "made with another hint".into(),
            });
        }
        let rows = shape.rows();
        if answer.params != self.params || answer.rows != rows || answer.count() != shape.chunks {
            return Err(PirError::Mismatch {
                what: "answer",
                why: format!(
                    "{} answers of {} rows, expected {} of {rows}",
                    answer.count(),
                    answer.rows,
                    shape.chunks
                ),
            });
        }
        let n = self.params.lwe_dimension;
        let hint_shift = 32 - self.params.hint_bits;
        let answer_shift = 32 - self.params.answer_bits;
        let mut out = vec![0u32; shape.record_bytes];
        out.par_chunks_mut(rows)
            .zip(fetch.secrets.par_chunks_exact(n))
            .zip(answer.values.par_chunks_exact(rows))
            .for_each(|((out, s), a)| {
                for (w, v) in out.iter_mut().enumerate() {
                    let mask = matrix::dot(&self.values[w * n..(w + 1) * n], s) << hint_shift;
                    *v = (a[w] << answer_shift).wrapping_sub(mask);
                }
            });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use crate::{Database, Params, Shape, PIR_V1};

    /// Variance of one decoded element's noise, by the analysis of [`Params::log2_byte_failure`]
    /// (with the variances, not the bounds, of the two roundings): σ²·Σ_c d² from D·e,
    /// n·σ²·4^r/12 from the hint's rounding (r bits dropped), 4^r'/12 from the answer's.
    fn predicted_variance(params: &Params, sum_d2: f64) -> f64 {
        let s2 = params.sigma * params.sigma;
        let hint = f64::powi(2.0, 2 * (32 - params.hint_bits as i32)) / 12.0;
        let answer = f64::powi(2.0, 2 * (32 - params.answer_bits as i32)) / 12.0;
        s2 * sum_d2 + params.lwe_dimension as f64 * s2 * hint + answer
    }

    /// Fetches every record once and returns (error, predicted variance) for every element.
    fn noise_of(params: &'static Params, shape: Shape, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let records: Vec<Vec<u8>> = (0..shape.records)
            .map(|_| {
                (0..shape.record_bytes)
                    .map(|_| rand::Rng::gen(&mut rng))
                    .collect()
            })
            .collect();
        let db = Database::from_records(params, shape, records.iter().map(|r| &r[..])).unwrap();
        let hint = db.preprocess([5; 32]);
        let rows = shape.rows();
        // Σ_c d² of every database row.
        let sum_d2: Vec<f64> = (0..rows)
            .map(|w| {
                (0..shape.columns())
                    .map(|c| {
                        let d = f64::from(records[c / shape.chunks][(c % shape.chunks) * rows + w])
                            - 128.0;
                        d * d
                    })
                    .sum()
            })
            .collect();
        let mut out = Vec::new();
        for (i, record) in records.iter().enumerate() {
            let (query, fetch) = hint.query(i, &mut rng).unwrap();
            let answer = db.answer(&query).unwrap();
            let v = hint.unmasked(&fetch, &answer).unwrap();
            for (at, (&v, &byte)) in v.iter().zip(record).enumerate() {
                let signal = ((i32::from(byte) - 128) as u32).wrapping_mul(params.delta());
                let error = f64::from(v.wrapping_sub(signal) as i32);
                out.push((error, predicted_variance(params, sum_d2[at % rows])));
            }
        }
        out
    }

    #[test]
    fn measured_noise_matches_the_prediction() {
        let shape = Shape {
            records: 16,
            record_bytes: 4096,
            chunks: 16,
        };
        let noise = noise_of(&PIR_V1, shape, 1);
        // Mean of error² / predicted variance: 1 within sampling error (65,536 samples).
        let ratio = noise.iter().map(|(e, v)| e * e / v).sum::<f64>() / noise.len() as f64;
        eprintln!(
            "noise: measured / predicted variance = {ratio:.4} over {} elements",
            noise.len()
        );
        assert!(
            (0.95..1.05).contains(&ratio),
            "measured / predicted variance = {ratio}"
        );
        let worst = noise.iter().map(|(e, _)| e.abs()).fold(0.0, f64::max);
        assert!(
            worst < f64::from(PIR_V1.delta()) / 8.0,
            "largest error {worst}"
        );
    }

    /// erfc by Abramowitz and Stegun 7.1.26 (absolute error below 1.5·10^-7).
    fn erfc(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736
                    + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        poly * (-x * x).exp()
    }

    #[test]
    fn failure_rate_with_inflated_noise_matches_the_prediction() {
        // σ = 11·8: eight times the secure value, so that bytes fail often enough to count.
        static NOISY: Params = Params {
            sigma: 11.0 * 8.0,
            name: "noisy-test",
            ..PIR_V1
        };
        let shape = Shape {
            records: 16,
            record_bytes: 4096,
            chunks: 16,
        };
        let noise = noise_of(&NOISY, shape, 2);
        let half_delta = f64::from(NOISY.delta()) / 2.0;
        let failures = noise.iter().filter(|(e, _)| e.abs() >= half_delta).count() as f64;
        // Gaussian tail per element, summed: the expected number of wrong bytes.
        let expected: f64 = noise
            .iter()
            .map(|(_, v)| erfc(half_delta / (2.0 * v).sqrt()))
            .sum();
        let bound = f64::powf(2.0, NOISY.log2_byte_failure(shape.columns())) * noise.len() as f64;
        eprintln!(
            "inflated noise: {failures} wrong bytes, {expected:.1} expected, bound {bound:.0}"
        );
        assert!(
            expected > 100.0,
            "the test needs failures to count: {expected}"
        );
        assert!(
            (failures - expected).abs() < 5.0 * expected.sqrt() + 0.05 * expected,
            "{failures} wrong bytes, {expected:.0} expected"
        );
        assert!(
            failures <= bound,
            "{failures} wrong bytes over the bound {bound:.0}"
        );
    }
}
