//! The production parameter sets (`omr-v1`, `omr-v2`), measured: sizes, per-stage noise against
//! the predicted budget, clue false-positive/negative statistics, and an exact end-to-end digest.
//! Slow (tens of seconds in release); part of the normal test run.

use omr_core::noise::Budget;
use omr_core::{keygen, ClueKey, Digest, FoldScratch, KeySet, ParamSet, OMR_V1, OMR_V2};
use std::sync::OnceLock;

const KBAR: usize = 50;

struct Fixture {
    me: KeySet,
    other: KeySet,
}

fn fixture(p: &'static ParamSet) -> &'static Fixture {
    static V1: OnceLock<Fixture> = OnceLock::new();
    static V2: OnceLock<Fixture> = OnceLock::new();
    let cell = if p.id == OMR_V1.id { &V1 } else { &V2 };
    cell.get_or_init(|| Fixture {
        me: keygen(p, KBAR).expect("keygen"),
        other: keygen(p, KBAR).expect("keygen"),
    })
}

fn std_dev(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Measured std must not exceed the prediction by more than `slack_bits`, and must not be
/// implausibly far below it (which would mean the measurement is broken).
fn assert_near(what: &str, measured: f64, predicted: f64, slack_bits: f64) {
    let diff = measured.log2() - predicted.log2();
    eprintln!(
        "{what}: measured 2^{:.2}, predicted 2^{:.2}",
        measured.log2(),
        predicted.log2()
    );
    assert!(
        diff <= slack_bits,
        "{what}: measured 2^{:.2} above predicted 2^{:.2}",
        measured.log2(),
        predicted.log2()
    );
    assert!(
        diff >= -4.0,
        "{what}: measured 2^{:.2} far below predicted 2^{:.2}",
        measured.log2(),
        predicted.log2()
    );
}

#[test]
fn v1_sizes_meet_their_targets() {
    sizes_meet(&OMR_V1, 120_000_000, 500_000);
}

#[test]
fn v2_sizes_meet_their_targets() {
    sizes_meet(&OMR_V2, 80_000_000, 200_000);
}

fn sizes_meet(p: &'static ParamSet, max_detection_key: usize, max_digest: usize) {
    let f = fixture(p);
    let clue = f.me.clue_key.make_clue().to_bytes();
    assert!(clue.len() <= 1600, "clue {} B", clue.len());
    let ck = f.me.clue_key.to_bytes();
    assert!(ck.len() <= 4096, "clue key {} B", ck.len());
    assert_eq!(ClueKey::from_bytes(&ck).unwrap(), f.me.clue_key);
    let dk = f.me.detection_key.to_bytes();
    eprintln!(
        "{}: clue {} B, clue key {} B, detection key {} B",
        p.name,
        clue.len(),
        ck.len(),
        dk.len()
    );
    assert!(
        dk.len() <= max_detection_key,
        "detection key {} B",
        dk.len()
    );
    assert!(Digest::encoded_len(p, KBAR) <= max_digest);
}

#[test]
fn v1_clue_noise_and_box_statistics_match_the_prediction() {
    clue_statistics(&OMR_V1);
}

#[test]
fn v2_clue_noise_and_box_statistics_match_the_prediction() {
    clue_statistics(&OMR_V2);
}

fn clue_statistics(p: &'static ParamSet) {
    let f = fixture(p);
    let budget = Budget::predict(p, KBAR);
    let h = p.box_half_width as i64;
    let mut own = Vec::new();
    let mut hits = 0usize;
    let mut samples = 0usize;
    for _ in 0..300 {
        for e in f.me.secret.clue_phases(&f.me.clue_key.make_clue()) {
            assert!(e.abs() <= h, "own clue outside its box: {e}");
            own.push(e as f64);
        }
        for e in f.me.secret.clue_phases(&f.other.clue_key.make_clue()) {
            samples += 1;
            if e.abs() <= h {
                hits += 1;
            }
        }
    }
    assert_near(
        "clue phase (units of 2N1)",
        std_dev(&own),
        budget.clue_std_units,
        0.2,
    );
    // A wrong key's clue lands in the box with probability (2h+1)/2N1: check within 5σ.
    let prob = (2 * h + 1) as f64 / (2 * p.n1) as f64;
    let mean = prob * samples as f64;
    let sd = (samples as f64 * prob * (1.0 - prob)).sqrt();
    eprintln!("wrong-key box hits: {hits} of {samples} (expected {mean:.1} ± {sd:.1})");
    assert!((hits as f64 - mean).abs() <= 5.0 * sd);
}

#[test]
fn v1_detection_noise_matches_the_budget_and_digests_decode_exactly() {
    detection_noise(&OMR_V1);
}

#[test]
fn v2_detection_noise_matches_the_budget_and_digests_decode_exactly() {
    detection_noise(&OMR_V2);
}

fn detection_noise(p: &'static ParamSet) {
    let f = fixture(p);
    let budget = Budget::predict(p, KBAR);
    let dk = f.me.detection_key.expand();
    let (mut l1, mut ks, mut l2, mut trc, mut rest) = (vec![], vec![], vec![], vec![], vec![]);
    let mut acc = dk.new_accumulator(7_000);
    let mut scratch = FoldScratch::default();
    let mut expected = Vec::new();
    for k in 0..24u64 {
        let index = 7_000 + k;
        let mine = k % 3 == 0;
        let clue = if mine {
            f.me.clue_key.make_clue()
        } else {
            f.other.clue_key.make_clue()
        };
        let (pv, trace) = dk.detect_traced(&clue).unwrap();
        let e = f.me.secret.measure(&trace);
        assert_eq!(e.bit, mine as u64, "message {k}: pertinency bit");
        if mine {
            assert_eq!(e.level1_sum, p.clue_count as i64);
        }
        l1.push(e.level1);
        ks.push(e.keyswitch - e.level1);
        l2.push(e.level2);
        trc.push(e.trace_constant);
        rest.push(e.trace_rest_rms);
        let payload: Vec<u8> = (0..p.payload_bytes)
            .map(|b| (b as u64 * 13 + index) as u8)
            .collect();
        dk.fold(&mut acc, index, &pv, &payload, &mut scratch)
            .unwrap();
        if mine {
            expected.push((index, payload));
        }
    }
    assert_near("level 1", std_dev(&l1), budget.level1_std, 1.0);
    assert_near("keyswitch", std_dev(&ks), budget.keyswitch_std, 1.0);
    assert_near("level 2", std_dev(&l2), budget.level2_std, 1.0);
    assert_near("PV constant", std_dev(&trc), budget.pv_constant_std, 1.0);
    let rest_rms = (rest.iter().map(|r| r * r).sum::<f64>() / rest.len() as f64).sqrt();
    assert_near("PV other coefficients", rest_rms, budget.pv_rest_std, 1.0);

    let digest = dk.digest(&acc).unwrap();
    let wire = Digest::from_bytes(&digest.to_bytes()).unwrap();
    let got: Vec<(u64, Vec<u8>)> =
        f.me.secret
            .decode(&wire)
            .unwrap()
            .into_iter()
            .map(|r| (r.index, r.payload))
            .collect();
    assert_eq!(got, expected);
    // Digest noise for these 24 messages against the prediction scaled to 24.
    let errs = f.me.secret.digest_errors(&wire, &expected);
    let m = acc.len() as f64;
    let predicted = (budget.fold_std_per_message.powi(2) * m
        + budget.down_keyswitch_std.powi(2)
        + budget.digest_switch_std.powi(2))
    .sqrt();
    let layout = dk.layout();
    let payload_errs = &errs[layout.index_polys * p.n2..];
    assert_near(
        "digest payload coefficients (24 messages)",
        std_dev(payload_errs),
        predicted,
        1.0,
    );
    let max = errs.iter().fold(0f64, |a, e| a.max(e.abs()));
    assert!(
        max < 1.0 / (2.0 * p.plain_modulus as f64) / 4.0,
        "max digest error {max}"
    );
}
