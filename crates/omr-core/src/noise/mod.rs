//! Noise measurement with the secret key: phases of every intermediate ciphertext of a detection,
//! compared with their expected plaintexts, as log2 of the standard deviation relative to the
//! modulus. Used by tests and by `omr bench --noise`; never by the detector.

use crate::clue::Clue;
use crate::digest::Digest;
use crate::layout::{message_plaintext, payload_symbols, Layout};
use crate::params::ParamSet;
use tfhe::core_crypto::commons::noise_formulas::lwe_keyswitch::keyswitch_additive_variance_132_bits_security_tuniform_impl;
use tfhe::core_crypto::commons::noise_formulas::lwe_programmable_bootstrap::pbs_variance_132_bits_security_tuniform_fft_mul_impl;
use tfhe::core_crypto::commons::noise_formulas::modulus_switch::modulus_switch_additive_variance_impl;
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
            body[0].wrapping_sub(
                mask.iter()
                    .zip(key)
                    .fold(0u64, |a, (&m, &s)| a.wrapping_add(m.wrapping_mul(s))),
            )
        };
        let phase1 = decrypt_lwe(&tr.level1, self.glwe1.as_ref());
        let s = ((phase1 as i64) as f64 / 2f64.powi(64) * d).round() as i64;
        e.level1_sum = s + p.clue_count as i64;
        e.level1 = native_err(phase1, delta1.wrapping_mul(s as u64));
        let phase_ks = decrypt_lwe(&tr.keyswitched, self.lwe2.as_ref());
        e.keyswitch = native_err(phase_ks, delta1.wrapping_mul(s as u64));

        // Level 2: constant coefficient of the GLWE phase.
        let glwe = GlweCiphertext::from_container(
            tr.level2.clone(),
            PolynomialSize(p.n2),
            CiphertextModulus::new_native(),
        );
        let mut pt = PlaintextList::new(0u64, PlaintextCount(p.n2));
        decrypt_glwe_ciphertext(&self.glwe2, &glwe, &mut pt);
        let c0 = pt.as_ref()[0];
        let v2 = (((digest_delta(p) as u128) << 64) / PRIME_P as u128) as u64;
        let bit = if (c0.wrapping_sub(v2 / 2) as i64) >= 0 && c0 < v2.wrapping_mul(3) / 2 {
            1
        } else {
            0
        };
        e.level2 = native_err(c0, v2.wrapping_mul(bit));

        // After the trace.
        let ntt = Ntt::new(p.n2);
        let key = PrimeGlweKey {
            polys: self.glwe3.polys.clone(),
        };
        let phase = key.phase(&ntt, &tr.traced);
        let delta = digest_delta(p);
        let b = ((prime::centered_f64(phase[0]) / delta as f64).round() as i64).clamp(0, 1) as u64;
        e.bit = b;
        e.trace_constant =
            prime::centered_f64(prime::sub(phase[0], prime::mul(b, delta))) / PRIME_P as f64;
        let sq: f64 = phase[1..]
            .iter()
            .map(|&x| (prime::centered_f64(x) / PRIME_P as f64).powi(2))
            .sum();
        e.trace_rest_rms = (sq / (p.n2 - 1) as f64).sqrt();
        e
    }
}

// ---------------------------------------------------------------------------------------------
// Predictions.

const Q64: f64 = 18446744073709551616.0;
const MANTISSA: f64 = 53.0;

/// Variance of TUniform(b): (2^(2b+1) + 1) / 6.
pub fn tuniform_variance(b: u32) -> f64 {
    (2f64.powi(2 * b as i32 + 1) + 1.0) / 6.0
}

/// Two-sided Gaussian tail P(|X| > z·σ), via the complementary error function.
pub fn gaussian_tail(z: f64) -> f64 {
    erfc(z / std::f64::consts::SQRT_2)
}

/// log2 of the two-sided Gaussian tail, accurate where `gaussian_tail` underflows.
pub fn log2_gaussian_tail(z: f64) -> f64 {
    if z < 30.0 {
        gaussian_tail(z).log2()
    } else {
        // 2·φ(z)/z · (1 - 1/z²): the asymptotic expansion of the two-sided tail.
        let ln = -z * z / 2.0 - (z * (std::f64::consts::PI / 2.0).sqrt()).ln()
            + (1.0 - 1.0 / (z * z)).ln();
        ln / std::f64::consts::LN_2
    }
}

/// erfc for z ≥ 0 with relative error < 1.2e-7 (Numerical Recipes' Chebyshev fit), good far
/// into the tail, which is where we need it.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Variance (relative to p²) added by one prime-modulus GLWE keyswitch.
pub fn prime_keyswitch_variance(
    k_in: usize,
    n: usize,
    base_log: usize,
    levels: usize,
    key_noise_log2: u32,
) -> f64 {
    let p = crate::params::PRIME_P as f64;
    let b = 2f64.powi(base_log as i32);
    let digits =
        (k_in * n * levels) as f64 * (b * b / 12.0 + 1.0 / 6.0) * tuniform_variance(key_noise_log2)
            / (p * p);
    let rounding = (k_in * n) as f64 * 0.5 * b.powi(-2 * levels as i32) / 12.0;
    digits + rounding
}

/// The noise budget of a parameter set, every figure a standard deviation relative to its
/// modulus (or a probability), as docs/PARAMETERS.md presents it.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Clue phase error std-dev in units of the transport modulus 2·N1.
    pub clue_std_units: f64,
    pub false_negative_per_clue: f64,
    pub false_negative_per_message: f64,
    pub false_positive_per_message: f64,
    pub level1_std: f64,
    pub keyswitch_std: f64,
    /// Level-2 input (after keyswitch and switch to 2·N2) std, and its z-margin to the window.
    pub level2_input_std: f64,
    pub level2_input_z: f64,
    pub level2_std: f64,
    pub up_keyswitch_std: f64,
    pub trace_keyswitch_std: f64,
    /// Pertinency ciphertext: constant-coefficient std and the other coefficients' std.
    pub pv_constant_std: f64,
    pub pv_rest_std: f64,
    /// Digest: std of one folded message in a dense payload coefficient, and over M messages.
    pub fold_std_per_message: f64,
    pub digest_std: f64,
    pub down_keyswitch_std: f64,
    pub digest_switch_std: f64,
    pub digest_total_std: f64,
    /// log2 of the failure probability per coefficient and per digest (union bound over its
    /// coefficients), at M = max_range.
    pub log2_digest_failure_per_coefficient: f64,
    pub log2_digest_failure: f64,
    pub max_range: u64,
}

impl Budget {
    /// Predict the noise at every stage for `p`, with the digest sized for k̄.
    pub fn predict(p: &ParamSet, kbar: usize) -> Budget {
        let n = p.clue_dim as f64;
        let qt = (2 * p.n1) as f64;
        let v43 = tuniform_variance(p.clue_noise_log2);
        let dropped = p.clue_key_dropped_bits();
        let v_round_pk = 2f64.powi(2 * dropped as i32) / 12.0;
        // e·r + e2 + <e1, s> + (pk rounding)·r, relative, then in units of q_t.
        let enc_var = ((n / 2.0) * (v43 + v_round_pk) + v43 + (n / 2.0) * v43) / (Q64 * Q64);
        let clue_var_units = (n / 2.0) / 12.0 + 1.0 / 12.0 + enc_var * qt * qt;
        let clue_std_units = clue_var_units.sqrt();
        let h = p.box_half_width as f64;
        let fn_clue = gaussian_tail((h + 0.5) / clue_std_units);
        let fn_msg = fn_clue * p.clue_count as f64;
        let fp_msg = ((2.0 * h + 1.0) / qt).powi(p.clue_count as i32);

        let pbs = |input: usize, n_out: usize, base_log: usize, levels: usize| {
            pbs_variance_132_bits_security_tuniform_fft_mul_impl(
                input as f64,
                1.0,
                n_out as f64,
                2f64.powi(base_log as i32),
                levels as f64,
                MANTISSA,
                Q64,
            )
        };
        let l1_var = p.clue_count as f64 * pbs(p.clue_dim, p.n1, p.bsk1_base_log, p.bsk1_levels);
        let q_ks = 2f64.powi(p.ksk_modulus_log as i32); // below 2^64: the input is rounded first
        let ks_var = keyswitch_additive_variance_132_bits_security_tuniform_impl(
            p.n1 as f64,
            p.lwe2_dim as f64,
            2f64.powi(p.ksk_base_log as i32),
            p.ksk_levels as f64,
            q_ks,
            q_ks,
        ) + if q_ks < Q64 {
            modulus_switch_additive_variance_impl(p.n1 as f64, Q64, q_ks)
        } else {
            0.0
        };
        let ms_var =
            modulus_switch_additive_variance_impl(p.lwe2_dim as f64, Q64, (2 * p.n2) as f64);
        let l2_in_var = l1_var + ks_var + ms_var;
        let window = 1.0 / (2.0 * p.level1_divisor() as f64);
        let l2_var = pbs(p.lwe2_dim, p.n2, p.bsk2_base_log, p.bsk2_levels);
        let up_var =
            prime_keyswitch_variance(1, p.n2, p.up_base_log, p.up_levels, p.glwe3_noise_log2);
        let tr_var = prime_keyswitch_variance(
            p.k3,
            p.n2,
            p.trace_base_log,
            p.trace_levels,
            p.glwe3_noise_log2,
        );
        let nn = p.n2 as f64;
        let pv_const_var = l2_var + up_var + tr_var * (nn * nn - 1.0) / 3.0;
        let pv_rest_var = tr_var * nn;
        let t = p.plain_modulus as f64;
        let c2 = (t * t - 1.0) / 12.0;
        let fold_var = (pv_const_var + (nn - 1.0) * pv_rest_var) * c2;
        let m = p.max_range as f64;
        let digest_var = m * fold_var;
        let down_var = prime_keyswitch_variance(
            p.k3,
            p.n2,
            p.down_base_log,
            p.down_levels,
            p.glwe2_noise_log2,
        );
        let qd = 2f64.powi(p.digest_modulus_log as i32);
        let switch_var = (1.0 + nn / 2.0) / 12.0 / (qd * qd);
        let total_var = digest_var + down_var + switch_var;
        let threshold = 1.0 / (2.0 * t);
        let per_coeff = log2_gaussian_tail(threshold / total_var.sqrt());
        let coeffs = (Layout::new(p, kbar).total_polys() * p.n2) as f64;
        Budget {
            clue_std_units,
            false_negative_per_clue: fn_clue,
            false_negative_per_message: fn_msg,
            false_positive_per_message: fp_msg,
            level1_std: l1_var.sqrt(),
            keyswitch_std: ks_var.sqrt(),
            level2_input_std: l2_in_var.sqrt(),
            level2_input_z: window / l2_in_var.sqrt(),
            level2_std: l2_var.sqrt(),
            up_keyswitch_std: up_var.sqrt(),
            trace_keyswitch_std: tr_var.sqrt(),
            pv_constant_std: pv_const_var.sqrt(),
            pv_rest_std: pv_rest_var.sqrt(),
            fold_std_per_message: fold_var.sqrt(),
            digest_std: digest_var.sqrt(),
            down_keyswitch_std: down_var.sqrt(),
            digest_switch_std: switch_var.sqrt(),
            digest_total_std: total_var.sqrt(),
            log2_digest_failure_per_coefficient: per_coeff,
            log2_digest_failure: per_coeff + coeffs.log2(),
            max_range: p.max_range,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements on clues and digests (secret-key side).

impl SecretKey {
    /// Phase of each of the clue's ℓ LWE ciphertexts, centered, in units of 2·N1 (0 ± noise for
    /// this recipient's clues; uniform for anyone else's).
    #[doc(hidden)]
    pub fn clue_phases(&self, clue: &Clue) -> Vec<i64> {
        let q = 1i64 << self.params.clue_modulus_log();
        let key = self.clue_sk.as_ref();
        let mut mask = vec![0usize; self.params.clue_dim];
        clue.bodies
            .iter()
            .enumerate()
            .map(|(j, &b)| {
                clue.expanded_mask(j, &mut mask);
                let dot: i64 = mask
                    .iter()
                    .zip(key)
                    .map(|(&a, &s)| a as i64 * s as i64)
                    .sum();
                let ph = (b as i64 - dot).rem_euclid(q);
                if ph >= q / 2 {
                    ph - q
                } else {
                    ph
                }
            })
            .collect()
    }

    /// Error of every digest coefficient relative to the digest modulus, given the messages that
    /// should be in it (index, payload).
    #[doc(hidden)]
    pub fn digest_errors(&self, digest: &Digest, expected: &[(u64, Vec<u8>)]) -> Vec<f64> {
        let p = self.params;
        let layout = Layout::new(p, self.kbar);
        let t = p.plain_modulus;
        let mut want = vec![0u64; layout.total_polys() * p.n2];
        let mut plain = Vec::new();
        for (i, payload) in expected {
            let symbols = payload_symbols(p, payload).expect("valid payload");
            message_plaintext(&layout, &self.prf_seed, *i, &symbols, &mut plain);
            for (w, &c) in want.iter_mut().zip(&plain) {
                // plain is centered mod p; bring back to [0, t).
                let v = if c > PRIME_P / 2 {
                    t - (PRIME_P - c) % t
                } else {
                    c % t
                };
                *w = (*w + v) % t;
            }
        }
        let q = 1u64 << p.digest_modulus_log;
        self.digest_phases(digest)
            .iter()
            .zip(&want)
            .map(|(&ph, &m)| {
                let enc = ((m as u128 * q as u128 + t as u128 / 2) / t as u128) as u64;
                let e = ph.wrapping_sub(enc) & (q - 1);
                let e = if e >= q / 2 {
                    e as i64 - q as i64
                } else {
                    e as i64
                };
                e as f64 / q as f64
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
