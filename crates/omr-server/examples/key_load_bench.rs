//! Measure loading one detection key into a worker, on the embedded (SQLite) store: cold (fetch
//! from the store, decode, expand — and inside a TFHE key's expand the mask regeneration,
//! Fourier and prime stages; an omr-light-v1 key decodes straight into the kernel's layout)
//! and warm (the expanded-key file, once in the page cache and once after
//! `posix_fadvise(DONTNEED)` dropped it), each through `KeyFiles::load` as the worker calls it.
//! Prints JSON; medians over the runs.
//!
//! cargo run --release -p omr-server --example key_load_bench -- [runs] [param set]

use std::time::{Duration, Instant};

use omr_core::{CompressedDetectionKey, ParamSet};
use omr_light::{ExpandedKey, SecretKey, OMR_LIGHT_V1};
use omr_server::metrics::Metrics;
use omr_server::scheme::{DetectionScheme, Light, Tfhe};
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

/// Loads through `KeyFiles` as the worker makes them: cold (from the store; the file written
/// after it, or when the key leaves memory), then warm from the file in the page cache and
/// from the device.
struct FileLoads {
    cold: Vec<f64>,
    write: Vec<f64>,
    file_bytes: u64,
    cached: Vec<f64>,
    uncached: Vec<f64>,
}

async fn file_loads<S: DetectionScheme>(
    scheme: S,
    dir: &std::path::Path,
    store: &Store,
    pool: &rayon::ThreadPool,
    key_id: &str,
    runs: usize,
) -> anyhow::Result<FileLoads> {
    let config = Config {
        data_dir: dir.to_path_buf(),
        key_disk_bytes: Some(u64::MAX),
        ..Config::default()
    };
    let metrics = Metrics::new();
    let files = KeyFiles::open(&config, &metrics, scheme.clone());
    let path = files.path(key_id).expect("files enabled");
    let (mut cold, mut write) = (vec![], vec![]);
    for _ in 0..runs {
        let _ = std::fs::remove_file(&path);
        let files = KeyFiles::open(&config, &metrics, scheme.clone());
        let t = Instant::now();
        let (dk, source) = files.load(store, pool, key_id).await?;
        cold.push(ms(t.elapsed()));
        assert_eq!(source, LoadSource::Store);
        // The file is written after the load, or (omr-light-v1) when the key is evicted.
        let t = Instant::now();
        files.evicted(key_id, dk);
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
            let (dk, source) = files.load(store, pool, key_id).await?;
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
    Ok(FileLoads {
        cold,
        write,
        file_bytes,
        cached,
        uncached,
    })
}

/// `key_id`'s stored bytes decoded by `decode`, the fetch's and the decode's milliseconds
/// pushed to `times`.
async fn fetched<T>(
    store: &Store,
    key_id: &str,
    times: [&mut Vec<f64>; 2],
    decode: impl FnOnce(&[u8]) -> Result<T, omr_core::OmrError>,
) -> anyhow::Result<T> {
    let [fetch, decoding] = times;
    let t = Instant::now();
    let bytes = store.key_bytes(key_id).await?.expect("stored");
    fetch.push(ms(t.elapsed()));
    let t = Instant::now();
    let decoded = decode(&bytes)?;
    decoding.push(ms(t.elapsed()));
    Ok(decoded)
}

/// Store `key` under a new id.
async fn insert(
    store: &Store,
    set: &'static str,
    kbar: u32,
    key: &[u8],
    digest_key: &[u8],
) -> anyhow::Result<String> {
    let key_id = uuid::Uuid::new_v4().to_string();
    store
        .insert_key(&NewKey {
            key_id: key_id.clone(),
            param_set: set,
            kbar,
            start: StartAt::Now,
            token_hash: [0; 32],
            key,
            digest_key,
            invite_hash: None,
        })
        .await?;
    Ok(key_id)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    let name = args.next().unwrap_or_else(|| "omr-v1".into());
    let dir = tempfile::tempdir()?;
    let store = Store::open_embedded(dir.path()).await?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;

    // The cold stages, the key's sizes, and the loads through `KeyFiles`.
    let (stages, stored_bytes, memory_bytes, loads) = if name == OMR_LIGHT_V1.name {
        // Cold, stage by stage: the store's read, then the decode into the kernel's layout.
        let key = SecretKey::generate(&OMR_LIGHT_V1)
            .detection_key()
            .to_bytes();
        let key_id = insert(&store, OMR_LIGHT_V1.name, 1, &key, &[]).await?;
        let (mut fetch, mut decode) = (vec![], vec![]);
        let mut memory_bytes = 0;
        for _ in 0..runs {
            let decoded = ExpandedKey::from_bytes;
            let dk = fetched(&store, &key_id, [&mut fetch, &mut decode], decoded).await?;
            memory_bytes = dk.memory_bytes();
        }
        let scheme = Light::new(&OMR_LIGHT_V1);
        let loads = file_loads(scheme, dir.path(), &store, &pool, &key_id, runs).await?;
        let stages = serde_json::json!({
            "fetch_sqlite": median(fetch),
            "decode_into_layout": median(decode),
        });
        (stages, key.len(), memory_bytes, loads)
    } else {
        let params = ParamSet::by_name(&name)?;
        let kbar = 50.min(params.max_kbar);
        let keys = omr_core::keygen(params, kbar)?;
        let key = keys.detection_key.to_bytes();
        let digest_key = keys.detection_key.digest_key().to_bytes();
        let key_id = insert(&store, params.name, kbar as u32, &key, &digest_key).await?;
        drop(keys);

        // Cold, stage by stage, as KeyFiles::load does it.
        let (mut fetch, mut decode, mut masks, mut fourier, mut prime) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut memory_bytes = 0;
        for _ in 0..runs {
            let decoded = CompressedDetectionKey::from_bytes;
            let cdk = fetched(&store, &key_id, [&mut fetch, &mut decode], decoded).await?;
            let (dk, times) = pool.install(|| cdk.expand_timed());
            memory_bytes = dk.memory_bytes();
            masks.push(ms(times.masks));
            fourier.push(ms(times.fourier));
            prime.push(ms(times.prime));
        }
        let loads = file_loads(Tfhe::new(params), dir.path(), &store, &pool, &key_id, runs).await?;
        let stages = serde_json::json!({
            "fetch_sqlite": median(fetch),
            "decode": median(decode),
            "expand_masks": median(masks),
            "expand_fourier": median(fourier),
            "expand_prime": median(prime),
        });
        (stages, key.len(), memory_bytes, loads)
    };

    let report = serde_json::json!({
        "param_set": name,
        "cpu": omr_test_support::measure::cpu_model(),
        "threads": threads,
        "runs": runs,
        "stored_key_bytes": stored_bytes,
        "expanded_file_bytes": loads.file_bytes,
        "memory_bytes": memory_bytes,
        "cold_stages_ms": stages,
        "cold_load_ms": median(loads.cold),
        "file_write_ms": median(loads.write),
        "warm_load_page_cache_ms": median(loads.cached),
        "warm_load_from_device_ms": median(loads.uncached),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
