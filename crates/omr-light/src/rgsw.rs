//! RGSW ciphertexts over the ring of `rlwe`, the external product and the CMux: what lets the
//! server choose between two ciphertexts by an encrypted bit it cannot read (the fold and the
//! rotation of the payload fetch, docs/light/STUDY.md §7).
//!
//! RGSW(μ) with gadget g is two sets of rows, in the NTT domain: Enc(g_i·μ) and Enc(g_i·μ·S).
//! For a ciphertext (c0, c1) of m, Σ_i dec_i(c0)·Enc(g_i·μ) + Σ_i dec_i(c1)·Enc(g_i·μ·S)
//! encrypts μ·(c0 + c1·S) = μ·(m + e).
//!
//! A client can encrypt RGSW directly ([`Secret::rgsw`]), but a query carries only the first
//! set (Regev encryptions of g_i·b, from query expansion); the server makes the second with
//! the one-time conversion key RGSW(S): Enc(g_i·b) ⊡ RGSW(S) encrypts g_i·b·S
//! ([`Rgsw::from_regev`]).

use rand::RngCore;

use crate::ring::Ntt;
use crate::rlwe::{decompose_ntt, gadget_product, Ciphertext, Gadget, Secret, D};

/// Rows in the NTT domain (both halves of each).
type Rows = Vec<(Vec<u64>, Vec<u64>)>;

/// An RGSW ciphertext.
pub struct Rgsw {
    gadget: Gadget,
    /// Enc(g_i·μ).
    plain: Rows,
    /// Enc(g_i·μ·S).
    times_s: Rows,
}

impl std::fmt::Debug for Rgsw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rgsw")
            .field("gadget", &self.gadget)
            .finish()
    }
}

fn to_ntt(ct: &Ciphertext) -> (Vec<u64>, Vec<u64>) {
    let ntt = Ntt::of(D);
    let (mut b, mut a) = (ct.c0.clone(), ct.c1.clone());
    ntt.fwd(&mut b);
    ntt.fwd(&mut a);
    (b, a)
}

impl Secret {
    /// RGSW(μ) for a polynomial μ (residues), encrypted directly.
    pub fn rgsw(&self, mu: &[u64], gadget: Gadget, rng: &mut impl RngCore) -> Rgsw {
        let ntt = Ntt::of(D);
        let mut mu_s = mu.to_vec();
        let mut s = self.lifted();
        ntt.fwd(&mut mu_s);
        ntt.fwd(&mut s);
        ntt.mul_assign(&mut mu_s, &s);
        ntt.inv(&mut mu_s);
        Rgsw {
            gadget,
            plain: self.gadget_rows(mu, gadget, rng),
            times_s: self.gadget_rows(&mu_s, gadget, rng),
        }
    }

    /// The conversion key: RGSW(S).
    pub fn conversion_key(&self, gadget: Gadget, rng: &mut impl RngCore) -> Rgsw {
        self.rgsw(&self.lifted(), gadget, rng)
    }
}

impl Rgsw {
    /// RGSW(b) from Regev encryptions of g_i·b (i < `conversion.gadget().digits`, the gadget
    /// of the result being the conversion key's): the second set is each row times
    /// RGSW(S), with noise S·e_i plus one external product's.
    pub fn from_regev(regev: &[Ciphertext], conversion: &Rgsw) -> Rgsw {
        assert_eq!(regev.len(), conversion.gadget.digits);
        Rgsw {
            gadget: conversion.gadget,
            plain: regev.iter().map(to_ntt).collect(),
            times_s: regev
                .iter()
                .map(|ct| to_ntt(&ct.external_product(conversion)))
                .collect(),
        }
    }

    pub fn gadget(&self) -> Gadget {
        self.gadget
    }
}

impl Ciphertext {
    /// The encryption of μ·m: both halves decomposed (2·digits NTTs), two inverse NTTs.
    pub fn external_product(&self, rgsw: &Rgsw) -> Ciphertext {
        let first = gadget_product(&decompose_ntt(&self.c0, rgsw.gadget), &rgsw.plain);
        let second = gadget_product(&decompose_ntt(&self.c1, rgsw.gadget), &rgsw.times_s);
        first.add(&second)
    }
}

/// x0 when `bit` encrypts 0, x1 when it encrypts 1: x0 + (x1 − x0) ⊡ bit.
pub fn cmux(bit: &Rgsw, x0: &Ciphertext, x1: &Ciphertext) -> Ciphertext {
    x0.add(&x1.sub(x0).external_product(bit))
}

/// μ·m for a plaintext polynomial μ, exactly (no noise beyond μ times m's): a test helper.
#[cfg(test)]
fn plain_product(m: &[u64], mu: &[u64]) -> Vec<u64> {
    let ntt = Ntt::of(D);
    let (mut a, mut b) = (m.to_vec(), mu.to_vec());
    ntt.fwd(&mut a);
    ntt.fwd(&mut b);
    ntt.mul_assign(&mut a, &b);
    ntt.inv(&mut a);
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::{expand, expansion_factor, output_noise_variance, ExpansionKeys};
    use crate::params::PRIME_Q as Q;
    use crate::ring::mul;
    use crate::rlwe::{noise, scaled, variance, COARSE, FINE};
    use crate::sample::stream;

    #[test]
    fn an_external_product_multiplies_by_the_rgsw_message() {
        let mut rng = stream(&[10; 32], 0);
        let s = Secret::generate(&mut rng);
        let delta = Q >> 10;
        let m = scaled(&(0..D as u64).map(|i| i % 1024).collect::<Vec<_>>(), delta);
        let ct = s.encrypt(&m, &mut rng);
        // μ = X^5: the product is m rotated.
        let mut mu = vec![0u64; D];
        mu[5] = 1;
        for gadget in [COARSE, FINE] {
            let out = ct.external_product(&s.rgsw(&mu, gadget, &mut rng));
            let e = noise(&s, &out, &plain_product(&m, &mu));
            // Both sets of rows: 2·Σ digit_i·e_i (plus the input's noise, times X^5).
            let predicted = 2.0 * gadget.noise_variance(0.5);
            let measured = variance(&e);
            assert!(
                (measured / predicted - 1.0).abs() < 0.1,
                "{gadget:?}: measured {measured:e}, predicted {predicted:e}"
            );
        }
    }

    #[test]
    fn a_cmux_on_converted_expanded_bits_picks_the_right_side_with_the_predicted_noise() {
        let mut rng = stream(&[11; 32], 0);
        let s = Secret::generate(&mut rng);
        let levels = 4;
        let keys = ExpansionKeys::generate(&s, levels, &mut rng);
        let conversion = s.conversion_key(FINE, &mut rng);
        // Coefficients 0..8 carry g_i·0, 8..16 carry g_i·1, pre-scaled for expansion.
        let f = expansion_factor(levels);
        let mut query = vec![0u64; D];
        for i in 0..FINE.digits {
            query[FINE.digits + i] = mul(FINE.factor(i), f);
        }
        let regev = expand(&s.encrypt(&query, &mut rng), &keys);
        let zero = Rgsw::from_regev(&regev[..FINE.digits], &conversion);
        let one = Rgsw::from_regev(&regev[FINE.digits..], &conversion);

        let delta = Q >> 10;
        let m0 = scaled(&(0..D as u64).map(|i| i % 1000).collect::<Vec<_>>(), delta);
        let m1 = scaled(
            &(0..D as u64).map(|i| (i * 7) % 1000).collect::<Vec<_>>(),
            delta,
        );
        let (x0, x1) = (s.encrypt(&m0, &mut rng), s.encrypt(&m1, &mut rng));
        let picked_zero = cmux(&zero, &x0, &x1);
        let picked_one = cmux(&one, &x0, &x1);
        let (e0, e1) = (noise(&s, &picked_zero, &m0), noise(&s, &picked_one, &m1));
        // The second set's rows carry S·e (variance D/2 times the expansion's) plus a fresh
        // external product's; the product with x1 − x0 multiplies by the digits.
        let row = D as f64 * 0.5 * output_noise_variance(levels) + 2.0 * FINE.noise_variance(0.5);
        let predicted =
            FINE.noise_variance(row) + FINE.noise_variance(output_noise_variance(levels));
        for e in [&e0, &e1] {
            assert!(e.iter().all(|x| x.unsigned_abs() < delta / 2));
            let measured = variance(e);
            assert!(
                (0.5..2.0).contains(&(measured / predicted)),
                "measured {measured:e}, predicted {predicted:e}"
            );
        }
    }
}
