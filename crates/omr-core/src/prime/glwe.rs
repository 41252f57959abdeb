//! GLWE modulo p: TUniform and uniform sampling, the binary secret key and its phase, and the
//! automorphisms X -> X^g that the trace applies.

use rand::RngCore;
use rand_chacha::ChaCha20Rng;

use super::field::{neg, sub};
use super::ntt::Ntt;
use crate::params::PRIME_P as P;

/// Sample TUniform(b): integers in [-2^b, 2^b], the two end points with half the weight.
pub(crate) fn tuniform(rng: &mut impl RngCore, bound_log2: u32) -> i64 {
    let r = rng.next_u64() & ((1u64 << (bound_log2 + 2)) - 1);
    ((r + 1) >> 1) as i64 - (1i64 << bound_log2)
}

/// A uniform element of Z_p (rejection sampling).
pub(crate) fn uniform_mod_p(rng: &mut ChaCha20Rng) -> u64 {
    loop {
        let v = rng.next_u64();
        if v < P {
            return v;
        }
    }
}

/// A binary GLWE secret key modulo p: `k` polynomials of size `n`, coefficients 0/1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrimeGlweKey {
    pub(crate) polys: Vec<Vec<u64>>,
}

impl PrimeGlweKey {
    pub(crate) fn generate(k: usize, n: usize, rng: &mut impl RngCore) -> Self {
        let polys = (0..k)
            .map(|_| (0..n).map(|_| rng.next_u64() & 1).collect())
            .collect();
        PrimeGlweKey { polys }
    }

    pub(crate) fn k(&self) -> usize {
        self.polys.len()
    }

    /// Phase B - Σ A_i·S_i of a coefficient-domain GLWE ciphertext.
    pub(crate) fn phase(&self, ntt: &Ntt, ct: &[u64]) -> Vec<u64> {
        let n = ntt.n;
        let k = self.k();
        let mut acc = vec![0u64; n];
        for (i, s) in self.polys.iter().enumerate() {
            let mut a = ct[i * n..(i + 1) * n].to_vec();
            let mut s = s.clone();
            ntt.fwd(&mut a);
            ntt.fwd(&mut s);
            ntt.mul_acc(&mut acc, &a, &s);
        }
        ntt.inv(&mut acc);
        ct[k * n..(k + 1) * n]
            .iter()
            .zip(&acc)
            .map(|(&b, &as_)| sub(b, as_))
            .collect()
    }

    /// The key of τ_g(ct): apply X -> X^g to every key polynomial.
    pub(crate) fn automorphism(&self, g: usize) -> Self {
        PrimeGlweKey {
            polys: self.polys.iter().map(|p| automorphism(p, g)).collect(),
        }
    }
}

/// X -> X^g on a polynomial of Z_p[X]/(X^N+1), g odd.
pub(crate) fn automorphism(poly: &[u64], g: usize) -> Vec<u64> {
    let n = poly.len();
    let mut out = vec![0u64; n];
    automorphism_into(poly, g, &mut out);
    out
}

pub(crate) fn automorphism_into(poly: &[u64], g: usize, out: &mut [u64]) {
    let n = poly.len();
    let two_n = 2 * n;
    for (i, &c) in poly.iter().enumerate() {
        let j = (i * g) % two_n;
        if j < n {
            out[j] = c;
        } else {
            out[j - n] = neg(c);
        }
    }
}

/// Encrypt `msg` (coefficient domain, n values mod p) under `key` with fresh uniform masks.
#[cfg(test)]
pub(crate) fn encrypt(
    ntt: &Ntt,
    key: &PrimeGlweKey,
    msg: &[u64],
    noise_bound_log2: u32,
    rng: &mut impl RngCore,
) -> Vec<u64> {
    use super::field::{add, from_i64};
    use rand::Rng;
    let n = ntt.n;
    let k = key.k();
    let mut ct = vec![0u64; (k + 1) * n];
    let mut acc = vec![0u64; n];
    for (i, s) in key.polys.iter().enumerate() {
        let a: Vec<u64> = (0..n).map(|_| rng.gen_range(0..P)).collect();
        ct[i * n..(i + 1) * n].copy_from_slice(&a);
        let mut fa = a;
        let mut fs = s.clone();
        ntt.fwd(&mut fa);
        ntt.fwd(&mut fs);
        ntt.mul_acc(&mut acc, &fa, &fs);
    }
    ntt.inv(&mut acc);
    for c in 0..n {
        let e = from_i64(tuniform(rng, noise_bound_log2));
        ct[k * n + c] = add(add(acc[c], e), msg[c]);
    }
    ct
}
