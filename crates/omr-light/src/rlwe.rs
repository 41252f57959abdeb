//! RLWE in the detection key's ring (D = 4096, modulo Q = 2^62 − 2^16 + 1) with the one
//! operation detection never needed: the automorphisms τ_k: X ↦ X^k and the key switching that
//! brings τ_k(c) back under the original secret. They are the building block of the payload fetch
//! docs/light/STUDY.md §7 designs (query expansion, the trace, packing).
//!
//! Written here rather than taken from a crate: the `fhe` crate keeps key switching private, and
//! this ring's NTT, modulus and lazy reduction are already ours (`ring`).
//!
//! Convention, as in `keys`: a ciphertext (c0, c1) decrypts as c0 + c1·S = m + e, with m already
//! scaled. Everything here is in the coefficient domain unless a name says `ntt`.

use rand::RngCore;

use omr_core::OmrError;

use crate::params::PRIME_Q as Q;
use crate::ring::{add, centered, lift, mul, sub, Ntt};
use crate::sample::{cbd1, uniform_mod_q};

/// The ring degree (the detection key's batch).
pub const D: usize = 4096;
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

/// An RLWE secret with coefficients from the centred binomial of η = 1.
pub struct Secret {
    coefficients: Vec<i64>,
    ntt: Vec<u64>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret { .. }")
    }
}

/// One RLWE ciphertext, coefficient domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext {
    pub c0: Vec<u64>,
    pub c1: Vec<u64>,
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
}

impl std::fmt::Debug for GaloisKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GaloisKey").field("k", &self.k).finish()
    }
}

impl GaloisKey {
    /// The key for τ_k whose rows are `key`'s.
    pub fn new(k: usize, key: SwitchKey) -> GaloisKey {
        GaloisKey { k, key }
    }

    pub fn k(&self) -> usize {
        self.k
    }

    pub fn key(&self) -> &SwitchKey {
        &self.key
    }

    /// τ_k(c1) switched from τ_k(S) to S, in the NTT domain: the ciphertext (a, b) with
    /// a + b·S ≈ τ_k(c1)·τ_k(S).
    pub fn switch_ntt(&self, c1: &[u64]) -> (Vec<u64>, Vec<u64>) {
        self.key.apply_ntt(&automorphism(c1, self.k))
    }
}

impl Secret {
    pub fn generate(rng: &mut impl RngCore) -> Secret {
        Secret::from_coefficients(cbd1(rng, D))
    }

    pub(crate) fn from_coefficients(coefficients: Vec<i64>) -> Secret {
        let mut ntt: Vec<u64> = coefficients.iter().map(|&v| lift(v)).collect();
        Ntt::of(D).fwd(&mut ntt);
        Secret { coefficients, ntt }
    }

    /// An encryption of `m` (residues mod Q, already scaled) with fresh uniform c1 and
    /// binomial error.
    pub fn encrypt(&self, m: &[u64], rng: &mut impl RngCore) -> Ciphertext {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        Ciphertext {
            c0: self.encrypt_seeded(m, &seed, rng),
            c1: seeded_c1(&seed),
        }
    }

    /// An encryption of `m` whose c1 is expanded from `seed` ([`seeded_c1`]): only c0 and the
    /// seed need to travel.
    pub fn encrypt_seeded(&self, m: &[u64], seed: &[u8; 32], rng: &mut impl RngCore) -> Vec<u64> {
        let a = seeded_c1(seed);
        let mut a_s = a.clone();
        let ntt = Ntt::of(D);
        ntt.fwd(&mut a_s);
        ntt.mul_assign(&mut a_s, &self.ntt);
        ntt.inv(&mut a_s);
        let e = cbd1(rng, D);
        (0..D).map(|i| add(sub(m[i], a_s[i]), lift(e[i]))).collect()
    }

    /// c0 + c1·S, centred: the scaled message plus the noise.
    pub fn phase(&self, ct: &Ciphertext) -> Vec<i64> {
        let ntt = Ntt::of(D);
        let mut p = ct.c1.clone();
        ntt.fwd(&mut p);
        ntt.mul_assign(&mut p, &self.ntt);
        ntt.inv(&mut p);
        p.iter()
            .zip(&ct.c0)
            .map(|(&x, &c)| centered(add(x, c)))
            .collect()
    }

    /// The key switching key for τ_k.
    pub fn galois_key(&self, k: usize, gadget: Gadget, rng: &mut impl RngCore) -> GaloisKey {
        let tau_s = automorphism(&self.lifted(), k);
        GaloisKey {
            k,
            key: self.switch_key(&tau_s, gadget, rng),
        }
    }

    /// S as residues.
    pub(crate) fn lifted(&self) -> Vec<u64> {
        self.coefficients.iter().map(|&v| lift(v)).collect()
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

/// The uniform c1 a 32-byte seed stands for.
pub fn seeded_c1(seed: &[u8; 32]) -> Vec<u64> {
    let mut a = vec![0u64; D];
    uniform_mod_q(&mut crate::sample::stream(seed, 0), &mut a);
    a
}

/// τ_k(p)(X) = p(X^k) in Z_Q[X]/(X^D + 1), k odd: coefficient i moves to i·k mod 2D, negated
/// when that lands in [D, 2D).
pub fn automorphism(p: &[u64], k: usize) -> Vec<u64> {
    debug_assert!(k % 2 == 1 && p.len() == D);
    let mut out = vec![0u64; D];
    for (i, &v) in p.iter().enumerate() {
        let j = (i * k) & (2 * D - 1);
        if j < D {
            out[j] = v;
        } else {
            out[j - D] = sub(0, v);
        }
    }
    out
}

/// p·X^e in Z_Q[X]/(X^D + 1) for any e (negative powers wrap with a sign).
pub fn times_monomial(p: &[u64], e: i64) -> Vec<u64> {
    let e = e.rem_euclid(2 * D as i64) as usize;
    let mut out = vec![0u64; D];
    for (i, &v) in p.iter().enumerate() {
        let j = (i + e) & (2 * D - 1);
        if j < D {
            out[j] = v;
        } else {
            out[j - D] = sub(0, v);
        }
    }
    out
}

/// The signed digits of every coefficient under `gadget`, as residues mod Q, each digit's D
/// values already in the NTT domain: digit i of coefficient j at `i·D + j` (before the
/// transform), each in [−2^(bits−1), 2^(bits−1)) except the last, which takes what is left of
/// the centred residue.
pub(crate) fn decompose_ntt(p: &[u64], gadget: Gadget) -> Vec<u64> {
    let mut out = vec![0u64; gadget.digits * D];
    let half = 1i64 << (gadget.bits - 1);
    let mask = (1i64 << gadget.bits) - 1;
    let residue = |d: i64| {
        if d < 0 {
            Q.wrapping_add(d as u64)
        } else {
            d as u64
        }
    };
    for (j, &x) in p.iter().enumerate() {
        let mut v = centered(x);
        for i in 0..gadget.digits - 1 {
            let d = ((v + half) & mask) - half;
            out[i * D + j] = residue(d);
            v = (v - d) >> gadget.bits;
        }
        out[(gadget.digits - 1) * D + j] = residue(v);
    }
    let ntt = Ntt::of(D);
    for digit in out.chunks_exact_mut(D) {
        ntt.fwd(digit);
    }
    out
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
    fn zip_with(&self, other: &Ciphertext, f: fn(u64, u64) -> u64) -> Ciphertext {
        let zip = |x: &[u64], y: &[u64]| x.iter().zip(y).map(|(&a, &b)| f(a, b)).collect();
        Ciphertext {
            c0: zip(&self.c0, &other.c0),
            c1: zip(&self.c1, &other.c1),
        }
    }

    /// The encryption of m1 + m2.
    pub fn add(&self, other: &Ciphertext) -> Ciphertext {
        self.zip_with(other, add)
    }

    /// The encryption of m1 − m2.
    pub fn sub(&self, other: &Ciphertext) -> Ciphertext {
        self.zip_with(other, sub)
    }

    /// The encryption of m·X^e.
    pub fn times_monomial(&self, e: i64) -> Ciphertext {
        Ciphertext {
            c0: times_monomial(&self.c0, e),
            c1: times_monomial(&self.c1, e),
        }
    }

    /// The encryption of c·m for a scalar c.
    pub fn scale(&self, c: u64) -> Ciphertext {
        Ciphertext {
            c0: self.c0.iter().map(|&a| mul(a, c)).collect(),
            c1: self.c1.iter().map(|&a| mul(a, c)).collect(),
        }
    }

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

/// The noise of `ct` as an encryption of `m` (centred), for tests and measurements.
pub fn noise(secret: &Secret, ct: &Ciphertext, m: &[u64]) -> Vec<i64> {
    (secret.phase(ct).iter().zip(m))
        .map(|(&p, &w)| centered(sub(lift(p), w)))
        .collect()
}

/// The mean square of noise values.
pub fn variance(noise: &[i64]) -> f64 {
    noise.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / noise.len() as f64
}

/// `delta`·values as residues.
pub fn scaled(values: &[u64], delta: u64) -> Vec<u64> {
    values.iter().map(|&v| mul(v, delta)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::stream;

    #[test]
    fn the_automorphism_is_a_ring_map() {
        // τ(x·y) = τ(x)·τ(y), checked on x = X^3 + 5, y = X^4093 (both wrap).
        let mut x = vec![0u64; D];
        x[3] = 1;
        x[0] = 5;
        let y = times_monomial(
            &{
                let mut one = vec![0u64; D];
                one[0] = 1;
                one
            },
            4093,
        );
        let product = |a: &[u64], b: &[u64]| {
            let ntt = Ntt::of(D);
            let (mut a, mut b) = (a.to_vec(), b.to_vec());
            ntt.fwd(&mut a);
            ntt.fwd(&mut b);
            ntt.mul_assign(&mut a, &b);
            ntt.inv(&mut a);
            a
        };
        for k in [3, 2049, 4097, 8191] {
            assert_eq!(
                automorphism(&product(&x, &y), k),
                product(&automorphism(&x, k), &automorphism(&y, k)),
                "k = {k}"
            );
        }
    }

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
