//! A fleet of `omrd` processes on one PostgreSQL: the keys follow the live workers. A process
//! that joins takes half of 8 keys within two lease periods without anyone restarting, and the
//! split then holds; a killed process's keys move to the survivor once its lease expires; every
//! digest stays exact; both processes serve their keys in turns of several keys on their
//! pools. And a worker whose store calls keep failing is reported unready.

use std::path::Path;
use std::time::{Duration, Instant};

use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, wait_for, wait_until, Omrd, RawClient, Recipient, TestDb};
use reqwest::StatusCode;
use sqlx::{Connection, PgConnection, Row};

use crate::crash::{assert_exact, start};

/// The lease of these tests (omrd's default is 30 s).
const LEASE_SECS: u64 = 3;

/// omrd named `worker_id` with a short lease, its data in `dir`; six detection threads (keys a
/// message behind are served together) and recipients online for a second after they ask.
fn worker(dir: &Path, db: &TestDb, worker_id: &str) -> Omrd {
    let lease = LEASE_SECS.to_string();
    start(
        dir,
        db,
        &[
            ("OMR_WORKER_ID", worker_id),
            ("OMR_LEASE_SECS", &lease),
            ("OMR_WORKER_THREADS", "6"),
            ("OMR_ONLINE_SECS", "1"),
        ],
    )
}

/// A process's `name` metric (0 when it has none yet).
async fn metric(o: &Omrd, name: &str) -> f64 {
    o.client().metric(name).await.unwrap_or(0.0)
}

/// Wait until `a` and `b` together detected `more` key·messages past `from` (their
/// `omr_detections_total`), without asking for a digest (the recipients stay offline).
async fn wait_detected(a: &Omrd, b: &Omrd, from: f64, more: f64) -> f64 {
    let want = from + more;
    wait_for(Duration::from_secs(60), "both workers detect", || async {
        let n = metric(a, "omr_detections_total").await + metric(b, "omr_detections_total").await;
        (n >= want).then_some(n)
    })
    .await
}

/// Run `sql` on `db`.
async fn execute(db: &TestDb, sql: &str) {
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    sqlx::query(sql).execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
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

fn count(owners: &[(String, String)], owner: &str) -> usize {
    owners.iter().filter(|(_, o)| o == owner).count()
}

/// When `worker_id` last renewed its heartbeat (ms since the epoch).
async fn renewed_ms(db: &TestDb, worker_id: &str) -> Option<i64> {
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    let row = sqlx::query("SELECT renewed_ms FROM worker_heartbeats WHERE worker_id = $1")
        .bind(worker_id)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    row.map(|r| r.get(0))
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

/// Two processes on one PostgreSQL: B joins A's 8 keys and they split 4 + 4 within two lease
/// periods; renewals then move nothing; A is killed and B takes its keys once the lease
/// expires; every digest is exact throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_worker_takes_half_the_keys_and_a_killed_ones_keys_move() {
    // Scale-out needs PostgreSQL: without it, a SKIPPED line and nothing else.
    let Some(db) =
        TestDb::postgres("a_joining_worker_takes_half_the_keys_and_a_killed_ones_keys_move").await
    else {
        return;
    };
    let lease = Duration::from_secs(LEASE_SECS);
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = worker(dir_a.path(), &db, "worker-a");
    let api = a.client();
    let mut recipients = Vec::new();
    for _ in 0..8 {
        recipients.push(api.register(insecure_keys(4), Start::FromNow(true)).await);
    }
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 8];
    post_round_robin(&api, &recipients, 0..8, &mut want).await;
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&api, r, 8, w).await;
    }
    assert_eq!(count(&lease_owners(&db).await, "worker-a"), 8);

    // B joins: 4 + 4 within two lease periods, nobody restarted.
    let mut b = worker(dir_b.path(), &db, "worker-b");
    let joined = Instant::now();
    let split = wait_for(
        Duration::from_secs(60),
        "worker-a and worker-b hold 4 keys each",
        || async {
            let owners = lease_owners(&db).await;
            (count(&owners, "worker-a") == 4 && count(&owners, "worker-b") == 4).then_some(owners)
        },
    )
    .await;
    let took = joined.elapsed();
    println!("4 + 4 split {took:?} after worker-b started (lease {lease:?})");
    assert!(took <= 2 * lease, "split after {took:?}, lease {lease:?}");

    // Both renew a few more times (at least every third of a lease): nothing moves.
    let since = now_ms() + lease.as_millis() as i64;
    wait_until(
        Duration::from_secs(30),
        "both workers renew again",
        || async {
            for w in ["worker-a", "worker-b"] {
                match renewed_ms(&db, w).await {
                    Some(t) if t > since => {}
                    _ => return false,
                }
            }
            true
        },
    )
    .await;
    assert_eq!(lease_owners(&db).await, split, "keys moved after the split");
    // One message loads B's keys (and wakes A's, offline again by now); then each message puts
    // each process's four keys, in memory, a message behind together: both serve them in
    // turns of several keys on their pools.
    let before = metric(&a, "omr_detections_total").await;
    post_round_robin(&b.client(), &recipients, 8..9, &mut want).await;
    let detected = wait_detected(&a, &b, before, 8.0).await;
    post_round_robin(&b.client(), &recipients, 9..16, &mut want).await;
    wait_detected(&a, &b, detected, 7.0 * 8.0).await;
    for o in [&a, &b] {
        let turns = metric(o, "omr_detect_group_turns_total").await;
        assert!(turns >= 1.0, "a worker served no turn of several keys");
    }
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&api, r, 16, w).await;
    }

    // A dies: its heartbeat and leases expire and B holds all 8.
    a.kill();
    let killed = Instant::now();
    wait_until(
        Duration::from_secs(60),
        "worker-b holds every key",
        || async { count(&lease_owners(&db).await, "worker-b") == 8 },
    )
    .await;
    let took = killed.elapsed();
    println!("worker-b held all 8 keys {took:?} after worker-a was killed");
    assert!(
        took <= 2 * lease,
        "takeover after {took:?}, lease {lease:?}"
    );
    let api = b.client();
    post_round_robin(&api, &recipients, 16..24, &mut want).await;
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&api, r, 24, w).await;
    }
    b.kill();
    db.cleanup().await;
}

/// A worker whose store calls fail round after round (its heartbeat table is renamed away, while
/// the database itself answers) is unready after `lease_secs`, naming the reason, and ready
/// again once they succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_store_calls_keep_failing_is_unready_until_they_succeed() {
    let Some(db) =
        TestDb::postgres("a_worker_whose_store_calls_keep_failing_is_unready_until_they_succeed")
            .await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = worker(dir.path(), &db, "worker-a");
    let api = o.client();
    let readiness = || async {
        let resp = api.get("/readyz").await;
        (resp.status(), resp.text().await.unwrap_or_default())
    };
    wait_until(Duration::from_secs(30), "omrd is ready", || async {
        readiness().await.0 == StatusCode::OK
    })
    .await;

    execute(
        &db,
        "ALTER TABLE worker_heartbeats RENAME TO worker_heartbeats_gone",
    )
    .await;
    let body = wait_for(Duration::from_secs(30), "/readyz answers 503", || async {
        let (status, body) = readiness().await;
        (status == StatusCode::SERVICE_UNAVAILABLE).then_some(body)
    })
    .await;
    assert!(body.contains("store calls have failed"), "{body}");

    execute(
        &db,
        "ALTER TABLE worker_heartbeats_gone RENAME TO worker_heartbeats",
    )
    .await;
    wait_until(
        Duration::from_secs(30),
        "/readyz answers 200 again",
        || async { readiness().await.0 == StatusCode::OK },
    )
    .await;
    drop(o);
    db.cleanup().await;
}

/// Now, in milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
