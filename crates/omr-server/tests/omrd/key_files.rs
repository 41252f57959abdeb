//! Expanded-key files: a worker that loads a key again reads its file instead of the store and
//! detects exactly as before; a corrupted file is deleted and replaced from the store, never
//! trusted; an omr-light-v1 key's file is written when the key is evicted, not when it is first
//! loaded, and its reload reads it; and the `omrd` binary pins its FFT plans, so the files stay
//! valid across a restart of the process.

use std::path::{Path, PathBuf};

use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::DeleteDetectionKeyRequest;
use omr_server::worker::key_files::{read_file, KEY_FILES_DIR};
use omr_test_support::{
    insecure_keys, light_message, quick_detection, quick_light, test_each_backend, wait_until,
    with_token, Omrd, RawClient, Recipient, TestDb, TestServer,
};

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The value of the sample `name` (with its labels, as `/metrics` prints them), 0 if absent.
fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// (loads from disk, loads from the store, files discarded) as this process's `/metrics` counts
/// them.
async fn loads(api: &RawClient) -> (f64, f64, f64) {
    let m = api.metrics().await;
    (
        sample(&m, r#"omr_key_load_seconds_count{source="disk"}"#),
        sample(&m, r#"omr_key_load_seconds_count{source="store"}"#),
        sample(&m, r#"omr_key_file_events_total{event="discarded"}"#),
    )
}

fn key_file(data_dir: &Path, r: &Recipient) -> PathBuf {
    data_dir
        .join(KEY_FILES_DIR)
        .join(format!("{}.key", r.key_id))
}

/// Post one message to `r` and one to someone else; wait until `r`'s digest holds exactly
/// `want` plus the new one.
async fn post_and_check(api: &RawClient, r: &Recipient, want: &mut Vec<(u64, Vec<u8>)>) {
    let payload = format!("message {}", want.len()).into_bytes();
    let i = api.post(&r.keys.clue_key, &payload).await;
    api.post(&insecure_keys(4).clue_key, b"noise").await;
    want.push((i, payload));
    let digest = api.caught_up_digest(r, None).await;
    assert_eq!(&digest.messages, want);
}

/// Wait until this process has written `r`'s file (and so no write is in flight).
async fn wait_written(api: &RawClient, times: f64) {
    wait_until(TIMEOUT, "the expanded key file is written", || async {
        sample(
            &api.metrics().await,
            r#"omr_key_file_events_total{event="written"}"#,
        ) >= times
    })
    .await;
}

test_each_backend!(a_key_reloaded_from_its_file_detects_the_same_and_a_corrupt_file_is_replaced);

async fn a_key_reloaded_from_its_file_detects_the_same_and_a_corrupt_file_is_replaced(db: &TestDb) {
    let server = TestServer::start_configured(db, quick_detection).await;
    let data_dir = server.config.data_dir.clone();
    let api = server.client();
    let me = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let mut want = Vec::new();
    post_and_check(&api, &me, &mut want).await;
    wait_written(&api, 1.0).await;
    assert_eq!(loads(&api).await, (0.0, 1.0, 0.0));
    let path = key_file(&data_dir, &me);
    assert!(path.is_file(), "{} written", path.display());

    // A new worker loads the key from its file, and detects exactly as before.
    let server = server.restart().await;
    let api = server.client();
    post_and_check(&api, &me, &mut want).await;
    assert_eq!(loads(&api).await, (1.0, 0.0, 0.0));

    // A corrupted file is refused, deleted and written again from the store's key.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let server = server.restart().await;
    let api = server.client();
    post_and_check(&api, &me, &mut want).await;
    wait_written(&api, 1.0).await;
    assert_eq!(loads(&api).await, (0.0, 1.0, 1.0));
    let params = &omr_core::INSECURE_TEST;
    assert!(
        read_file(&path, params).unwrap().is_some(),
        "the new file reads back"
    );
    server.stop().await;
}

test_each_backend!(a_light_key_is_filed_when_evicted_and_reloaded_from_its_file);

async fn a_light_key_is_filed_when_evicted_and_reloaded_from_its_file(db: &TestDb) {
    // Memory for one light key: two offline keys a full batch behind take turns.
    let server = TestServer::start_configured(db, |c| {
        quick_light(c);
        c.worker_threads = 2;
        c.key_memory_bytes = 40 << 20;
        c.key_max_wait_secs = 1;
    })
    .await;
    let data_dir = server.config.data_dir.clone();
    let api = server.client();
    let (a, b) = (api.register_light().await, api.register_light().await);
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    let to = |i: u64| match i % 50 {
        0 => Some(&a),
        1 => Some(&b),
        _ => None,
    };
    let board = |range: std::ops::Range<u64>| -> Vec<serde_json::Value> {
        (range.map(|i| {
            let address = to(i).map_or(stranger.clone(), |r| r.secret.address());
            light_message(&address, format!("m{i}").as_bytes())
        }))
        .collect()
    };
    api.post_all(board(0..d)).await;
    wait_until(TIMEOUT, "both keys detected the batch", || async {
        api.metric("omr_detections_total").await >= Some(2.0 * d as f64)
    })
    .await;
    // Both came from the store; the first one's file was written when the second evicted it,
    // and no file was written at a load.
    wait_written(&api, 1.0).await;
    let (disk, store, _) = loads(&api).await;
    assert_eq!((disk, store), (0.0, 2.0));
    let file = |id: &str| data_dir.join(KEY_FILES_DIR).join(format!("{id}.key"));
    let filed: Vec<bool> = [&a, &b].map(|r| file(&r.key_id).is_file()).to_vec();
    assert_eq!(filed.iter().filter(|&&f| f).count(), 1, "{filed:?}");

    // One more message, and both recipients online: the evicted key is reloaded from its file
    // and every digest is exact.
    api.post_all(board(d..d + 2)).await;
    for r in [&a, &b] {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, d + 2));
        let want: Vec<u64> = (0..d + 2)
            .filter(|&i| to(i).is_some_and(|t| t.key_id == r.key_id))
            .collect();
        assert_eq!(got, want, "key {}", r.key_id);
    }
    let (disk, _, discarded) = loads(&api).await;
    assert!(disk >= 1.0, "no key was reloaded from its file");
    assert_eq!(discarded, 0.0);
    server.stop().await;
}

test_each_backend!(deleting_a_key_deletes_its_file);

async fn deleting_a_key_deletes_its_file(db: &TestDb) {
    let server = TestServer::start_configured(db, quick_detection).await;
    let api = server.client();
    let gone = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let mut want = Vec::new();
    post_and_check(&api, &gone, &mut want).await;
    wait_written(&api, 1.0).await;
    let path = key_file(&server.config.data_dir, &gone);
    assert!(path.is_file());
    api.detector()
        .await
        .delete_detection_key(with_token(
            DeleteDetectionKeyRequest {
                key_id: gone.key_id.clone(),
            },
            &gone.token,
        ))
        .await
        .expect("the key is deleted");
    // The next load (another key's, here after a restart) sweeps files of unregistered keys.
    let server = server.restart().await;
    let api = server.client();
    let other = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    post_and_check(&api, &other, &mut Vec::new()).await;
    wait_until(TIMEOUT, "the deleted key's file is removed", || async {
        !path.exists()
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn the_omrd_binary_reads_its_files_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        Omrd::spawn(OMRD, dir.path(), |cmd| {
            cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
                .env("OMR_DETECT_BATCH", "2")
                .env("OMR_POLL_INTERVAL_MS", "100");
        })
    };
    let mut omrd = start();
    let api = omrd.client();
    let me = api.register(insecure_keys(4), Start::StartIndex(0)).await;
    let mut want = Vec::new();
    post_and_check(&api, &me, &mut want).await;
    wait_written(&api, 1.0).await;
    assert!(omrd.terminate().success());
    assert!(dir.path().join(KEY_FILES_DIR).join("fft-plans").is_file());

    // Another process, with the plans the first one recorded: the file is valid.
    let mut omrd = start();
    let api = omrd.client();
    post_and_check(&api, &me, &mut want).await;
    assert_eq!(loads(&api).await, (1.0, 0.0, 0.0));
    assert!(omrd.terminate().success());
}
