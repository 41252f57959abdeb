//! GLWE keyswitching modulo p in the NTT domain: the signed gadget decomposition, the expanded
//! key, its seeded transport form and that form's encoding.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::field::{add, from_i64, mul, neg, sub};
use super::glwe::{tuniform, uniform_mod_p, PrimeGlweKey};
use super::ntt::Ntt;
use crate::codec::Reader;
use crate::error::OmrError;
use crate::params::PRIME_P as P;

/// Signed gadget decomposition modulo p with gadget g_j = p / B^j, j = 1..=levels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decomposer {
    pub(crate) base_log: usize,
    pub(crate) levels: usize,
}

impl Decomposer {
    /// Gadget values round(p / B^j).
    pub(crate) fn gadget(&self) -> Vec<u64> {
        (1..=self.levels)
            .map(|j| {
                let denom = 1u128 << (self.base_log * j);
                ((P as u128 + denom / 2) / denom) as u64
            })
            .collect()
    }

    /// Digits d_1..d_l (level-major into `out[j]`) with x ≈ Σ_j d_j · p/B^j, |d_j| ≤ B/2.
    #[inline]
    pub(crate) fn decompose(&self, x: u64, out: &mut [i64]) {
        let total = self.base_log * self.levels;
        let scale = 1u128 << total;
        let mut y = ((x as u128 * scale + P as u128 / 2) / P as u128) as u64;
        // y ∈ [0, B^l]; B^l ≡ 0.
        y &= (scale - 1) as u64;
        let b = 1u64 << self.base_log;
        let half = b >> 1;
        let mut carry = 0u64;
        for j in (0..self.levels).rev() {
            // d ∈ [0, B]; digits end up in [-B/2, B/2).
            let d = (y & (b - 1)) + carry;
            y >>= self.base_log;
            if d >= half {
                out[j] = d as i64 - b as i64;
                carry = 1;
            } else {
                out[j] = d as i64;
                carry = 0;
            }
        }
    }
}

/// A GLWE keyswitching key modulo p from a key with `k_in` polynomials to one with `k_out`,
/// held in the NTT domain. Row (i, j) encrypts S_in[i]·g_j under S_out.
#[derive(Debug, Clone)]
pub(crate) struct PrimeKeyswitchKey {
    pub(crate) k_in: usize,
    pub(crate) k_out: usize,
    pub(crate) decomposer: Decomposer,
    /// (k_in · levels) rows of (k_out + 1) NTT-domain polynomials.
    pub(crate) rows: Vec<u64>,
}

/// The transportable form: a 32-byte mask seed and the coefficient-domain bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeededPrimeKeyswitchKey {
    pub(crate) k_in: usize,
    pub(crate) k_out: usize,
    pub(crate) decomposer_base_log: usize,
    pub(crate) levels: usize,
    pub(crate) seed: [u8; 32],
    pub(crate) bodies: Vec<u64>,
}

impl SeededPrimeKeyswitchKey {
    pub(crate) fn generate(
        ntt: &Ntt,
        from: &PrimeGlweKey,
        to: &PrimeGlweKey,
        decomposer: Decomposer,
        noise_bound_log2: u32,
        rng: &mut impl RngCore,
    ) -> Self {
        let n = ntt.n;
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let mut mask_rng = ChaCha20Rng::from_seed(seed);
        let gadget = decomposer.gadget();
        let to_ntt: Vec<Vec<u64>> = to
            .polys
            .iter()
            .map(|s| {
                let mut s = s.clone();
                ntt.fwd(&mut s);
                s
            })
            .collect();
        let mut bodies = Vec::with_capacity(from.k() * decomposer.levels * n);
        for s_in in &from.polys {
            for g in &gadget {
                let mut acc = vec![0u64; n];
                for s_out in &to_ntt {
                    let mut a: Vec<u64> = (0..n).map(|_| uniform_mod_p(&mut mask_rng)).collect();
                    ntt.fwd(&mut a);
                    ntt.mul_acc(&mut acc, &a, s_out);
                }
                ntt.inv(&mut acc);
                for (&as_, &s) in acc.iter().zip(s_in) {
                    let e = from_i64(tuniform(rng, noise_bound_log2));
                    let m = mul(s, *g);
                    bodies.push(add(add(as_, e), m));
                }
            }
        }
        SeededPrimeKeyswitchKey {
            k_in: from.k(),
            k_out: to.k(),
            decomposer_base_log: decomposer.base_log,
            levels: decomposer.levels,
            seed,
            bodies,
        }
    }

    /// Regenerate the masks and move everything to the NTT domain.
    pub(crate) fn expand(&self, ntt: &Ntt) -> PrimeKeyswitchKey {
        let n = ntt.n;
        let mut mask_rng = ChaCha20Rng::from_seed(self.seed);
        let row_len = (self.k_out + 1) * n;
        let mut rows = vec![0u64; self.k_in * self.levels * row_len];
        for (r, row) in rows.chunks_exact_mut(row_len).enumerate() {
            for m in 0..self.k_out {
                let poly = &mut row[m * n..(m + 1) * n];
                for c in poly.iter_mut() {
                    *c = uniform_mod_p(&mut mask_rng);
                }
                ntt.fwd(poly);
            }
            let body = &mut row[self.k_out * n..];
            body.copy_from_slice(&self.bodies[r * n..(r + 1) * n]);
            ntt.fwd(body);
        }
        PrimeKeyswitchKey {
            k_in: self.k_in,
            k_out: self.k_out,
            decomposer: Decomposer {
                base_log: self.decomposer_base_log,
                levels: self.levels,
            },
            rows,
        }
    }

    pub(crate) fn expected_body_len(k_in: usize, levels: usize, n: usize) -> usize {
        k_in * levels * n
    }

    /// Append the seed and the little-endian bodies, as [`read_from`](Self::read_from) reads them.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seed);
        for b in &self.bodies {
            out.extend_from_slice(&b.to_le_bytes());
        }
    }

    /// Read a key of the given shape; every body coefficient must be below p.
    pub(crate) fn read_from(
        r: &mut Reader<'_>,
        k_in: usize,
        k_out: usize,
        base_log: usize,
        levels: usize,
        n: usize,
    ) -> Result<Self, OmrError> {
        let seed = r.array32()?;
        let bodies = r.u64s(Self::expected_body_len(k_in, levels, n))?;
        if bodies.iter().any(|&b| b >= P) {
            return Err(r.err("prime-modulus key coefficient out of range"));
        }
        Ok(SeededPrimeKeyswitchKey {
            k_in,
            k_out,
            decomposer_base_log: base_log,
            levels,
            seed,
            bodies,
        })
    }
}

/// Scratch space for [`PrimeKeyswitchKey::keyswitch`].
#[derive(Debug, Default)]
pub(crate) struct KsScratch {
    digits: Vec<i64>,
    digit_polys: Vec<u64>,
    acc: Vec<u64>,
}

impl PrimeKeyswitchKey {
    /// Keyswitch a coefficient-domain GLWE (k_in + 1 polynomials) into `out` (k_out + 1).
    pub(crate) fn keyswitch(&self, ntt: &Ntt, input: &[u64], out: &mut [u64], s: &mut KsScratch) {
        let n = ntt.n;
        let levels = self.decomposer.levels;
        let k_out = self.k_out;
        s.digits.resize(levels, 0);
        s.digit_polys.resize(levels * n, 0);
        s.acc.clear();
        s.acc.resize((k_out + 1) * n, 0);
        let row_len = (k_out + 1) * n;
        for i in 0..self.k_in {
            let a = &input[i * n..(i + 1) * n];
            for (c, &x) in a.iter().enumerate() {
                self.decomposer.decompose(x, &mut s.digits);
                for j in 0..levels {
                    s.digit_polys[j * n + c] = from_i64(s.digits[j]);
                }
            }
            for j in 0..levels {
                let d = &mut s.digit_polys[j * n..(j + 1) * n];
                ntt.fwd(d);
                let row = &self.rows[(i * levels + j) * row_len..(i * levels + j + 1) * row_len];
                for m in 0..=k_out {
                    ntt.mul_acc(&mut s.acc[m * n..(m + 1) * n], d, &row[m * n..(m + 1) * n]);
                }
            }
        }
        for m in 0..=k_out {
            ntt.inv(&mut s.acc[m * n..(m + 1) * n]);
        }
        // out = (0, B) - Σ D·KSK
        let body_in = &input[self.k_in * n..(self.k_in + 1) * n];
        for m in 0..k_out {
            for c in 0..n {
                out[m * n + c] = neg(s.acc[m * n + c]);
            }
        }
        for c in 0..n {
            out[k_out * n + c] = sub(body_in[c], s.acc[k_out * n + c]);
        }
    }
}
