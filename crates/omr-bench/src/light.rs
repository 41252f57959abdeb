//! `omr bench --param-set omr-light-v1`: the linear scheme's figures, as the service will run it
//! (one shared preparation per batch, then every key's pass over it, keys taken a group at a
//! time so that a block of the shared plaintexts is read once per group), checked for exactness.

use std::time::Instant;

use rayon::prelude::*;

use omr_light::{Batch, Digest, DigestPart, ExpandedKey, LightParams, SecretKey};

/// What to measure.
#[derive(Debug, Clone, Copy)]
pub struct LightOptions {
    pub params: &'static LightParams,
    /// Threads detecting in parallel (each takes a share of the keys).
    pub threads: usize,
    /// Board messages in the batch (at most D = 4096).
    pub messages: usize,
    /// Registered keys detected over the batch.
    pub keys: usize,
    /// Keys that share one pass over the batch's plaintexts.
    pub group: usize,
    /// Messages for each registered key (spread over the batch).
    pub pertinent: usize,
    /// Where the keys' passes run.
    pub device: Device,
}

/// Where a benchmark runs the keys' passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The CPU, `threads` threads.
    Cpu,
    /// CUDA device 0, every key resident (omr-light-cuda).
    Cuda,
}

impl LightOptions {
    pub fn new(params: &'static LightParams) -> Self {
        LightOptions {
            params,
            threads: 1,
            messages: params.batch,
            keys: 8,
            group: 8,
            pertinent: 16,
            device: Device::Cpu,
        }
    }
}

/// The phases [`run`] reports progress for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LightPhase {
    Keygen,
    Clues,
    Shared,
    Detect,
    Decode,
}

/// Bytes of one recipient's sync of k = 50 payloads among 2^16 messages: the digest of 16 full
/// batches and one round of the payload fetch (docs/light/STUDY.md §7.1).
pub fn sync_bytes_k50_2p16(p: &LightParams) -> u64 {
    let batches = (1 << 16) / p.batch;
    let digest = Digest::encoded_len(p, &vec![p.batch; batches]) as u64;
    digest + omr_light::pir::fetch_bytes(1 << 16)
}

/// Run the benchmark; checks that every key's digest decodes to exactly its messages.
pub fn run(
    o: &LightOptions,
    progress: &(dyn Fn(LightPhase, u64, u64) + Sync),
) -> Result<serde_json::Value, String> {
    let p = o.params;
    if o.messages == 0 || o.messages > p.batch {
        return Err(format!("--messages must be 1..={}", p.batch));
    }
    if o.keys == 0 || o.group == 0 || o.pertinent * o.keys > o.messages {
        return Err("need ≥ 1 key, a group ≥ 1 and keys × pertinent ≤ messages".into());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads.max(1))
        .build()
        .map_err(|e| e.to_string())?;

    // Keys: the first one's generation timed on one thread, the rest made on every core (512
    // keys one after another would take over a minute).
    progress(LightPhase::Keygen, 0, o.keys as u64);
    let started = Instant::now();
    let first = SecretKey::generate(p);
    let first_detection = first.detection_key();
    let keygen_ms = started.elapsed().as_secs_f64() * 1e3;
    // Encoded after the timing, from the key generated above (not a second keygen).
    let key_bytes = first_detection.to_bytes().len();
    let made = std::sync::atomic::AtomicU64::new(1);
    let (secrets, keys): (Vec<SecretKey>, Vec<ExpandedKey>) = std::iter::once(first)
        .map(|sk| (sk, first_detection.expand()))
        .chain(
            (1..o.keys)
                .into_par_iter()
                .map(|_| {
                    let sk = SecretKey::generate(p);
                    let key = sk.detection_key().expand();
                    let done = made.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    progress(LightPhase::Keygen, done, o.keys as u64);
                    (sk, key)
                })
                .collect::<Vec<_>>(),
        )
        .unzip();

    // Clues: key r owns slots r, r + keys, … (pertinent of them), strangers own the rest.
    progress(LightPhase::Clues, 0, 1);
    let stranger = SecretKey::generate(p).address();
    let addresses: Vec<_> = secrets.iter().map(SecretKey::address).collect();
    let owner = |i: usize| (i < o.pertinent * o.keys).then_some(i % o.keys);
    let clues: Vec<_> = (0..o.messages)
        .into_par_iter()
        .map(|i| match owner(i) {
            Some(r) => addresses[r].clue(),
            None => stranger.clue(),
        })
        .collect();
    let clue_bytes = clues[0].to_bytes().len();
    let refs: Vec<_> = clues.iter().collect();

    // The shared work, once (the common reference string is built by a first, untimed call).
    progress(LightPhase::Shared, 0, 1);
    drop(Batch::prepare(p, &refs[..1]));
    let started = Instant::now();
    let batch = Batch::prepare(p, &refs);
    let shared_s = started.elapsed().as_secs_f64();
    // Again, in the buffers of the batch just made: a worker that prepares batch after batch.
    let started = Instant::now();
    let batch = Batch::prepare_reusing(p, &refs, batch);
    let shared_reused_s = started.elapsed().as_secs_f64();

    progress(LightPhase::Detect, 0, o.keys as u64);
    let pairs = (o.messages * o.keys) as f64;
    let (halves, detect_core_us, single_us, gpu) = match o.device {
        Device::Cpu => {
            // Every key's pass: groups of `group` keys, the groups spread over the threads.
            let groups: Vec<&[ExpandedKey]> = keys.chunks(o.group).collect();
            let started = Instant::now();
            let halves: Vec<_> = pool.install(|| {
                groups
                    .par_iter()
                    .flat_map_iter(|g| batch.detect_many(&g.iter().collect::<Vec<_>>()))
                    .collect()
            });
            let detect_s = started.elapsed().as_secs_f64();
            // One key alone, for the price of a pass that shares nothing.
            let started = Instant::now();
            let _ = batch.detect(&keys[0]);
            let single_s = started.elapsed().as_secs_f64();
            let core_us = detect_s * o.threads.max(1) as f64 * 1e6 / pairs;
            (halves, core_us, single_s * 1e6 / o.messages as f64, None)
        }
        Device::Cuda => {
            // Wall time of the whole pass (the card's, the copy back, the host's inverse
            // NTTs on the pool): a GPU is one device, not `threads` cores.
            let run = pool.install(|| crate::cuda::run(&batch, &keys))?;
            let us = run.detect_s * 1e6 / pairs;
            let single_us = run.single_s * 1e6 / o.messages as f64;
            (run.halves, us, single_us, Some(run.report))
        }
    };

    // Digests through their encoding; decoding checked; the decode time for 2^16 messages.
    progress(LightPhase::Decode, 0, o.keys as u64);
    let mut digest_bytes = 0;
    let mut decode_s = 0.0;
    for (r, own) in halves.into_iter().enumerate() {
        let digest = Digest::new(
            p,
            vec![DigestPart {
                first: 0,
                own,
                shared: batch.shared().clone(),
            }],
        );
        let bytes = digest.to_bytes();
        digest_bytes = bytes.len();
        let started = Instant::now();
        let decoded = Digest::from_bytes(&bytes).map_err(|e| e.to_string())?;
        let found = secrets[r].pertinent(&decoded);
        decode_s += started.elapsed().as_secs_f64();
        let want: Vec<u64> = (0..o.messages)
            .filter(|&i| owner(i) == Some(r))
            .map(|i| i as u64)
            .collect();
        if found != want {
            return Err(format!(
                "key {r}: decoded {} indices, expected {}",
                found.len(),
                want.len()
            ));
        }
        progress(LightPhase::Decode, r as u64 + 1, o.keys as u64);
    }
    let decode_ms_per_batch = decode_s * 1e3 / o.keys as f64;
    let security: Vec<_> = omr_light::security::instances(p)
        .iter()
        .map(|i| {
            serde_json::json!({
                "instance": i.name,
                "bkz_bits": (i.estimate.bkz_bits() * 10.0).round() / 10.0,
                "core_svp_bits": (i.estimate.core_svp_bits() * 10.0).round() / 10.0,
            })
        })
        .collect();
    let mut report = serde_json::json!({
        "param_set": p.name,
        "device": if o.device == Device::Cuda { "cuda" } else { "cpu" },
        "threads": o.threads,
        "messages": o.messages,
        "keys": o.keys,
        "group": o.group,
        "detect_us_per_message_key": detect_core_us,
        "detect_us_per_message_key_alone": single_us,
        "shared_us_per_message": shared_s * 1e6 / o.messages as f64,
        "shared_us_per_message_reused": shared_reused_s * 1e6 / o.messages as f64,
        "detection_key_bytes": key_bytes,
        "detection_key_memory_bytes": keys[0].memory_bytes(),
        "digest_bytes_per_message": digest_bytes as f64 / o.messages as f64,
        "false_positive_log2": p.false_positive_log2(),
        "false_negative_log2": false_negative_log2(p),
        "decryption_failure_log2": p.decryption_failure_log2(),
        "clue_bytes": clue_bytes,
        "sync_bytes_k50_2p16": sync_bytes_k50_2p16(p),
        "sync_pir_bytes_k50_2p16": omr_light::pir::fetch_bytes(1 << 16),
        "pir_one_time_key_bytes": omr_light::pir::one_time_key_bytes(),
        "keygen_ms": keygen_ms,
        "decode_ms_2p16": decode_ms_per_batch * (65_536.0 / p.batch as f64),
        "security": security,
    });
    if let (Some(gpu), Some(fields)) = (gpu, report.as_object_mut()) {
        fields.extend(
            gpu.as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    Ok(report)
}

/// log2 of the chance a recipient's own message fails the range check: ℓ coefficients, each
/// beyond r with the Gaussian tail of the clue noise (the exact distribution, in
/// docs/light/noise.py, is lighter-tailed: 2^-41.8 at r = 205), plus the decryption failure.
fn false_negative_log2(p: &LightParams) -> f64 {
    let z = f64::from(p.range) / p.clue_noise_variance().sqrt();
    let per_coefficient = omr_light::params::gaussian_two_sided_tail_log2(z).exp2();
    let decrypt = p.decryption_failure_log2().exp2();
    (p.ell as f64 * (per_coefficient + decrypt)).log2()
}
