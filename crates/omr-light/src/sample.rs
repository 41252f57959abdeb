//! Randomness: the centred binomial distribution of η = 1 (every secret and error of the
//! scheme), uniform residues, and the common reference string of the detection keys.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::params::PRIME_Q as Q;

/// `len` draws of the centred binomial of η = 1: b0 − b1 for two fair bits, so −1 and 1 with
/// probability 1/4 each and 0 with 1/2 (variance 1/2).
pub(crate) fn cbd1(rng: &mut impl RngCore, len: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let mut w = rng.next_u64();
        for _ in 0..32 {
            if out.len() == len {
                break;
            }
            out.push((w & 1) as i64 - ((w >> 1) & 1) as i64);
            w >>= 2;
        }
    }
    out
}

/// `len` uniform values below 2^bits (bits ≤ 32).
pub(crate) fn uniform_bits(rng: &mut impl RngCore, len: usize, bits: u32) -> Vec<u32> {
    let mask = if bits == 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    };
    (0..len).map(|_| rng.next_u32() & mask).collect()
}

/// Uniform residues mod Q into `out` (rejection sampling of 62-bit words; a word is rejected
/// with probability 2^-46).
pub(crate) fn uniform_mod_q(rng: &mut impl RngCore, out: &mut [u64]) {
    for v in out.iter_mut() {
        *v = loop {
            let x = rng.next_u64() >> 2;
            if x < Q {
                break x;
            }
        };
    }
}

/// A ChaCha20 generator for a 32-byte seed and a stream number (independent streams of one
/// seed).
pub(crate) fn stream(seed: &[u8; 32], stream: u64) -> ChaCha20Rng {
    let mut rng = ChaCha20Rng::from_seed(*seed);
    rng.set_stream(stream);
    rng
}

/// The seed of the common reference string: every detection key's ciphertext j uses the same
/// uniform polynomial a_j, derived from this public string, so the half of detection that
/// multiplies the a_j is the same for every key and is done once per batch. Nothing up the
/// sleeve: it is a hash of the set's name.
fn crs_seed() -> [u8; 32] {
    blake3::derive_key(
        "omr-light-v1 2026-11 detection key common reference string",
        b"",
    )
}

/// Row j of the common reference string in the NTT domain (a uniform polynomial is uniform in
/// either domain, so it is drawn there directly).
pub(crate) fn crs_row(j: usize, out: &mut [u64]) {
    let mut rng = stream(&crs_seed(), j as u64);
    uniform_mod_q(&mut rng, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_has_its_moments() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let v = cbd1(&mut rng, 1 << 20);
        let n = v.len() as f64;
        let mean = v.iter().sum::<i64>() as f64 / n;
        let var = v.iter().map(|&x| (x * x) as f64).sum::<f64>() / n;
        assert!(mean.abs() < 0.005, "{mean}");
        assert!((var - 0.5).abs() < 0.005, "{var}");
        assert!(v.iter().all(|x| (-1..=1).contains(x)));
    }

    #[test]
    fn crs_rows_are_fixed_and_distinct() {
        let mut a = vec![0; 64];
        let mut b = vec![0; 64];
        let mut c = vec![0; 64];
        crs_row(5, &mut a);
        crs_row(5, &mut b);
        crs_row(6, &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&x| x < Q));
    }
}
