//! `omr` commands that need no server: help for every command, `omr bench`'s JSON, and
//! `omr demo` (which runs its own omrd in-process).

use crate::common::{omr, omr_fails, omr_json};
use serde_json::Value;

/// `omr demo` with the default parameter set (a small board keeps it short).
#[test]
fn demo_runs_to_success() {
    let out = omr(&[
        "demo",
        "--recipients",
        "2",
        "--messages",
        "12",
        "--per-recipient",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["param_set"], omr_api::param_sets::DEFAULT_PARAM_SET);
    assert_eq!(report["ok"], true);
    for r in report["recipients"].as_array().unwrap() {
        assert_eq!(r["sent"].as_array().unwrap().len(), 2);
        assert_eq!(r["sent"], r["retrieved"], "{report}");
    }
}

#[test]
fn every_command_has_help_with_examples() {
    for cmd in [
        "keygen",
        "register",
        "send",
        "digest",
        "status",
        "delete",
        "bench",
        "bench-postage",
        "demo",
    ] {
        let out = omr(&[cmd, "--help"]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Example"),
            "omr {cmd} --help has no examples:\n{text}"
        );
    }
}

/// `omr bench-capacity` at a tiny size (three insecure-test keys, two in memory, a second of
/// posting, a key out of memory loaded after a second), so that a change that breaks it fails
/// CI: it runs, every message is detected for every key, and the report has the figures it
/// promises.
#[test]
fn bench_capacity_runs_at_a_tiny_size() {
    let r = omr_json(&[
        "bench-capacity",
        "--insecure-test-params",
        "--keys",
        "3",
        "--memory-keys",
        "2",
        "--interval-ms",
        "250",
        "--duration-secs",
        "1",
        "--baseline-messages",
        "2",
        "--distinct",
        "1",
        // A key out of memory waits this long to collect a batch worth its load (300 s by
        // default, which the run would wait out twice).
        "--max-wait-secs",
        "1",
        "--json",
    ]);
    assert_eq!(
        (r["keys"].as_u64(), r["memory_keys"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(r["caught_up"], true, "{r}");
    assert!(r["board_messages"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["offline_samples"].as_u64().unwrap() > 0, "{r}");
}

/// `omr bench --json` prints the fields DESIGN.md names, with plausible values.
#[test]
fn bench_prints_the_designed_json() {
    let r = omr_json(&[
        "bench",
        "--param-set",
        "insecure-test",
        "--messages",
        "4",
        "--threads",
        "2",
        "--json",
    ]);
    assert_eq!(r["param_set"], "insecure-test");
    assert_eq!(
        (r["threads"].as_u64(), r["messages"].as_u64()),
        (Some(2), Some(4))
    );
    for k in ["detect_ms_per_message", "reference_pbs_ms", "decode_ms"] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
    // The FFT plans the run used, one `size algorithm base` line per size.
    let plans = r["fft_plans"].as_array().expect("fft_plans");
    assert!(!plans.is_empty(), "{r}");
    for plan in plans {
        let words: Vec<&str> = plan.as_str().unwrap().split_whitespace().collect();
        assert_eq!(words.len(), 3, "{plan}");
        assert!(
            words[0].parse::<usize>().unwrap().is_power_of_two(),
            "{plan}"
        );
    }
    for k in ["level1", "keyswitch", "level2", "trace", "fold"] {
        assert!(r["stage_ms"][k].as_f64().unwrap() > 0.0, "stage {k}: {r}");
    }
    let p = &omr_core::INSECURE_TEST;
    assert_eq!(r["clue_bytes"].as_u64(), Some(p.clue_bytes() as u64));
    assert_eq!(r["kbar"].as_u64(), Some(p.max_kbar as u64));
    for k in ["clue_key_bytes", "detection_key_bytes", "digest_bytes"] {
        assert!(r[k].as_u64().unwrap() > 0, "{k}: {r}");
    }
    // k̄ above the set's maximum is refused with the limit named.
    let e = omr_fails(&["bench", "--param-set", "insecure-test", "--kbar", "999"]);
    assert!(e.contains("999") && e.contains("32"), "{e}");
}
