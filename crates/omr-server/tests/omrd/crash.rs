//! Crash safety of detection: the real `omrd` binary is killed with SIGKILL at random moments
//! (from a printed seed, `OMR_TEST_SEED` replays it) while it detects, restarted on the same
//! store, and in the end every recipient's digest decodes to exactly its messages: nothing
//! lost, nothing folded twice. And two processes on one PostgreSQL split the keys; a dead one's
//! keys are taken over.

use std::path::Path;
use std::time::Duration;

use omr_proto::v1::registration_header::Start;
use omr_store::Backend;
use omr_test_support::{
    insecure_keys, seeded_rng, test_each_backend, Omrd, RawClient, Recipient, TestDb,
};
use rand::Rng;
use sqlx::{Connection, PgConnection, Row};

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

/// omrd with its data in `dir`, on `db`'s store (SQLite: `dir` is its data directory),
/// detecting in small batches and polling often; `env` adds variables.
fn start(dir: &Path, db: &TestDb, env: &[(&str, &str)]) -> Omrd {
    Omrd::spawn(OMRD, dir, |cmd| {
        cmd.args(["--param-set", "insecure-test", "--allow-insecure-params"])
            .env("OMR_DETECT_BATCH", "2")
            .env("OMR_EPOCH_LEN", "16")
            .env("OMR_POLL_INTERVAL_MS", "100")
            .env("OMR_LEASE_SECS", "2")
            .env("RUST_LOG", "warn");
        if db.data_dir().is_none() {
            cmd.arg("--database-url").arg(db.url());
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
    })
}

/// Where omrd keeps its files on `db`: SQLite's data directory, or a new temporary one.
fn data_dir(db: &TestDb) -> (std::path::PathBuf, Option<tempfile::TempDir>) {
    match db.data_dir() {
        Some(dir) => (dir.to_path_buf(), None),
        None => {
            let dir = tempfile::tempdir().unwrap();
            (dir.path().to_path_buf(), Some(dir))
        }
    }
}

/// Wait until `r`'s digest covers the board up to `end`, and require exactly `want` in it.
async fn assert_exact(api: &RawClient, r: &Recipient, end: u64, want: &[(u64, Vec<u8>)]) {
    let digest = api.caught_up_digest(r, None).await;
    assert_eq!(digest.end, end, "key {}", r.key_id);
    assert_eq!(digest.messages, want, "key {}", r.key_id);
}

test_each_backend!(sigkill_during_detection_loses_nothing_and_folds_nothing_twice);

async fn sigkill_during_detection_loses_nothing_and_folds_nothing_twice(db: &TestDb) {
    let mut rng = seeded_rng(match db.backend() {
        Backend::Sqlite => "sigkill_during_detection_loses_nothing_and_folds_nothing_twice_sqlite",
        Backend::Postgres => {
            "sigkill_during_detection_loses_nothing_and_folds_nothing_twice_postgres"
        }
    });
    let (dir, _tmp) = data_dir(db);
    let noise = insecure_keys(4);
    let mut o = start(&dir, db, &[]);
    let mut recipients = Vec::new();
    for _ in 0..3 {
        recipients.push(
            o.client()
                .register(insecure_keys(4), Start::StartIndex(0))
                .await,
        );
    }
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 3];
    let mut n = 0u64;
    for round in 0..4 {
        let api = o.client();
        for _ in 0..40 {
            let to = rng.gen_range(0..12usize);
            let payload = format!("round {round} message {n}").into_bytes();
            // A recipient gets at most k̄ = 4 messages in total.
            let to = (to < 3 && want[to].len() < 4).then_some(to);
            let keys = to.map_or(&noise, |t| &recipients[t].keys);
            let idx = api.post(&keys.clue_key, &payload).await;
            if let Some(t) = to {
                want[t].push((idx, payload));
            }
            n += 1;
        }
        // Kill while the worker is detecting.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..400))).await;
        o.kill();
        o = start(&dir, db, &[]);
    }
    // Let it catch up, then every digest must be exact.
    let api = o.client();
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&api, r, n, w).await;
    }
    o.kill();
}

/// Post messages `indices` (the next board indices) round-robin to `recipients`, recording in
/// `want` what each should retrieve.
async fn post_round_robin(
    api: &RawClient,
    recipients: &[Recipient],
    indices: std::ops::Range<u64>,
    want: &mut [Vec<(u64, Vec<u8>)>],
) {
    for i in indices {
        let payload = format!("m{i}").into_bytes();
        let to = (i % recipients.len() as u64) as usize;
        let index = api.post(&recipients[to].keys.clue_key, &payload).await;
        assert_eq!(index, i, "the board is this test's alone");
        want[to].push((i, payload));
    }
}

/// (key, owner) of every live lease.
async fn lease_owners(db: &TestDb) -> Vec<(String, String)> {
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    let rows = sqlx::query(
        "SELECT key_id, owner FROM worker_leases \
         WHERE expires_ms > (extract(epoch from now()) * 1000)::bigint ORDER BY key_id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    rows.iter()
        .map(|row| (row.get("key_id"), row.get("owner")))
        .collect()
}

/// Two processes on one PostgreSQL split the keys; when one dies, a replacement takes its keys
/// over after the lease expires and resumes from the committed cursors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_split_keys_and_a_dead_workers_keys_are_taken_over() {
    // Scale-out needs PostgreSQL: without it, a SKIPPED line and nothing else.
    let Some(db) =
        TestDb::postgres("workers_split_keys_and_a_dead_workers_keys_are_taken_over").await
    else {
        return;
    };
    let env = [("OMR_MAX_CACHED_KEYS", "2"), ("OMR_LEASE_SECS", "2")];
    let (da, db_dir, dc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut a = start(
        da.path(),
        &db,
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-a")],
    );
    let mut recipients = Vec::new();
    for _ in 0..4 {
        recipients.push(
            a.client()
                .register(insecure_keys(4), Start::StartIndex(0))
                .await,
        );
    }
    let mut b = start(
        db_dir.path(),
        &db,
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-b")],
    );
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 4];
    post_round_robin(&a.client(), &recipients, 0..8, &mut want).await;
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&b.client(), r, 8, w).await;
    }
    let owners = lease_owners(&db).await;
    let a_keys = owners.iter().filter(|(_, o)| o == "worker-a").count();
    let b_keys = owners.iter().filter(|(_, o)| o == "worker-b").count();
    assert_eq!((a_keys, b_keys), (2, 2), "keys not split: {owners:?}");

    // Worker A dies; a replacement C takes its keys once the leases expire.
    a.kill();
    let mut c = start(
        dc.path(),
        &db,
        &[env[0], env[1], ("OMR_WORKER_ID", "worker-c")],
    );
    post_round_robin(&c.client(), &recipients, 8..16, &mut want).await;
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&b.client(), r, 16, w).await;
    }
    let owners = lease_owners(&db).await;
    assert!(owners.iter().all(|(_, o)| o != "worker-a"), "{owners:?}");
    assert_eq!(
        owners.iter().filter(|(_, o)| o == "worker-c").count(),
        2,
        "{owners:?}"
    );
    b.kill();
    c.kill();
    db.cleanup().await;
}
