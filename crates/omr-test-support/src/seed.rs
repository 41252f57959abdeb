//! Randomness a failure can be replayed from: a generator seeded from `OMR_TEST_SEED`, or from
//! a fresh seed that is printed.

use std::io::Write;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The variable that fixes the seed of [`seeded_rng`], e.g. `OMR_TEST_SEED=1234`.
pub const SEED_VAR: &str = "OMR_TEST_SEED";

/// A generator for `test`, seeded from `OMR_TEST_SEED` when it is set (a `u64`), otherwise
/// from a new random seed. Either way `SEED: <test>: <seed> (replay with OMR_TEST_SEED=<seed>)`
/// goes to stderr, past libtest's capture, so a failure (or a hang) can be replayed.
///
/// # Panics
/// If `OMR_TEST_SEED` is set but is not a `u64`.
pub fn seeded_rng(test: &str) -> ChaCha8Rng {
    let seed = seed_from(std::env::var(SEED_VAR).ok().as_deref());
    let _ = writeln!(
        std::io::stderr(),
        "SEED: {test}: {seed} (replay with {SEED_VAR}={seed})"
    );
    ChaCha8Rng::seed_from_u64(seed)
}

/// The seed `OMR_TEST_SEED` holds (`value`), or a new random one when it is unset.
fn seed_from(value: Option<&str>) -> u64 {
    match value {
        Some(s) => s
            .trim()
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("{SEED_VAR}={s:?} is not a u64: {e}")),
        None => rand::thread_rng().gen(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(seed: u64) -> Vec<u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..8).map(|_| rng.gen_range(0..1000)).collect()
    }

    #[test]
    fn a_given_seed_replays_the_same_draws() {
        assert_eq!(seed_from(Some("1234")), 1234);
        assert_eq!(seed_from(Some(" 1234\n")), 1234);
        assert_eq!(draws(seed_from(Some("1234"))), draws(1234));
    }

    #[test]
    fn without_a_seed_each_run_draws_a_new_one() {
        let seeds: std::collections::BTreeSet<u64> = (0..4).map(|_| seed_from(None)).collect();
        assert!(seeds.len() > 1, "{seeds:?}");
    }

    #[test]
    #[should_panic(expected = "is not a u64")]
    fn a_malformed_seed_is_refused() {
        seed_from(Some("twelve"));
    }
}
