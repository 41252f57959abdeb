//! tfhe-rs's FFT plans, pinned for a process. The first time a process transforms a polynomial
//! size, tfhe-rs times the FFT algorithms for ~10 ms each and keeps the fastest, and a
//! Fourier-domain bootstrapping key is laid out by that choice (coefficient order and rounding).
//! So an expanded key written by one process is valid in another only if both chose alike,
//! which timing does not promise. [`pin_fft_plans`] installs the choices recorded by an earlier
//! run (or measures them as tfhe-rs would, and records them), so that every run on a machine
//! lays keys out the same way.
//!
//! This is the one place omr-core touches process-wide state: tfhe-rs's plan table.

use std::time::Duration;

use tfhe::core_crypto::fft_impl::fft64::math::fft::{setup_custom_fft_plan, FftAlgo, Method, Plan};

use crate::params::ParamSet;

const ALGOS: [(FftAlgo, &str); 8] = [
    (FftAlgo::Dif2, "dif2"),
    (FftAlgo::Dit2, "dit2"),
    (FftAlgo::Dif4, "dif4"),
    (FftAlgo::Dit4, "dit4"),
    (FftAlgo::Dif8, "dif8"),
    (FftAlgo::Dit8, "dit8"),
    (FftAlgo::Dif16, "dif16"),
    (FftAlgo::Dit16, "dit16"),
];

/// Install tfhe-rs FFT plans for `params`' polynomial sizes: the ones `record` names, measuring
/// (as tfhe-rs does) any size it lacks or names wrongly. Returns the record of what was
/// installed (one line per FFT size: `size algorithm base_size`), for the next run.
///
/// Call it before anything in the process transforms a polynomial of these sizes (expands,
/// generates or uses a key): replacing a plan that is in use would make every Fourier-domain
/// key made before it wrong.
pub fn pin_fft_plans(params: &ParamSet, record: &str) -> String {
    let mut sizes = vec![params.n1 / 2, params.n2 / 2];
    sizes.dedup();
    let mut out = String::new();
    for n in sizes {
        let recorded = record.lines().find_map(|line| parse(line, n));
        let plan = match recorded {
            Some((base_algo, base_n)) => Plan::new(n, Method::UserProvided { base_algo, base_n }),
            None => Plan::new(n, Method::Measure(Duration::from_millis(10))),
        };
        let (algo, base_n) = plan.algo();
        let name = ALGOS
            .iter()
            .find(|(a, _)| *a == algo)
            .map_or("?", |(_, s)| s);
        out.push_str(&format!("{n} {name} {base_n}\n"));
        setup_custom_fft_plan(plan);
    }
    out
}

/// `size algorithm base_size` for FFT size `n`, if the line is one tfhe-rs's measurement could
/// have chosen (anything else would make tfhe-fft panic).
fn parse(line: &str, n: usize) -> Option<(FftAlgo, usize)> {
    let mut words = line.split_whitespace();
    if words.next()?.parse::<usize>().ok()? != n {
        return None;
    }
    let algo = words.next()?;
    let algo = ALGOS.iter().find(|(_, s)| *s == algo)?.0;
    let base_n: usize = words.next()?.parse().ok()?;
    let valid = if n <= 256 {
        base_n == n
    } else {
        (base_n == 512 || base_n == 1024) && base_n <= n
    };
    (valid && n.is_power_of_two() && words.next().is_none()).then_some((algo, base_n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_only_when_tfhe_could_have_chosen_them() {
        assert_eq!(parse("1024 dif4 512", 1024), Some((FftAlgo::Dif4, 512)));
        assert_eq!(parse("1024 dit16 1024", 1024), Some((FftAlgo::Dit16, 1024)));
        assert_eq!(parse("256 dif8 256", 256), Some((FftAlgo::Dif8, 256)));
        for bad in [
            "1024 dif4 256",
            "1024 dif4 2048",
            "1024 dif3 512",
            "1024 dif4",
            "1024 dif4 512 x",
            "512 dif4 512",
            "256 dif4 128",
            "",
        ] {
            assert_eq!(parse(bad, 1024).or(parse(bad, 256)), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        // The record is a file on disk: whatever a line says, it is refused or it makes a plan
        // (tfhe-fft panics on a plan it could not have chosen).
        #[test]
        fn a_record_line_is_refused_or_makes_a_plan(
            set: proptest::sample::Index,
            algo in 0usize..ALGOS.len() + 1,
            base_log in 0u32..14,
            junk: String,
        ) {
            let p = crate::params::ALL[set.index(crate::params::ALL.len())];
            for n in [p.n1 / 2, p.n2 / 2] {
                let name = ALGOS.get(algo).map_or("dif3", |(_, s)| s);
                let _ = parse(&junk, n);
                if let Some((base_algo, base_n)) = parse(&format!("{n} {name} {}", 1usize << base_log), n) {
                    Plan::new(n, Method::UserProvided { base_algo, base_n });
                }
            }
        }
    }
}
