//! Crash safety of detection: the real `omrd` binary is killed with SIGKILL at random moments
//! while it detects, restarted on the same store, and in the end every recipient's digest decodes
//! to exactly its messages: nothing lost, nothing folded twice.

use std::path::Path;
use std::process::Command;

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_core::{keygen, Digest, KeySet, INSECURE_TEST};
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;
use rand::Rng;

mod common;
use common::Omrd;

fn start(dir: &Path, db: Option<&str>) -> Omrd {
    start_with(dir, db, &[])
}

fn start_with(dir: &Path, db: Option<&str>, env: &[(&str, &str)]) -> Omrd {
    common::spawn(dir, |cmd| {
        cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
            .env("OMR_DETECT_BATCH", "2")
            .env("OMR_EPOCH_LEN", "16")
            .env("OMR_POLL_INTERVAL_MS", "100")
            .env("OMR_LEASE_SECS", "2")
            .env("RUST_LOG", "warn");
        if let Some(db) = db {
            cmd.arg("--database-url").arg(db);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
    })
}

async fn register(o: &Omrd, keys: &KeySet) -> (String, String) {
    let msgs = omr_proto::registration_requests(
        INSECURE_TEST.name,
        keys.secret.kbar() as u32,
        Start::StartIndex(0),
        &keys.detection_key.to_bytes(),
    );
    let mut c = DetectorClient::connect(format!("http://{}", o.grpc))
        .await
        .unwrap()
        .max_encoding_message_size(8 << 20);
    let r = c
        .register_detection_key(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner();
    (r.key_id, r.access_token)
}

async fn post(o: &Omrd, to: &KeySet, payload: &[u8]) -> u64 {
    let body = serde_json::json!({"clue": B64.encode(to.clue_key.make_clue().to_bytes()), "payload": B64.encode(payload)});
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/messages", o.http))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::CREATED);
    r.json::<serde_json::Value>().await.unwrap()["index"]
        .as_u64()
        .unwrap()
}

async fn crash_rounds(db: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let recipients: Vec<KeySet> = (0..3).map(|_| keygen(&INSECURE_TEST, 4).unwrap()).collect();
    let noise = keygen(&INSECURE_TEST, 4).unwrap();
    let mut o = start(dir.path(), db.as_deref());
    let mut ids = Vec::new();
    for r in &recipients {
        ids.push(register(&o, r).await);
    }
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 3];
    let mut rng = rand::thread_rng();
    let mut n = 0u64;
    for round in 0..4 {
        for _ in 0..40 {
            let to = rng.gen_range(0..12usize);
            let payload = format!("round {round} message {n}").into_bytes();
            let keys = if to < 3 { &recipients[to] } else { &noise };
            // A recipient gets at most k̄ = 4 messages in total.
            let to = if to < 3 && want[to].len() < 4 { to } else { 99 };
            let keys = if to == 99 { &noise } else { keys };
            let idx = post(&o, keys, &payload).await;
            if to < 3 {
                want[to].push((idx, payload));
            }
            n += 1;
        }
        // Kill while the worker is detecting.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..400))).await;
        o.child.kill().unwrap();
        o.child.wait().unwrap();
        o = start(dir.path(), db.as_deref());
    }
    // Let it catch up, then every digest must be exact.
    for (r, ((key_id, token), w)) in recipients.iter().zip(ids.iter().zip(&want)) {
        wait_exact(&o, r, key_id, token, n, w).await;
    }
    o.child.kill().unwrap();
    o.child.wait().unwrap();
}

#[tokio::test]
async fn sigkill_during_detection_loses_nothing_and_folds_nothing_twice() {
    crash_rounds(None).await;
    if let Ok(admin) = std::env::var("OMR_TEST_POSTGRES_URL") {
        crash_rounds(Some(fresh_database(&admin))).await;
    }
}

fn fresh_database(admin: &str) -> String {
    let name = format!("omr_crash_{}", uuid::Uuid::new_v4().simple());
    let status = Command::new("psql")
        .arg(admin)
        .args(["-qc", &format!("CREATE DATABASE {name}")])
        .status()
        .unwrap();
    assert!(status.success());
    format!("{}/{name}", admin.rsplit_once('/').map(|(b, _)| b).unwrap())
}

fn lease_owners(db: &str) -> Vec<(String, String)> {
    let out = Command::new("psql")
        .arg(db)
        .args(["-tAc", "SELECT key_id, owner FROM worker_leases WHERE expires_ms > (extract(epoch from now()) * 1000)::bigint ORDER BY key_id"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.split_once('|')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect()
}

async fn wait_exact(
    o: &Omrd,
    r: &KeySet,
    key_id: &str,
    token: &str,
    end: u64,
    want: &[(u64, Vec<u8>)],
) {
    let started = Instant::now();
    loop {
        let resp = reqwest::Client::new()
            .get(format!("http://{}/v1/digests/{key_id}", o.http))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let got_end: u64 = resp.headers()["omr-range-end"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        if got_end == end {
            let d = Digest::from_bytes(&resp.bytes().await.unwrap()).unwrap();
            let got: Vec<(u64, Vec<u8>)> = r
                .secret
                .decode(&d)
                .unwrap()
                .into_iter()
                .map(|m| (m.index, m.payload))
                .collect();
            assert_eq!(got, want);
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "key {key_id} stuck at {got_end} of {end}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two processes on one PostgreSQL split the keys; when one dies, a replacement takes its keys
/// over after the lease expires and resumes from the committed cursors.
#[tokio::test]
async fn workers_split_keys_and_a_dead_workers_keys_are_taken_over() {
    let Ok(admin) = std::env::var("OMR_TEST_POSTGRES_URL") else {
        eprintln!("OMR_TEST_POSTGRES_URL not set: scale-out needs PostgreSQL; skipped");
        return;
    };
    let db = fresh_database(&admin);
    let env = [("OMR_MAX_CACHED_KEYS", "2"), ("OMR_LEASE_SECS", "2")];
    let (da, db_dir, dc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut a = start_with(
        da.path(),
        Some(&db),
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-a")],
    );
    let recipients: Vec<KeySet> = (0..4).map(|_| keygen(&INSECURE_TEST, 4).unwrap()).collect();
    let mut ids = Vec::new();
    for r in &recipients {
        ids.push(register(&a, r).await);
    }
    let mut b = start_with(
        db_dir.path(),
        Some(&db),
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-b")],
    );
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 4];
    let mut n = 0;
    for i in 0..8u64 {
        let payload = format!("m{i}").into_bytes();
        let to = (i % 4) as usize;
        post(&a, &recipients[to], &payload).await;
        want[to].push((i, payload));
        n += 1;
    }
    for (k, r) in recipients.iter().enumerate() {
        wait_exact(&b, r, &ids[k].0, &ids[k].1, n, &want[k]).await;
    }
    let owners = lease_owners(&db);
    let a_keys = owners.iter().filter(|(_, o)| o == "worker-a").count();
    let b_keys = owners.iter().filter(|(_, o)| o == "worker-b").count();
    assert_eq!((a_keys, b_keys), (2, 2), "keys not split: {owners:?}");

    // Worker A dies; a replacement C takes its keys once the leases expire.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let mut c = start_with(
        dc.path(),
        Some(&db),
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-c")],
    );
    for i in 8..16u64 {
        let payload = format!("m{i}").into_bytes();
        let to = (i % 4) as usize;
        post(&c, &recipients[to], &payload).await;
        want[to].push((i, payload));
        n += 1;
    }
    for (k, r) in recipients.iter().enumerate() {
        wait_exact(&b, r, &ids[k].0, &ids[k].1, n, &want[k]).await;
    }
    let owners = lease_owners(&db);
    assert!(owners.iter().all(|(_, o)| o != "worker-a"), "{owners:?}");
    assert_eq!(
        owners.iter().filter(|(_, o)| o == "worker-c").count(),
        2,
        "{owners:?}"
    );
    for p in [&mut b, &mut c] {
        p.child.kill().unwrap();
        p.child.wait().unwrap();
    }
}
