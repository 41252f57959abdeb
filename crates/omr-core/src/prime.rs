//! GLWE arithmetic modulo the prime p = 2^64 - 2^32 + 1: encryption, NTT-domain keyswitching,
//! automorphisms and the homomorphic trace.
//!
//! tfhe-rs 1.8.2 has no trace and only a schoolbook GLWE keyswitch for non-native moduli, so
//! this module does it on `tfhe-ntt`. With a prime modulus N is invertible: the level-2 output
//! is multiplied by N^-1 before the trace, so the trace does not multiply its noise by N.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tfhe_ntt::prime64::Plan;

use crate::params::PRIME_P as P;

#[inline]
pub(crate) fn add(a: u64, b: u64) -> u64 {
    let (s, o) = a.overflowing_add(b);
    let (s2, o2) = s.overflowing_sub(P);
    if o || !o2 {
        s2
    } else {
        s
    }
}

#[inline]
pub(crate) fn sub(a: u64, b: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a.wrapping_sub(b).wrapping_add(P)
    }
}

#[inline]
pub(crate) fn neg(a: u64) -> u64 {
    if a == 0 {
        0
    } else {
        P - a
    }
}

#[inline]
pub(crate) fn mul(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % P as u128) as u64
}

/// A signed integer as an element of Z_p.
#[inline]
pub(crate) fn from_i64(x: i64) -> u64 {
    if x >= 0 {
        x as u64 % P
    } else {
        neg((x.unsigned_abs()) % P)
    }
}

/// The centered representative of x ∈ Z_p, as a float (for noise measurement).
pub(crate) fn centered_f64(x: u64) -> f64 {
    if x > P / 2 {
        -((P - x) as f64)
    } else {
        x as f64
    }
}

pub(crate) fn inverse(a: u64) -> u64 {
    // Fermat: a^(p-2).
    let mut result = 1u64;
    let mut base = a % P;
    let mut e = P - 2;
    while e > 0 {
        if e & 1 == 1 {
            result = mul(result, base);
        }
        base = mul(base, base);
        e >>= 1;
    }
    result
}

/// Round a native-modulus (2^64) value to Z_p: round(x·p / 2^64).
#[inline]
pub(crate) fn from_native(x: u64) -> u64 {
    let r = ((x as u128 * P as u128 + (1u128 << 63)) >> 64) as u64;
    if r >= P {
        r - P
    } else {
        r
    }
}

/// A negacyclic NTT of one polynomial size modulo p.
#[derive(Debug)]
pub(crate) struct Ntt {
    plan: Plan,
    pub(crate) n: usize,
}

impl Ntt {
    pub(crate) fn new(n: usize) -> Self {
        let plan = Plan::try_new(n, P).expect("p = 2^64-2^32+1 supports every power-of-two size");
        Ntt { plan, n }
    }

    pub(crate) fn fwd(&self, buf: &mut [u64]) {
        self.plan.fwd(buf);
    }

    /// Inverse transform including the 1/N normalisation.
    pub(crate) fn inv(&self, buf: &mut [u64]) {
        self.plan.inv(buf);
        self.plan.normalize(buf);
    }

    pub(crate) fn mul_acc(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        self.plan.mul_accumulate(acc, a, b);
    }

    /// Negacyclic product of two coefficient-domain polynomials.
    #[cfg(test)]
    pub(crate) fn poly_mul(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut fa = a.to_vec();
        let mut fb = b.to_vec();
        self.fwd(&mut fa);
        self.fwd(&mut fb);
        let mut acc = vec![0u64; self.n];
        self.mul_acc(&mut acc, &fa, &fb);
        self.inv(&mut acc);
        acc
    }
}

/// Sample TUniform(b): integers in [-2^b, 2^b], the two end points with half the weight.
pub(crate) fn tuniform(rng: &mut impl RngCore, bound_log2: u32) -> i64 {
    let r = rng.next_u64() & ((1u64 << (bound_log2 + 2)) - 1);
    ((r + 1) >> 1) as i64 - (1i64 << bound_log2)
}

fn uniform_mod_p(rng: &mut ChaCha20Rng) -> u64 {
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

/// The trace's Galois elements, in application order: N+1, N/2+1, ..., 3.
pub(crate) fn trace_elements(n: usize) -> Vec<usize> {
    let log_n = n.ilog2();
    (1..=log_n).map(|i| (n >> (i - 1)) + 1).collect()
}

/// The homomorphic trace in place: ct += KS_g(τ_g(ct)) for every trace element g, so that a
/// ciphertext of m(X) becomes one of N·m_0. `keys[i]` switches from τ_{g_i}(S) back to S.
pub(crate) fn trace(
    ntt: &Ntt,
    keys: &[PrimeKeyswitchKey],
    ct: &mut [u64],
    scratch: &mut KsScratch,
) {
    let n = ntt.n;
    let mut rotated = vec![0u64; ct.len()];
    let mut switched = vec![0u64; ct.len()];
    for (g, ksk) in trace_elements(n).into_iter().zip(keys) {
        for (src, dst) in ct.chunks_exact(n).zip(rotated.chunks_exact_mut(n)) {
            automorphism_into(src, g, dst);
        }
        ksk.keyswitch(ntt, &rotated, &mut switched, scratch);
        for (c, s) in ct.iter_mut().zip(&switched) {
            *c = add(*c, *s);
        }
    }
}

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

/// Encrypt `msg` (coefficient domain, n values mod p) under `key` with fresh uniform masks.
#[cfg(test)]
pub(crate) fn encrypt(
    ntt: &Ntt,
    key: &PrimeGlweKey,
    msg: &[u64],
    noise_bound_log2: u32,
    rng: &mut impl RngCore,
) -> Vec<u64> {
    let n = ntt.n;
    use rand::Rng;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn max_centered(v: &[u64]) -> f64 {
        v.iter().map(|&x| centered_f64(x).abs()).fold(0.0, f64::max)
    }

    #[test]
    fn ntt_product_matches_schoolbook() {
        let n = 16;
        let ntt = Ntt::new(n);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let a: Vec<u64> = (0..n).map(|_| rng.gen_range(0..P)).collect();
        let b: Vec<u64> = (0..n).map(|_| rng.gen_range(0..P)).collect();
        let mut want = vec![0u64; n];
        for i in 0..n {
            for j in 0..n {
                let v = mul(a[i], b[j]);
                if i + j < n {
                    want[i + j] = add(want[i + j], v);
                } else {
                    want[i + j - n] = sub(want[i + j - n], v);
                }
            }
        }
        assert_eq!(ntt.poly_mul(&a, &b), want);
    }

    #[test]
    fn one_keyswitch_preserves_the_phase() {
        let n = 64;
        let ntt = Ntt::new(n);
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let from = PrimeGlweKey::generate(1, n, &mut rng);
        let to = PrimeGlweKey::generate(2, n, &mut rng);
        let dec = Decomposer {
            base_log: 11,
            levels: 5,
        };
        let ksk =
            SeededPrimeKeyswitchKey::generate(&ntt, &from, &to, dec, 2, &mut rng).expand(&ntt);
        let msg: Vec<u64> = (0..n as u64).map(|i| mul(i, P / 257)).collect();
        let ct = encrypt(&ntt, &from, &msg, 2, &mut rng);
        let mut out = vec![0u64; 3 * n];
        ksk.keyswitch(&ntt, &ct, &mut out, &mut KsScratch::default());
        let phase = to.phase(&ntt, &out);
        let err: Vec<u64> = phase.iter().zip(&msg).map(|(&a, &b)| sub(a, b)).collect();
        assert!(
            max_centered(&err) < 2f64.powi(40),
            "noise {}",
            max_centered(&err)
        );
    }

    #[test]
    fn one_trace_step_adds_the_automorphism() {
        let n = 64;
        let ntt = Ntt::new(n);
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let key = PrimeGlweKey::generate(2, n, &mut rng);
        let dec = Decomposer {
            base_log: 11,
            levels: 5,
        };
        let g = 65;
        let ksk =
            SeededPrimeKeyswitchKey::generate(&ntt, &key.automorphism(g), &key, dec, 2, &mut rng)
                .expand(&ntt);
        let msg: Vec<u64> = (0..n as u64).map(|i| mul(i, P / 257)).collect();
        let ct = encrypt(&ntt, &key, &msg, 2, &mut rng);
        let mut rotated = vec![0u64; ct.len()];
        for (src, dst) in ct.chunks_exact(n).zip(rotated.chunks_exact_mut(n)) {
            automorphism_into(src, g, dst);
        }
        // rotated decrypts under τ(S) to τ(m).
        let ph = key.automorphism(g).phase(&ntt, &rotated);
        let want = automorphism(&msg, g);
        let err: Vec<u64> = ph.iter().zip(&want).map(|(&a, &b)| sub(a, b)).collect();
        assert!(
            max_centered(&err) < 2f64.powi(40),
            "automorphism noise {}",
            max_centered(&err)
        );
        let mut out = vec![0u64; ct.len()];
        ksk.keyswitch(&ntt, &rotated, &mut out, &mut KsScratch::default());
        let ph = key.phase(&ntt, &out);
        let err: Vec<u64> = ph.iter().zip(&want).map(|(&a, &b)| sub(a, b)).collect();
        assert!(
            max_centered(&err) < 2f64.powi(40),
            "ks noise {}",
            max_centered(&err)
        );
    }

    #[test]
    fn decomposition_reconstructs_within_half_a_step() {
        let d = Decomposer {
            base_log: 11,
            levels: 5,
        };
        let g = d.gadget();
        let mut digits = vec![0i64; 5];
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for _ in 0..10_000 {
            let x = rng.gen_range(0..P);
            d.decompose(x, &mut digits);
            let mut r = 0u64;
            for (dj, gj) in digits.iter().zip(&g) {
                assert!(dj.unsigned_abs() <= 1 << 10, "digit {dj} out of range");
                r = add(r, mul(from_i64(*dj), *gj));
            }
            let err = centered_f64(sub(r, x)).abs();
            assert!(err < 2f64.powi(64 - 55) * 2.0, "reconstruction error {err}");
        }
    }

    #[test]
    fn keyswitch_and_trace_keep_the_constant_and_kill_the_rest() {
        let n = 64;
        let ntt = Ntt::new(n);
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let key = PrimeGlweKey::generate(2, n, &mut rng);
        let dec = Decomposer {
            base_log: 11,
            levels: 5,
        };
        let trace_keys: Vec<PrimeKeyswitchKey> = trace_elements(n)
            .into_iter()
            .map(|g| {
                SeededPrimeKeyswitchKey::generate(
                    &ntt,
                    &key.automorphism(g),
                    &key,
                    dec,
                    2,
                    &mut rng,
                )
                .expand(&ntt)
            })
            .collect();
        let delta = P / 257;
        let msg: Vec<u64> = (0..n as u64).map(|i| mul(i % 257, delta)).collect();
        let mut ct = encrypt(&ntt, &key, &msg, 2, &mut rng);
        let n_inv = inverse(n as u64);
        ct.iter_mut().for_each(|c| *c = mul(*c, n_inv));
        let mut scratch = KsScratch::default();
        trace(&ntt, &trace_keys, &mut ct, &mut scratch);
        let phase = key.phase(&ntt, &ct);
        // Constant coefficient: msg[0] = 0; others: 0. All noise must be tiny.
        assert!(
            max_centered(&phase) < 2f64.powi(40),
            "noise {}",
            max_centered(&phase)
        );
        // And with a non-zero constant:
        let mut msg2 = vec![0u64; n];
        msg2[0] = mul(5, delta);
        msg2[3] = mul(9, delta);
        let mut ct2 = encrypt(&ntt, &key, &msg2, 2, &mut rng);
        ct2.iter_mut().for_each(|c| *c = mul(*c, n_inv));
        trace(&ntt, &trace_keys, &mut ct2, &mut scratch);
        let phase2 = key.phase(&ntt, &ct2);
        assert!(centered_f64(sub(phase2[0], mul(5, delta))).abs() < 2f64.powi(40));
        assert!(max_centered(&phase2[1..]) < 2f64.powi(40));
    }
}
