//! Measure loading one detection key into a worker, on the embedded (SQLite) store: cold (fetch
//! from the store, decode, expand — and inside expand the mask regeneration, Fourier and prime
//! stages) and warm (the expanded-key file, once in the page cache and once after
//! `posix_fadvise(DONTNEED)` dropped it), each through `KeyFiles::load` as the worker calls it.
//! Prints JSON; medians over the runs.
//!
//! cargo run --release -p omr-server --example key_load_bench -- [runs] [param set]

use std::time::{Duration, Instant};

use omr_core::{CompressedDetectionKey, ParamSet};
use omr_server::metrics::Metrics;
use omr_server::scheme::Tfhe;
use omr_server::worker::key_files::{KeyFiles, LoadSource};
use omr_server::Config;
use omr_store::{NewKey, StartAt, Store};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The CPU's model name from /proc/cpuinfo.
fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    let params = ParamSet::by_name(&args.next().unwrap_or_else(|| "omr-v1".into()))?;
    let dir = tempfile::tempdir()?;
    let store = Store::open_embedded(dir.path()).await?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;

    let kbar = 50.min(params.max_kbar);
    let keys = omr_core::keygen(params, kbar)?;
    let key = keys.detection_key.to_bytes();
    let key_id = uuid::Uuid::new_v4().to_string();
    store
        .insert_key(&NewKey {
            key_id: key_id.clone(),
            param_set: params.name,
            kbar: kbar as u32,
            start: StartAt::Now,
            token_hash: [0; 32],
            key: &key,
            digest_key: &keys.detection_key.digest_key().to_bytes(),
            invite_hash: None,
        })
        .await?;
    drop(keys);

    // Cold, stage by stage, as KeyFiles::load does it.
    let (mut fetch, mut decode, mut masks, mut fourier, mut prime) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut memory_bytes = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let bytes = store.key_bytes(&key_id).await?.expect("stored");
        fetch.push(ms(t.elapsed()));
        let t = Instant::now();
        let cdk = CompressedDetectionKey::from_bytes(&bytes)?;
        decode.push(ms(t.elapsed()));
        drop(bytes);
        let (dk, times) = pool.install(|| cdk.expand_timed());
        memory_bytes = dk.memory_bytes();
        masks.push(ms(times.masks));
        fourier.push(ms(times.fourier));
        prime.push(ms(times.prime));
    }

    let config = Config {
        data_dir: dir.path().to_path_buf(),
        key_disk_bytes: Some(u64::MAX),
        ..Config::default()
    };
    let metrics = Metrics::new();
    let files = KeyFiles::open(&config, &metrics, Tfhe::new(params));
    let path = files.path(&key_id).expect("files enabled");
    let (mut cold, mut write) = (vec![], vec![]);
    for _ in 0..runs {
        let _ = std::fs::remove_file(&path);
        let files = KeyFiles::open(&config, &metrics, Tfhe::new(params));
        let t = Instant::now();
        let (dk, source) = files.load(&store, &pool, &key_id).await?;
        cold.push(ms(t.elapsed()));
        assert_eq!(source, LoadSource::Store);
        drop(dk);
        let t = Instant::now();
        files.flush().await;
        write.push(ms(t.elapsed()));
    }
    let file_bytes = std::fs::metadata(&path)?.len();

    let (mut cached, mut uncached) = (vec![], vec![]);
    for drop_cache in [false, true] {
        for _ in 0..runs {
            if drop_cache {
                let f = std::fs::File::open(&path)?;
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)?;
            }
            let t = Instant::now();
            let (dk, source) = files.load(&store, &pool, &key_id).await?;
            let took = ms(t.elapsed());
            assert_eq!(source, LoadSource::Disk);
            drop(dk);
            if drop_cache {
                &mut uncached
            } else {
                &mut cached
            }
            .push(took);
        }
    }

    let report = serde_json::json!({
        "param_set": params.name,
        "cpu": cpu(),
        "threads": threads,
        "runs": runs,
        "stored_key_bytes": key.len(),
        "expanded_file_bytes": file_bytes,
        "memory_bytes": memory_bytes,
        "cold_stages_ms": {
            "fetch_sqlite": median(fetch),
            "decode": median(decode),
            "expand_masks": median(masks),
            "expand_fourier": median(fourier),
            "expand_prime": median(prime),
        },
        "cold_load_ms": median(cold),
        "file_write_ms": median(write),
        "warm_load_page_cache_ms": median(cached),
        "warm_load_from_device_ms": median(uncached),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
