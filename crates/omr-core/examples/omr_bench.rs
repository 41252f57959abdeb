//! `omr bench` until the CLI crate exists: per-stage detection timings, sizes and decode time as
//! one JSON object (the shape DESIGN.md specifies).
//!
//! cargo run --release -p omr-core --example omr_bench -- [--params omr-v1] [--threads N]
//!     [--messages M] [--kbar K]

use std::time::{Duration, Instant};

use omr_core::{keygen, Clue, FoldScratch, ParamSet, StageTimes};
use rayon::prelude::*;
use tfhe::core_crypto::prelude::*;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One KS + PBS at tfhe-rs's PARAM_MESSAGE_2_CARRY_2_KS_PBS (TUniform, 2^-128) parameters,
/// through core_crypto: the machine-speed yardstick.
fn reference_pbs_ms() -> f64 {
    let mut seeder = new_seeder();
    let seeder = seeder.as_mut();
    let mut sgen = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
    let mut egen = EncryptionRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed(), seeder);
    let small: LweSecretKeyOwned<u64> =
        allocate_and_generate_new_binary_lwe_secret_key(LweDimension(918), &mut sgen);
    let glwe: GlweSecretKeyOwned<u64> = allocate_and_generate_new_binary_glwe_secret_key(
        GlweDimension(1),
        PolynomialSize(2048),
        &mut sgen,
    );
    let big = glwe.clone().into_lwe_secret_key();
    let m = CiphertextModulus::new_native();
    let bsk = par_allocate_and_generate_new_lwe_bootstrap_key(
        &small,
        &glwe,
        DecompositionBaseLog(23),
        DecompositionLevelCount(1),
        DynamicDistribution::new_t_uniform(17),
        m,
        &mut egen,
    );
    let mut fbsk = FourierLweBootstrapKey::new(
        LweDimension(918),
        GlweSize(2),
        PolynomialSize(2048),
        DecompositionBaseLog(23),
        DecompositionLevelCount(1),
    );
    par_convert_standard_lwe_bootstrap_key_to_fourier(&bsk, &mut fbsk);
    let ksk = allocate_and_generate_new_lwe_keyswitch_key(
        &big,
        &small,
        DecompositionBaseLog(4),
        DecompositionLevelCount(4),
        DynamicDistribution::new_t_uniform(45),
        m,
        &mut egen,
    );
    let ct = allocate_and_encrypt_new_lwe_ciphertext(
        &big,
        Plaintext(3u64 << 60),
        DynamicDistribution::new_t_uniform(17),
        m,
        &mut egen,
    );
    let lut = generate_programmable_bootstrap_glwe_lut(
        PolynomialSize(2048),
        GlweSize(2),
        16,
        m,
        1u64 << 59,
        |x: u64| x,
    );
    let mut ks_out = LweCiphertext::new(0u64, LweSize(919), m);
    let mut out = LweCiphertext::new(0u64, LweSize(2049), m);
    let runs = 10;
    let start = Instant::now();
    for _ in 0..runs {
        keyswitch_lwe_ciphertext(&ksk, &ct, &mut ks_out);
        programmable_bootstrap_lwe_ciphertext(&ks_out, &mut out, &lut, &fbsk);
    }
    ms(start.elapsed()) / runs as f64
}

fn main() {
    let params = ParamSet::by_name(&arg("--params", "omr-v1")).expect("known parameter set");
    let threads: usize = arg("--threads", "1").parse().expect("--threads N");
    let messages: usize = arg("--messages", "8").parse().expect("--messages M");
    let kbar: usize = arg("--kbar", "50").parse().expect("--kbar K");
    let pertinent: usize = arg("--pertinent", &(messages / 2).min(kbar).to_string())
        .parse()
        .expect("--pertinent P");
    assert!(
        pertinent <= messages && pertinent <= kbar,
        "need pertinent <= messages and <= kbar"
    );
    let batch: usize = arg("--batch", "1").parse().expect("--batch B");
    let mine = |i: usize| (i * pertinent) % messages < pertinent;
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon pool");

    let t0 = Instant::now();
    let keys = keygen(params, kbar).expect("keygen");
    let keygen_ms = ms(t0.elapsed());
    let dk_bytes = keys.detection_key.to_bytes();
    let t0 = Instant::now();
    let dk = keys.detection_key.expand();
    let expand_ms = ms(t0.elapsed());
    let other = keygen(params, kbar).expect("keygen");

    // `pertinent` messages of the board are for the recipient, spread evenly; the rest are for
    // someone else.
    let clues: Vec<Clue> = (0..messages)
        .map(|i| {
            if mine(i) {
                keys.clue_key.make_clue()
            } else {
                other.clue_key.make_clue()
            }
        })
        .collect();
    let payload = vec![0xA5u8; params.payload_bytes];

    let reference = reference_pbs_ms();

    let t0 = Instant::now();
    let chunks: Vec<Vec<&Clue>> = clues.chunks(batch).map(|c| c.iter().collect()).collect();
    let timed: Vec<(Vec<omr_core::Pertinency>, StageTimes)> = chunks
        .par_iter()
        .map(|c| dk.detect_timed(c).expect("detect"))
        .collect();
    let detect_wall = t0.elapsed();
    let mut stages = StageTimes::default();
    for (_, s) in &timed {
        stages += *s;
    }
    let results: Vec<omr_core::Pertinency> = timed.into_iter().flat_map(|(p, _)| p).collect();

    let mut acc = dk.new_accumulator(0);
    let mut scratch = FoldScratch::default();
    let t0 = Instant::now();
    for (i, pv) in results.iter().enumerate() {
        dk.fold(&mut acc, i as u64, pv, &payload, &mut scratch)
            .expect("fold");
    }
    let fold_total = t0.elapsed();
    let t0 = Instant::now();
    let digest = dk.digest(&acc).expect("digest");
    let digest_encode_ms = ms(t0.elapsed());
    let digest_bytes = digest.to_bytes();
    let t0 = Instant::now();
    let got = keys.secret.decode(&digest).expect("decode");
    let decode_ms = ms(t0.elapsed());
    let expected: Vec<u64> = (0..messages)
        .filter(|&i| mine(i))
        .map(|i| i as u64)
        .collect();
    let got: Vec<u64> = got.iter().map(|r| r.index).collect();
    assert_eq!(
        got, expected,
        "decoded indices differ from the pertinent ones"
    );

    let n = messages as f64;
    let json = serde_json::json!({
        "param_set": params.name,
        "threads": threads,
        "messages": messages,
        "kbar": kbar,
        "batch": batch,
        "pertinent": pertinent,
        "detect_ms_per_message": ms(detect_wall) / n,
        "reference_pbs_ms": reference,
        "stage_ms": {
            "level1": ms(stages.level1) / n,
            "keyswitch": ms(stages.keyswitch) / n,
            "level2": ms(stages.level2) / n,
            "trace": ms(stages.trace) / n,
            "fold": ms(fold_total) / n,
        },
        "clue_bytes": clues[0].to_bytes().len(),
        "clue_key_bytes": keys.clue_key.to_bytes().len(),
        "detection_key_bytes": dk_bytes.len(),
        "detection_key_memory_bytes": dk.memory_bytes(),
        "digest_bytes": digest_bytes.len(),
        "digest_encode_ms": digest_encode_ms,
        "decode_ms": decode_ms,
        "keygen_ms": keygen_ms,
        "expand_ms": expand_ms,
    });
    println!("{json}");
}
