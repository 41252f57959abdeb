//! Module-LWE clues (`omr-v2`): the clue key is a Kyber-shaped public key of rank r over
//! Z_q[X]/(X^d + 1), q = 2^64, d = n / r; a clue is one encryption of zero whose mask u (r
//! polynomials, n coefficients) is shared by ℓ bodies, the first ℓ coefficients of v.
//!
//! tfhe-rs's compact public key (what `omr-v1` uses) lives in one ring X^n + 1, so its dimension
//! is a power of two: 1024, where 768 already reaches 128 bits. A module of rank 3 over
//! X^256 + 1 gives exactly n = 768, and level 1 blind-rotates 768 mask coefficients per clue
//! body instead of 1024. tfhe-rs has no module encryption; this file is the little it needs:
//! negacyclic products of binary and small polynomials (schoolbook, d = 256), nothing else.
//!
//! - key: A ∈ R^{r×r} expanded from a public seed, secret s ∈ R^r binary (the clue secret's
//!   n bits, polynomial i = bits i·d .. i·d + d), t = A·s + e;
//! - clue: fresh binary r ∈ R^r, u = Aᵀ·r + e1, v = tᵀ·r + e2 (only coefficients 0..ℓ kept);
//! - phase: v − ⟨u, s⟩ = ⟨e, r⟩ + e2 − ⟨e1, s⟩, the same terms (and the same variance) as the
//!   compact public key's, so `noise::Budget` predicts both with one formula.

use tfhe::core_crypto::commons::math::random::{RandomGenerator, Seed};
use tfhe::core_crypto::prelude::*;

use crate::params::ParamSet;

/// acc += a · b in Z_{2^64}[X]/(X^d + 1), schoolbook.
fn mul_add(acc: &mut [u64], a: &[u64], b: &[u64]) {
    let d = acc.len();
    for (i, &ai) in a.iter().enumerate() {
        if ai == 0 {
            continue;
        }
        for (j, &bj) in b.iter().enumerate() {
            let k = i + j;
            let prod = ai.wrapping_mul(bj);
            if k < d {
                acc[k] = acc[k].wrapping_add(prod);
            } else {
                acc[k - d] = acc[k - d].wrapping_sub(prod);
            }
        }
    }
}

/// Coefficient `j` of a · b in Z_{2^64}[X]/(X^d + 1).
fn coefficient(a: &[u64], b: &[u64], j: usize) -> u64 {
    let d = a.len();
    let mut c = 0u64;
    for (m, &bm) in b.iter().enumerate() {
        if bm == 0 {
            continue;
        }
        if m <= j {
            c = c.wrapping_add(a[j - m].wrapping_mul(bm));
        } else {
            c = c.wrapping_sub(a[j + d - m].wrapping_mul(bm));
        }
    }
    c
}

/// The public matrix A (row-major, r·r polynomials of degree d), expanded from `seed` with
/// tfhe-rs's CSPRNG.
fn expand_a(p: &ParamSet, seed: u128) -> Vec<Vec<u64>> {
    let d = p.clue_dim / p.clue_rank;
    let mut gen = RandomGenerator::<DefaultRandomGenerator>::new(Seed(seed));
    (0..p.clue_rank * p.clue_rank)
        .map(|_| {
            let mut poly = vec![0u64; d];
            gen.fill_slice_with_random_uniform(&mut poly);
            poly
        })
        .collect()
}

/// The public key body t = A·s + e (n coefficients, polynomial i at i·d..), for the clue
/// secret `s` (n binary coefficients) and a seed of A.
pub(crate) fn public_body(
    p: &ParamSet,
    seed: u128,
    s: &[u64],
    noise: &mut RandomGenerator<DefaultRandomGenerator>,
) -> Vec<u64> {
    let (r, d) = (p.clue_rank, p.clue_dim / p.clue_rank);
    let a = expand_a(p, seed);
    let mut t = vec![0u64; p.clue_dim];
    noise.fill_slice_with_random_from_distribution(&mut t, TUniform::<u64>::new(p.clue_noise_log2));
    for (i, ti) in t.chunks_exact_mut(d).enumerate() {
        for k in 0..r {
            mul_add(ti, &a[i * r + k], &s[k * d..(k + 1) * d]);
        }
    }
    t
}

/// One encryption of zero under the key (seed, t): the mask u (n coefficients) and the first ℓ
/// coefficients of v, at q = 2^64.
pub(crate) fn encrypt_zeros(
    p: &ParamSet,
    seed: u128,
    t: &[u64],
    gen: &mut RandomGenerator<DefaultRandomGenerator>,
) -> (Vec<u64>, Vec<u64>) {
    let (rank, d) = (p.clue_rank, p.clue_dim / p.clue_rank);
    let a = expand_a(p, seed);
    let noise = TUniform::<u64>::new(p.clue_noise_log2);
    let mut r = vec![0u64; p.clue_dim];
    gen.fill_slice_with_random_uniform_binary(&mut r);
    let mut u = vec![0u64; p.clue_dim];
    gen.fill_slice_with_random_from_distribution(&mut u, noise);
    // u_k = Σ_i A[i][k] · r_i + e1_k (Aᵀ·r).
    for (k, uk) in u.chunks_exact_mut(d).enumerate() {
        for i in 0..rank {
            mul_add(uk, &a[i * rank + k], &r[i * d..(i + 1) * d]);
        }
    }
    let mut v = vec![0u64; p.clue_count];
    gen.fill_slice_with_random_from_distribution(&mut v, noise);
    for (j, vj) in v.iter_mut().enumerate() {
        for i in 0..rank {
            *vj = vj.wrapping_add(coefficient(
                &t[i * d..(i + 1) * d],
                &r[i * d..(i + 1) * d],
                j,
            ));
        }
    }
    (u, v)
}

/// The LWE mask of body `j` over the clue secret's n coefficients: phase_j = v_j − ⟨out, s⟩,
/// where coefficient j of u_k · s_k is Σ_m s_k[m] · (u_k[j−m], or −u_k[j−m+d] when m > j).
/// Values are reduced with `modulus_mask` (2^log − 1 for the transport modulus 2^log).
pub(crate) fn expanded_mask(
    u: &[u64],
    rank: usize,
    j: usize,
    modulus_mask: u64,
    out: &mut [usize],
) {
    let d = u.len() / rank;
    for (uk, ok) in u.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        for (m, o) in ok.iter_mut().enumerate() {
            *o = (if m <= j {
                uk[j - m]
            } else {
                uk[j + d - m].wrapping_neg()
            } & modulus_mask) as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::OMR_V2;

    fn secret(gen: &mut RandomGenerator<DefaultRandomGenerator>, n: usize) -> Vec<u64> {
        let mut s = vec![0u64; n];
        gen.fill_slice_with_random_uniform_binary(&mut s);
        s
    }

    #[test]
    fn products_match_the_negacyclic_definition() {
        let mut gen = RandomGenerator::<DefaultRandomGenerator>::new(Seed(7));
        let d = 16;
        let mut a = vec![0u64; d];
        gen.fill_slice_with_random_uniform(&mut a);
        let b = secret(&mut gen, d);
        let mut acc = vec![0u64; d];
        mul_add(&mut acc, &a, &b);
        for (j, &c) in acc.iter().enumerate() {
            assert_eq!(c, coefficient(&a, &b, j));
            // X^d = -1: the same product through the definition with explicit wrap signs.
            let mut want = 0u64;
            for (m, &bm) in b.iter().enumerate() {
                let k = (j + d - m) % d;
                let term = a[k].wrapping_mul(bm);
                want = if m <= j {
                    want.wrapping_add(term)
                } else {
                    want.wrapping_sub(term)
                };
            }
            assert_eq!(c, want);
        }
    }

    #[test]
    fn a_clue_decrypts_to_small_noise_with_its_key_and_to_noise_without() {
        let p = &OMR_V2;
        let mut gen = RandomGenerator::<DefaultRandomGenerator>::new(Seed(11));
        let s = secret(&mut gen, p.clue_dim);
        let t = public_body(p, 99, &s, &mut gen);
        let (u, v) = encrypt_zeros(p, 99, &t, &mut gen);
        let other = secret(&mut gen, p.clue_dim);
        let phase = |key: &[u64], j: usize| {
            let mut mask = vec![0usize; p.clue_dim];
            expanded_mask(&u, p.clue_rank, j, u64::MAX, &mut mask);
            mask.iter().zip(key).fold(v[j], |acc, (&m, &k)| {
                acc.wrapping_sub((m as u64).wrapping_mul(k))
            })
        };
        for j in 0..p.clue_count {
            // ⟨e, r⟩ + e2 − ⟨e1, s⟩: about sqrt(n) · 2^b, far below 2^60.
            let mine = phase(&s, j) as i64;
            assert!(mine.unsigned_abs() < 1 << 60, "body {j}: {mine}");
            let theirs = phase(&other, j) as i64;
            assert!(theirs.unsigned_abs() > 1 << 56, "body {j}: {theirs}");
        }
    }
}
