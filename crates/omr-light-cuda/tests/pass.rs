//! The GPU pass bit-exact against the CPU pass, for random keys over full and partial batches,
//! with keys resident and time-shared beyond the budget. Where no GPU (or no NVRTC) is found,
//! the GPU tests print why and pass without running; the layout test runs everywhere.

use omr_light::{Batch, Clue, ExpandedKey, SecretKey, OMR_LIGHT_V1};
use omr_light_cuda::{CudaError, CudaPass};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const P: &omr_light::LightParams = &OMR_LIGHT_V1;

fn keys(rng: &mut StdRng, count: usize) -> (Vec<SecretKey>, Vec<ExpandedKey>) {
    let secrets: Vec<SecretKey> = (0..count)
        .map(|_| {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            SecretKey::from_seed(P, seed)
        })
        .collect();
    let expanded = secrets.iter().map(|s| s.detection_key().expand()).collect();
    (secrets, expanded)
}

/// `count` clues, each to one of `to` at random.
fn clues(rng: &mut StdRng, to: &[SecretKey], count: usize) -> Vec<Clue> {
    let addresses: Vec<_> = to.iter().map(SecretKey::address).collect();
    (0..count)
        .map(|_| addresses[rng.gen_range(0..addresses.len())].clue_with(rng))
        .collect()
}

/// `count` keys and a batch of `clues` clues to them, from `seed`.
fn keys_and_batch(seed: u64, count: usize, clue_count: usize) -> (Vec<ExpandedKey>, Batch) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (secrets, expanded) = keys(&mut rng, count);
    let clues = clues(&mut rng, &secrets, clue_count);
    let batch = Batch::prepare(P, &clues.iter().collect::<Vec<_>>());
    (expanded, batch)
}

/// The device, or why there is none (printed, so a run without a GPU says what it skipped).
fn device(budget: u64, test: &str) -> Option<CudaPass> {
    match CudaPass::open(0, budget) {
        Ok(pass) => {
            let i = pass.info();
            eprintln!(
                "{test}: on {} (compute {:?}, inverse on the card: {})",
                i.name, i.compute_capability, i.inverse_on_device
            );
            assert!(
                i.inverse_on_device,
                "tfhe-ntt's order is the one the card inverts"
            );
            Some(pass)
        }
        Err(e) => {
            eprintln!("{test}: SKIPPED, no usable GPU: {e}");
            None
        }
    }
}

/// Sums as pass.cu computes them, on the host from the same buffers: what the GPU must
/// return. Checked here against the CPU pass through `Batch::finish_products`, so the layout
/// the kernel assumes is tested on every machine.
fn reference_sums(batch: &Batch, key: &ExpandedKey) -> Vec<u64> {
    let (n, d) = (P.n, P.batch);
    let w = ExpandedKey::LANES;
    let (plain, words) = (batch.plaintexts(), key.blocks());
    let mut out = vec![0u64; 2 * d];
    for x in 0..d {
        let (b, lane) = (x / w, x % w);
        let e = |row: usize| plain[b * (n + 1) * w + row * w + lane] as u128;
        let (mut s0, mut s1) = (0u128, 0u128);
        for j in 0..n {
            let c = words[b * n * w + j * w + lane] as u128;
            s0 = (s0 + e(j + 1) * c % P.q as u128) % P.q as u128;
            s1 = (s1 + e(j) * c % P.q as u128) % P.q as u128;
        }
        out[x] = s0 as u64;
        out[d + x] = s1 as u64;
    }
    out
}

#[test]
fn the_kernels_layout_gives_the_cpu_pass() {
    let mut rng = StdRng::seed_from_u64(1);
    let (secrets, expanded) = keys(&mut rng, 2);
    let clues = clues(&mut rng, &secrets, 300);
    let batch = Batch::prepare(P, &clues.iter().collect::<Vec<_>>());
    for key in &expanded {
        let mut sums = reference_sums(&batch, key);
        let want = batch.detect(key);
        // What the card does next (its inverse NTTs, mirrored on the host), then the host's
        // part; and the host's own transforms, the fallback.
        let mirrored = omr_light_cuda::host_mirror(&batch, &sums);
        assert_eq!(
            mirrored.as_ref(),
            Some(&want),
            "the card's inverse, mirrored"
        );
        assert_eq!(batch.finish_products(&mut sums), want);
    }
}

#[test]
fn the_gpu_pass_equals_the_cpu_pass_on_full_and_partial_batches() {
    let Some(gpu) = device(1 << 34, "full_and_partial") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(2);
    // An odd number of keys: the kernel's last thread serves one key, not two.
    let (secrets, expanded) = keys(&mut rng, 5);
    let refs: Vec<&ExpandedKey> = expanded.iter().collect();
    for count in [P.batch, 1, 777] {
        let clues = clues(&mut rng, &secrets, count);
        let batch = Batch::prepare(P, &clues.iter().collect::<Vec<_>>());
        let want = batch.detect_many(&refs);
        assert_eq!(gpu.detect_many(&batch, &refs).unwrap(), want, "{count}");
        // Again with every key and the plaintexts already on the card, in another order.
        let reversed: Vec<&ExpandedKey> = refs.iter().rev().copied().collect();
        let mut again = gpu.detect_many(&batch, &reversed).unwrap();
        again.reverse();
        assert_eq!(again, want, "{count}, resident");
    }
    let stats = gpu.stats();
    assert_eq!(stats.key_uploads, 5, "keys stay resident across batches");
    assert_eq!(
        stats.batch_uploads, 3,
        "a batch's plaintexts are uploaded once"
    );
    assert_eq!(stats.key_passes, 30);
    assert_eq!(gpu.resident_keys(), 5);
}

#[test]
fn keys_beyond_the_budget_are_time_shared_and_still_exact() {
    let key_bytes = (P.n * P.batch * 8) as u64;
    let Some(gpu) = device(2 * key_bytes, "time_shared") else {
        return;
    };
    assert_eq!(gpu.key_capacity(key_bytes as usize), 2);
    let (expanded, batch) = keys_and_batch(3, 5, 2048);
    let refs: Vec<&ExpandedKey> = expanded.iter().collect();
    let want = batch.detect_many(&refs);
    assert_eq!(gpu.detect_many(&batch, &refs).unwrap(), want);
    assert!(gpu.resident_keys() <= 2, "{} resident", gpu.resident_keys());
    // One key at a time, each after the others: still exact, never more than the budget.
    for (key, want) in refs.iter().zip(&want) {
        assert_eq!(&gpu.detect_many(&batch, &[*key]).unwrap()[0], want);
        assert!(gpu.resident_keys() <= 2);
    }
    assert!(gpu.stats().key_uploads >= 8, "{:?}", gpu.stats());
}

#[test]
fn a_missing_device_is_a_clear_error() {
    // On a machine with a GPU this asks for one it does not have; without, the first thing
    // missing is named. Either way an error, never a panic.
    let err = CudaPass::open(1 << 20, 1 << 30).expect_err("no machine has 2^20 GPUs");
    let text = err.to_string();
    match err {
        CudaError::NoDriver => assert!(text.contains("libcuda.so"), "{text}"),
        CudaError::NoNvrtc => assert!(text.contains("LD_LIBRARY_PATH"), "{text}"),
        CudaError::NoDevice { ordinal, .. } => assert_eq!(ordinal, 1 << 20),
        other => panic!("unexpected: {other}"),
    }
}

#[test]
fn every_keys_per_thread_gives_the_cpu_pass() {
    // The kernel compiled for other numbers of keys per thread (the choice is measured with
    // examples/keys_per_thread.rs): 5 keys leave the last thread 1, 2 or 1 of its keys.
    if device(1 << 34, "keys_per_thread").is_none() {
        return;
    }
    let (expanded, batch) = keys_and_batch(4, 5, 1500);
    let refs: Vec<&ExpandedKey> = expanded.iter().collect();
    let want = batch.detect_many(&refs);
    for keys_per_thread in [1, 3, 4] {
        let gpu = CudaPass::open_tuned(0, 1 << 34, keys_per_thread).unwrap();
        let got = gpu.detect_many(&batch, &refs).unwrap();
        assert_eq!(got, want, "{keys_per_thread} keys per thread");
    }
}
