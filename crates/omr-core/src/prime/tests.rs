//! Unit tests of the prime-modulus GLWE arithmetic: NTT products, keyswitching, automorphisms,
//! the gadget decomposition and the trace.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::field::{add, centered_f64, from_i64, inverse, mul, sub};
use super::glwe::{automorphism, automorphism_into, encrypt, PrimeGlweKey};
use super::keyswitch::{Decomposer, KsScratch, PrimeKeyswitchKey, SeededPrimeKeyswitchKey};
use super::ntt::Ntt;
use super::trace::{trace, trace_elements};
use crate::params::PRIME_P as P;

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
    let ksk = SeededPrimeKeyswitchKey::generate(&ntt, &from, &to, dec, 2, &mut rng).expand(&ntt);
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
    let ksk = SeededPrimeKeyswitchKey::generate(&ntt, &key.automorphism(g), &key, dec, 2, &mut rng)
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
            SeededPrimeKeyswitchKey::generate(&ntt, &key.automorphism(g), &key, dec, 2, &mut rng)
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
