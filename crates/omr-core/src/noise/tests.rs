//! Tests of the noise formulas: the Gaussian tail, and the predicted budget of each production
//! set against the targets.

use super::*;
use crate::params::{OMR_V1, OMR_V2};

#[test]
fn erfc_matches_known_tail_values() {
    // P(|X| > 6σ) = 1.973e-9, P(|X| > 8σ) = 1.244e-15.
    assert!((gaussian_tail(6.0) / 1.973e-9 - 1.0).abs() < 1e-3);
    assert!((gaussian_tail(8.0) / 1.244e-15 - 1.0).abs() < 1e-3);
    // The asymptotic branch agrees with the direct one where both are valid.
    let direct = gaussian_tail(20.0).log2();
    let z: f64 = 20.0;
    let asym =
        (-z * z / 2.0 - (z * (std::f64::consts::PI / 2.0).sqrt()).ln()) / std::f64::consts::LN_2;
    assert!((direct - asym).abs() < 0.01, "{direct} vs {asym}");
}

#[test]
fn production_budgets_meet_the_targets() {
    for p in [&OMR_V1, &OMR_V2] {
        let b = Budget::predict(p, 50);
        assert!(b.false_negative_per_message <= 2f64.powi(-30), "{b:#?}");
        assert!(b.false_positive_per_message <= 2f64.powi(-20), "{b:#?}");
        assert!(b.log2_digest_failure <= -40.0, "{b:#?}");
        assert!(b.max_range >= 1 << 14);
        assert!(b.level2_input_z >= 7.0, "{b:#?}");
    }
}
