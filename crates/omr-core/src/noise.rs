//! Noise measurement with the secret key: phases of every intermediate ciphertext of a detection,
//! compared with their expected plaintexts, as log2 of the standard deviation relative to the
//! modulus. Used by tests and by `omr bench --noise`; never by the detector.

use tfhe::core_crypto::prelude::*;

use crate::detect::{digest_delta, level1_delta, DetectTrace};
use crate::keys::SecretKey;
use crate::params::PRIME_P;
use crate::prime::{self, Ntt, PrimeGlweKey};

/// Signed error of a native-modulus value relative to 2^64.
fn native_err(phase: u64, expected: u64) -> f64 {
    (phase.wrapping_sub(expected) as i64) as f64 / 2f64.powi(64)
}

/// Errors (relative to the modulus) observed in one detection.
#[derive(Debug, Clone, Default)]
pub struct StageErrors {
    /// Level-1 sum: distance to the nearest multiple of 2^64/D, and the decoded clue sum s.
    pub level1: f64,
    pub level1_sum: i64,
    /// After the keyswitch.
    pub keyswitch: f64,
    /// Level-2 constant coefficient against b·Δ.
    pub level2: f64,
    /// Decoded pertinency bit after the trace.
    pub bit: u64,
    /// Trace output: constant coefficient error, and the root-mean-square of the others.
    pub trace_constant: f64,
    pub trace_rest_rms: f64,
}

impl SecretKey {
    /// Measure the error of every stage of one detection trace.
    pub fn measure(&self, tr: &DetectTrace) -> StageErrors {
        let p = self.params;
        let d = p.level1_divisor() as f64;
        let delta1 = level1_delta(p);
        let mut e = StageErrors::default();

        let decrypt_lwe = |ct: &[u64], key: &[u64]| -> u64 {
            let (mask, body) = ct.split_at(ct.len() - 1);
            body[0].wrapping_sub(mask.iter().zip(key).fold(0u64, |a, (&m, &s)| a.wrapping_add(m.wrapping_mul(s))))
        };
        let phase1 = decrypt_lwe(&tr.level1, self.glwe1.as_ref());
        let s = ((phase1 as i64) as f64 / 2f64.powi(64) * d).round() as i64;
        e.level1_sum = s + p.clue_count as i64;
        e.level1 = native_err(phase1, delta1.wrapping_mul(s as u64));
        let phase_ks = decrypt_lwe(&tr.keyswitched, self.lwe2.as_ref());
        e.keyswitch = native_err(phase_ks, delta1.wrapping_mul(s as u64));

        // Level 2: constant coefficient of the GLWE phase.
        let glwe = GlweCiphertext::from_container(tr.level2.clone(), PolynomialSize(p.n2), CiphertextModulus::new_native());
        let mut pt = PlaintextList::new(0u64, PlaintextCount(p.n2));
        decrypt_glwe_ciphertext(&self.glwe2, &glwe, &mut pt);
        let c0 = pt.as_ref()[0];
        let v2 = (((digest_delta(p) as u128) << 64) / PRIME_P as u128) as u64;
        let bit = if (c0.wrapping_sub(v2 / 2) as i64) >= 0 && c0 < v2.wrapping_mul(3) / 2 { 1 } else { 0 };
        e.level2 = native_err(c0, v2.wrapping_mul(bit));

        // After the trace.
        let ntt = Ntt::new(p.n2);
        let key = PrimeGlweKey { polys: self.glwe3.polys.clone() };
        let phase = key.phase(&ntt, &tr.traced);
        let delta = digest_delta(p);
        let b = ((prime::centered_f64(phase[0]) / delta as f64).round() as i64).clamp(0, 1) as u64;
        e.bit = b;
        e.trace_constant = prime::centered_f64(prime::sub(phase[0], prime::mul(b, delta))) / PRIME_P as f64;
        let sq: f64 = phase[1..].iter().map(|&x| (prime::centered_f64(x) / PRIME_P as f64).powi(2)).sum();
        e.trace_rest_rms = (sq / (p.n2 - 1) as f64).sqrt();
        e
    }
}
