//! Print the predicted noise budget of a parameter set (log2 of each std-dev, and the failure
//! probabilities): the numbers of docs/PARAMETERS.md.
//!
//! cargo run --release -p omr-core --example noise_budget -- [omr-v1] [kbar]

use omr_core::noise::Budget;
use omr_core::ParamSet;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p = ParamSet::by_name(args.get(1).map(String::as_str).unwrap_or("omr-v1")).expect("set");
    let kbar: usize = args.get(2).map(|s| s.parse().expect("kbar")).unwrap_or(50);
    let b = Budget::predict(p, kbar);
    let l = |x: f64| x.log2();
    println!("parameter set {} (k̄ = {kbar}, M = {})", p.name, b.max_range);
    println!(
        "clue phase std            {:.2} units of 2N1 = 2^{:.2}",
        b.clue_std_units,
        l(b.clue_std_units / (2 * p.n1) as f64)
    );
    println!(
        "false negative per clue   2^{:.2}",
        l(b.false_negative_per_clue)
    );
    println!(
        "false negative per message 2^{:.2}",
        l(b.false_negative_per_message)
    );
    println!(
        "false positive per message 2^{:.2}",
        l(b.false_positive_per_message)
    );
    println!("level 1 (sum of ℓ)        2^{:.2}", l(b.level1_std));
    println!("keyswitch (added)         2^{:.2}", l(b.keyswitch_std));
    println!(
        "level-2 input             2^{:.2}  (window/σ = {:.1})",
        l(b.level2_input_std),
        b.level2_input_z
    );
    println!("level 2                   2^{:.2}", l(b.level2_std));
    println!("up keyswitch              2^{:.2}", l(b.up_keyswitch_std));
    println!(
        "trace keyswitch (one)     2^{:.2}",
        l(b.trace_keyswitch_std)
    );
    println!("PV constant               2^{:.2}", l(b.pv_constant_std));
    println!("PV other coefficients     2^{:.2}", l(b.pv_rest_std));
    println!(
        "fold, one message         2^{:.2}",
        l(b.fold_std_per_message)
    );
    println!("digest after M            2^{:.2}", l(b.digest_std));
    println!("down keyswitch            2^{:.2}", l(b.down_keyswitch_std));
    println!(
        "switch to 2^{}            2^{:.2}",
        p.digest_modulus_log,
        l(b.digest_switch_std)
    );
    println!(
        "digest total              2^{:.2}  (threshold 1/2t = 2^{:.2})",
        l(b.digest_total_std),
        l(1.0 / (2.0 * p.plain_modulus as f64))
    );
    println!(
        "failure per coefficient   2^{:.1}",
        b.log2_digest_failure_per_coefficient
    );
    println!("failure per digest        2^{:.1}", b.log2_digest_failure);
}
