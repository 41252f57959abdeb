//! Key switching in the ring of `rlwe`: gadget decompositions, key switching keys (their rows
//! seeded, with a wire format), the keys of the automorphisms X ↦ X^k and the switched
//! automorphism of a ciphertext. Query expansion, the CMux and the trace are built on it.

use std::sync::Arc;

use omr_core::OmrError;
use rand::RngCore;

use crate::params::PRIME_Q as Q;
use crate::ring::{add, centered, lift, mul, Ntt};
use crate::rlwe::{automorphism, ntt_automorphism, seeded_c1, Ciphertext, Secret, D};

/// A gadget decomposition: `digits` signed digits of `bits` bits each cover a centred residue
/// (the last digit takes what is left). More digits: less noise, more NTTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gadget {
    pub bits: u32,
    pub digits: usize,
}

/// Key switching's usual gadget: 4 digits of 16 bits (noise variance ≈ D·2^30/2 per switch).
pub const COARSE: Gadget = Gadget {
    bits: 16,
    digits: 4,
};
/// The fine gadget: 8 digits of 8 bits (≈ 2^15 times less variance, twice the NTTs).
pub const FINE: Gadget = Gadget { bits: 8, digits: 8 };
/// Between the two: 6 digits of 11 bits (the encrypted bits of the payload fetch).
pub const MEDIUM: Gadget = Gadget {
    bits: 11,
    digits: 6,
};

impl Gadget {
    /// g_i = 2^(bits·i).
    pub fn factor(&self, i: usize) -> u64 {
        lift(1i64 << (self.bits as usize * i))
    }

    /// The variance of Σ_i digit_i·e_i over D coefficients for errors of variance `error_var`
    /// (digits uniform below 2^(bits−1) but the last, which is below 2^(62 − bits·(digits−1)
    /// − 1)).
    pub fn noise_variance(&self, error_var: f64) -> f64 {
        let full = (self.digits - 1) as f64 * f64::powi(2.0, 2 * self.bits as i32) / 12.0;
        let last_bits = 62 - self.bits as i32 * (self.digits as i32 - 1);
        let last = f64::powi(2.0, 2 * last_bits) / 12.0;
        D as f64 * (full + last) * error_var
    }
}

/// A key switching key from a secret m to S: for every digit i of `gadget`, (b_i, a_i) with
/// b_i = −a_i·S + e_i + g_i·m, in the NTT domain; a_i is expanded from a seed, so only the
/// seed and b_i travel.
pub struct SwitchKey {
    gadget: Gadget,
    seeds: Vec<[u8; 32]>,
    rows: Vec<(Vec<u64>, Vec<u64>)>,
}

impl std::fmt::Debug for SwitchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchKey")
            .field("gadget", &self.gadget)
            .finish()
    }
}

/// Bytes of one row on the wire: its seed and b_i at 62 bits a coefficient.
pub const ROW_BYTES: usize = 32 + D * 62 / 8;

impl SwitchKey {
    pub fn gadget(&self) -> Gadget {
        self.gadget
    }

    /// The ciphertext (in the NTT domain) of c·m under S, for a polynomial c.
    pub fn apply_ntt(&self, c: &[u64]) -> (Vec<u64>, Vec<u64>) {
        gadget_product_ntt(&decompose_ntt(c, self.gadget), &self.rows)
    }

    /// Its rows: seed, then b_i (coefficient domain) packed at 62 bits.
    pub fn write(&self, out: &mut Vec<u8>) {
        for (seed, (b, _)) in self.seeds.iter().zip(&self.rows) {
            out.extend_from_slice(seed);
            let mut b = b.clone();
            Ntt::of(D).inv(&mut b);
            omr_core::codec::pack_bits(out, b, 62);
        }
    }

    /// The key of `gadget` written by [`SwitchKey::write`]; refuses residues not below Q.
    pub fn read(
        r: &mut omr_core::codec::Reader<'_>,
        gadget: Gadget,
    ) -> Result<SwitchKey, OmrError> {
        let ntt = Ntt::of(D);
        let mut seeds = Vec::with_capacity(gadget.digits);
        let mut rows = Vec::with_capacity(gadget.digits);
        for _ in 0..gadget.digits {
            let seed = r.array32()?;
            let mut b = r.packed(D, 62)?;
            if b.iter().any(|&x| x >= Q) {
                return Err(r.err("a key switching row has a coefficient not below Q"));
            }
            let mut a = seeded_c1(&seed);
            ntt.fwd(&mut b);
            ntt.fwd(&mut a);
            seeds.push(seed);
            rows.push((b, a));
        }
        Ok(SwitchKey {
            gadget,
            seeds,
            rows,
        })
    }
}

/// The key that switches τ_k(S) to S.
pub struct GaloisKey {
    k: usize,
    key: SwitchKey,
    /// τ_k's permutation of NTT-domain values (`rlwe::ntt_automorphism`).
    permutation: Arc<[u32]>,
}

impl std::fmt::Debug for GaloisKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GaloisKey").field("k", &self.k).finish()
    }
}

impl GaloisKey {
    /// The key for τ_k whose rows are `key`'s.
    pub fn new(k: usize, key: SwitchKey) -> GaloisKey {
        GaloisKey {
            k,
            key,
            permutation: ntt_automorphism(k),
        }
    }

    pub fn k(&self) -> usize {
        self.k
    }

    pub fn key(&self) -> &SwitchKey {
        &self.key
    }

    /// τ_k's permutation of NTT-domain values (`rlwe::ntt_automorphism`).
    pub(crate) fn permutation(&self) -> &[u32] {
        &self.permutation
    }

    /// τ_k(c1) switched from τ_k(S) to S, in the NTT domain: the ciphertext (a, b) with
    /// a + b·S ≈ τ_k(c1)·τ_k(S).
    pub fn switch_ntt(&self, c1: &[u64]) -> (Vec<u64>, Vec<u64>) {
        self.key.apply_ntt(&automorphism(c1, self.k))
    }
}

impl Secret {
    /// The key switching key for τ_k.
    pub fn galois_key(&self, k: usize, gadget: Gadget, rng: &mut impl RngCore) -> GaloisKey {
        let tau_s = automorphism(&self.lifted(), k);
        GaloisKey::new(k, self.switch_key(&tau_s, gadget, rng))
    }

    /// The key switching key from m to S.
    pub fn switch_key(&self, m: &[u64], gadget: Gadget, rng: &mut impl RngCore) -> SwitchKey {
        let ntt = Ntt::of(D);
        let mut seeds = Vec::with_capacity(gadget.digits);
        let rows = (0..gadget.digits)
            .map(|i| {
                let g = gadget.factor(i);
                let scaled: Vec<u64> = m.iter().map(|&v| mul(v, g)).collect();
                let mut seed = [0u8; 32];
                rng.fill_bytes(&mut seed);
                let mut b = self.encrypt_seeded(&scaled, &seed, rng);
                let mut a = seeded_c1(&seed);
                ntt.fwd(&mut b);
                ntt.fwd(&mut a);
                seeds.push(seed);
                (b, a)
            })
            .collect();
        SwitchKey {
            gadget,
            seeds,
            rows,
        }
    }
}

/// The signed digits of every coefficient under `gadget`, as residues mod Q, each digit's D
/// values already in the NTT domain: digit i of coefficient j at `i·D + j` (before the
/// transform), each in [−2^(bits−1), 2^(bits−1)) except the last, which takes what is left of
/// the centred residue.
pub(crate) fn decompose_ntt(p: &[u64], gadget: Gadget) -> Vec<u64> {
    let mut out = vec![0u64; gadget.digits * D];
    pulp::Arch::new().dispatch(Digits {
        p,
        out: &mut out,
        gadget,
    });
    let ntt = Ntt::of(D);
    for digit in out.chunks_exact_mut(D) {
        ntt.fwd(digit);
    }
    out
}

/// The digits of [`decompose_ntt`] before the transforms, digit by digit over the coefficients
/// (loops the compiler vectorises), as a `pulp::WithSimd`: compiled for the CPU's vector
/// instructions at run time, where the crate's baseline x86-64 target leaves them scalar.
struct Digits<'a> {
    p: &'a [u64],
    out: &'a mut [u64],
    gadget: Gadget,
}

impl pulp::WithSimd for Digits<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { p, out, gadget } = self;
        let half = 1i64 << (gadget.bits - 1);
        let mask = (1i64 << gadget.bits) - 1;
        let residue = |d: i64| Q.wrapping_add(d as u64) - if d < 0 { 0 } else { Q };
        // The last digit's row holds what is left of each centred residue (as i64 bits)
        // until it becomes that digit.
        let (digits, rest) = out.split_at_mut((gadget.digits - 1) * D);
        for (v, &x) in rest.iter_mut().zip(p) {
            *v = centered(x) as u64;
        }
        for digit in digits.chunks_exact_mut(D) {
            for (o, v) in digit.iter_mut().zip(rest.iter_mut()) {
                let x = *v as i64;
                let d = ((x + half) & mask) - half;
                *o = residue(d);
                *v = ((x - d) >> gadget.bits) as u64;
            }
        }
        for v in rest.iter_mut() {
            *v = residue(*v as i64);
        }
    }
}

/// Σ_i digits_i ⊙ rows_i for both halves of the rows, all in the NTT domain.
pub(crate) fn gadget_product_ntt(
    digits: &[u64],
    rows: &[(Vec<u64>, Vec<u64>)],
) -> (Vec<u64>, Vec<u64>) {
    let ntt = Ntt::of(D);
    let mut c0 = vec![0u64; D];
    let mut c1 = vec![0u64; D];
    for (digit, (b, a)) in digits.chunks_exact(D).zip(rows) {
        ntt.mul_accumulate(&mut c0, digit, b);
        ntt.mul_accumulate(&mut c1, digit, a);
    }
    (c0, c1)
}

impl Ciphertext {
    /// The encryption of τ_k(m) under S: τ_k of both halves, then τ_k(c1) switched from
    /// τ_k(S) to S with `key`. Adds the noise Σ_i digit_i·e_i
    /// ([`Gadget::noise_variance`]).
    pub fn automorphism(&self, key: &GaloisKey) -> Ciphertext {
        let (mut c0, mut c1) = key.switch_ntt(&self.c1);
        Ntt::of(D).inv(&mut c0);
        Ntt::of(D).inv(&mut c1);
        let mut out = Ciphertext { c0, c1 };
        for (o, c) in out.c0.iter_mut().zip(automorphism(&self.c0, key.k)) {
            *o = add(*o, c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlwe::{noise, variance};
    use crate::sample::{stream, uniform_mod_q};

    #[test]
    fn the_digits_recompose() {
        let mut rng = stream(&[7; 32], 0);
        let mut p = vec![0u64; D];
        uniform_mod_q(&mut rng, &mut p);
        for gadget in [COARSE, FINE] {
            let mut digits = decompose_ntt(&p, gadget);
            for digit in digits.chunks_exact_mut(D) {
                Ntt::of(D).inv(digit);
            }
            for j in 0..D {
                let mut v: i128 = 0;
                for i in (0..gadget.digits).rev() {
                    v = (v << gadget.bits) + centered(digits[i * D + j]) as i128;
                }
                assert_eq!(v, centered(p[j]) as i128);
                for i in 0..gadget.digits - 1 {
                    assert!(centered(digits[i * D + j]).abs() <= 1 << (gadget.bits - 1));
                }
            }
        }
    }

    #[test]
    fn a_switched_automorphism_decrypts_to_the_automorphism_with_the_predicted_noise() {
        let mut rng = stream(&[8; 32], 0);
        let s = Secret::generate(&mut rng);
        let delta = crate::params::PRIME_Q >> 10;
        let m: Vec<u64> = (0..D).map(|i| (i as u64 % 1024) * delta).collect();
        let ct = s.encrypt(&m, &mut rng);
        for (k, gadget) in [(D + 1, COARSE), (D / 8 + 1, COARSE), (3, FINE)] {
            let key = s.galois_key(k, gadget, &mut rng);
            let out = ct.automorphism(&key);
            let want = automorphism(&m, k);
            // Σ_i digit_i·e_i over binomial errors of variance 1/2, plus the fresh error
            // moved by τ.
            let predicted = gadget.noise_variance(0.5) + 0.5;
            let measured = variance(&noise(&s, &out, &want));
            assert!(
                (measured / predicted - 1.0).abs() < 0.1,
                "k = {k}: measured {measured:e}, predicted {predicted:e}"
            );
        }
    }
}
