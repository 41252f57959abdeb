//! The parameter sets a deployment may run, by name, and the default: the one list that help
//! texts, configuration docs and error messages quote. The schemes' crates define the sets
//! themselves (omr-core's TFHE sets, omr-light's linear one); omr-server's tests check that
//! every name here is a secure set it runs, and tidy checks that the docs name no other.

/// Every secure parameter set, the default first.
pub const PARAM_SETS: &[&str] = &[DEFAULT_PARAM_SET, "omr-v1", "omr-light-v1"];

/// The set a new deployment runs, and the one `omr keygen` makes keys for, when none is named:
/// omr-v2 detects faster than omr-v1 with smaller keys and clues (docs/benchmarks.md); omr-v1
/// covers a longer digest range. A store that already holds a set keeps it.
pub const DEFAULT_PARAM_SET: &str = "omr-v2";

/// [`PARAM_SETS`] as prose: "omr-v2 (the default), omr-v1, omr-light-v1".
pub fn param_set_list() -> String {
    PARAM_SETS
        .iter()
        .map(|s| {
            if *s == DEFAULT_PARAM_SET {
                format!("{s} (the default)")
            } else {
                (*s).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_the_default_once_and_first() {
        assert_eq!(PARAM_SETS[0], DEFAULT_PARAM_SET);
        assert_eq!(
            PARAM_SETS
                .iter()
                .filter(|s| **s == DEFAULT_PARAM_SET)
                .count(),
            1
        );
        assert_eq!(
            param_set_list(),
            "omr-v2 (the default), omr-v1, omr-light-v1"
        );
    }
}
