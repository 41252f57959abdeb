//! The security argument in code: every LWE/GLWE instance of a parameter set with its noise,
//! checked against tfhe-rs's 132-bit minimum-noise formula (a fit to the lattice estimator).

use tfhe::core_crypto::commons::noise_formulas::secure_noise::minimal_lwe_bound_for_132_bits_security_tuniform_impl;

use crate::params::{ParamSet, PRIME_P};

/// One LWE or (G)LWE instance whose secret must stay hidden.
#[derive(Debug, Clone)]
pub struct Instance {
    pub name: &'static str,
    /// LWE dimension (k·N for GLWE).
    pub dimension: usize,
    /// log2 of the ciphertext modulus.
    pub log2_modulus: f64,
    /// TUniform bound (log2) of the noise we use.
    pub noise_bound_log2: u32,
    /// tfhe-rs's minimal TUniform bound for 132-bit security at this dimension and modulus
    /// (negative when any noise suffices by the formula).
    pub min_bound_log2: i64,
}

impl Instance {
    pub fn is_secure(&self) -> bool {
        self.noise_bound_log2 as i64 >= self.min_bound_log2
    }
}

fn min_bound(dimension: usize, log2_modulus: f64) -> i64 {
    // The tfhe-rs function returns `ceil(...) as u32`, which wraps for negative values: use the
    // same expression with a signed result (identical for every non-negative case).
    let modulus = 2f64.powf(log2_modulus);
    let v = (-0.025167785 * dimension as f64 + modulus.log2() + 4.10067100000001).ceil();
    if v >= 0.0 {
        debug_assert_eq!(
            v as u32,
            minimal_lwe_bound_for_132_bits_security_tuniform_impl(dimension as f64, modulus)
        );
    }
    v as i64
}

/// Every instance of `p`.
pub fn instances(p: &ParamSet) -> Vec<Instance> {
    let q = 64.0;
    let prime = (PRIME_P as f64).log2();
    let mk = |name, dimension, log2_modulus, noise_bound_log2| Instance {
        name,
        dimension,
        log2_modulus,
        noise_bound_log2,
        min_bound_log2: min_bound(dimension, log2_modulus),
    };
    vec![
        mk(
            if p.clue_rank > 1 {
                "clue key and clues (module LWE, rank r, N = n/r)"
            } else {
                "clue key and clues (RLWE, N = n)"
            },
            p.clue_dim,
            q,
            p.clue_noise_log2,
        ),
        mk(
            if p.level1_uses_level2_key {
                "level-1 bootstrapping key (none: level 1 uses the level-2 key)"
            } else {
                "level-1 bootstrapping key (GLWE k=1, N1)"
            },
            p.n1,
            q,
            p.glwe1_noise_log2,
        ),
        mk(
            "LWE keyswitching key (LWE n2)",
            p.lwe2_dim,
            p.ksk_modulus_log as f64,
            p.lwe2_noise_log2,
        ),
        mk(
            "level-2 bootstrapping key (GLWE k=1, N2)",
            p.n2,
            q,
            p.glwe2_noise_log2,
        ),
        mk(
            "up keyswitching key (GLWE k3, N2, mod p)",
            p.k3 * p.n2,
            prime,
            p.glwe3_noise_log2,
        ),
        mk(
            "trace keys (GLWE k3, N2, mod p)",
            p.k3 * p.n2,
            prime,
            p.glwe3_noise_log2,
        ),
        mk(
            "down keyswitching key (GLWE k=1, N2, mod p)",
            p.n2,
            prime,
            p.glwe2_noise_log2,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{INSECURE_TEST, OMR_V1, OMR_V2};

    #[test]
    fn every_production_instance_meets_the_132_bit_formula() {
        for p in [&OMR_V1, &OMR_V2] {
            for i in instances(p) {
                assert!(i.is_secure(), "{}: {i:?}", p.name);
            }
        }
        const { assert!(!OMR_V1.insecure && !OMR_V2.insecure) };
    }

    #[test]
    fn sets_with_one_key_for_both_levels_meet_its_conditions() {
        for p in crate::params::ALL
            .iter()
            .filter(|p| p.level1_uses_level2_key)
        {
            // Level 1 reads the level-2 key's rows at q/B2² as a one-level key of base B2².
            assert_eq!(p.bsk1_levels, 1, "{}", p.name);
            assert_eq!(p.bsk1_base_log, 2 * p.bsk2_base_log, "{}", p.name);
            assert!(p.bsk2_levels >= 2, "{}", p.name);
            // The level-2 key encrypts the clue secret under GLWE1 = GLWE2.
            assert_eq!(p.lwe2_dim, p.clue_dim, "{}", p.name);
            assert_eq!(p.n1, p.n2, "{}", p.name);
            assert_eq!(p.glwe1_noise_log2, p.glwe2_noise_log2, "{}", p.name);
        }
    }

    #[test]
    fn the_test_set_is_insecure_and_says_so() {
        const { assert!(INSECURE_TEST.insecure) };
        assert!(INSECURE_TEST.name.contains("insecure"));
        assert!(instances(&INSECURE_TEST).iter().any(|i| !i.is_secure()));
    }
}
