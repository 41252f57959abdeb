//! RLWE in the detection key's ring (D = 4096, modulo Q = 2^62 − 2^16 + 1) for the payload fetch
//! (docs/light/STUDY.md §7.1): secrets, ciphertexts with seeded c1, their sums, monomial
//! products and automorphisms τ_k: X ↦ X^k of polynomials; `switch` adds key switching.
//!
//! Written here rather than taken from a crate: the `fhe` crate keeps key switching private, and
//! this ring's NTT, modulus and lazy reduction are already ours (`ring`).
//!
//! Convention, as in `keys`: a ciphertext (c0, c1) decrypts as c0 + c1·S = m + e, with m already
//! scaled. Everything here is in the coefficient domain unless a name says `ntt`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rand::RngCore;

use crate::ring::{add, centered, lift, mul, pow, sub, Ntt};
use crate::sample::{cbd1, uniform_mod_q};

/// The ring degree (the detection key's batch).
pub const D: usize = 4096;
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

    /// S as residues.
    pub(crate) fn lifted(&self) -> Vec<u64> {
        self.coefficients.iter().map(|&v| lift(v)).collect()
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

/// The permutation τ_k makes of NTT-domain values, NTT(τ_k(p))[i] = NTT(p)[π(i)]: there τ_k
/// costs a gather instead of two transforms (query expansion keeps c0 there). The forward
/// transform evaluates p at D points ζ_i (the odd powers of a 2D-th root of unity, in the
/// transform's own order: NTT(X) lists them), and τ_k(p)(ζ_i) = p(ζ_i^k), where ζ_i^k is
/// again one of the points. Computed once per k for the process.
pub(crate) fn ntt_automorphism(k: usize) -> Arc<[u32]> {
    static TABLES: OnceLock<Mutex<HashMap<usize, Arc<[u32]>>>> = OnceLock::new();
    let tables = TABLES.get_or_init(Default::default);
    if let Some(table) = tables.lock().expect("permutations").get(&k) {
        return table.clone();
    }
    assert!(k % 2 == 1, "τ_k is an automorphism for odd k only, not {k}");
    let ntt = Ntt::of(D);
    let mut points = vec![0u64; D];
    points[1] = 1;
    ntt.fwd(&mut points);
    let place: HashMap<u64, u32> = (points.iter().enumerate())
        .map(|(i, &z)| (z, i as u32))
        .collect();
    assert_eq!(
        place.len(),
        D,
        "the transform evaluates at D distinct points"
    );
    let table: Arc<[u32]> = (points.iter()).map(|&z| place[&pow(z, k as u64)]).collect();
    (tables.lock().expect("permutations"))
        .entry(k)
        .or_insert(table)
        .clone()
}

/// NTT(X^−2^j)·D, for j < 12: [`Ntt::mul_assign_normalize`] by it multiplies an NTT-domain
/// polynomial by X^−2^j in one pass (query expansion's odd halves). Computed once.
pub(crate) fn monomial_ntt(j: u32) -> &'static [u64] {
    static SHIFTS: [OnceLock<Vec<u64>>; 12] = [const { OnceLock::new() }; 12];
    SHIFTS[j as usize].get_or_init(|| {
        let mut one = vec![0u64; D];
        one[0] = 1;
        let mut shift = times_monomial(&one, -(1i64 << j));
        let ntt = Ntt::of(D);
        ntt.fwd(&mut shift);
        shift.iter().map(|&x| mul(x, D as u64)).collect()
    })
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
    fn in_the_ntt_domain_the_automorphism_and_the_monomials_are_what_they_are_in_coefficients() {
        let ntt = Ntt::of(D);
        let mut rng = crate::sample::stream(&[4; 32], 0);
        let mut p = vec![0u64; D];
        crate::sample::uniform_mod_q(&mut rng, &mut p);
        let mut p_ntt = p.clone();
        ntt.fwd(&mut p_ntt);
        // Every k expansion and the trace use (D/2^j + 1), and others.
        let ks = (0..12).map(|j| (D >> j) + 1).chain([3, 8191]);
        for k in ks {
            let mut want = automorphism(&p, k);
            ntt.fwd(&mut want);
            let got: Vec<u64> = (ntt_automorphism(k).iter())
                .map(|&i| p_ntt[i as usize])
                .collect();
            assert_eq!(got, want, "k = {k}");
        }
        for j in 0..12 {
            let mut want = times_monomial(&p, -(1i64 << j));
            ntt.fwd(&mut want);
            let mut got = p_ntt.clone();
            ntt.mul_assign_normalize(&mut got, monomial_ntt(j));
            assert_eq!(got, want, "X^-2^{j}");
        }
    }
}
