//! Crash safety of detection: the real `omrd` binary is killed with SIGKILL at random moments
//! (from a printed seed, `OMR_TEST_SEED` replays it) while it detects, restarted on the same
//! store, and in the end every recipient's digest decodes to exactly its messages: nothing
//! lost, nothing folded twice. The same for omr-light-v1, whose batches are detected whole and
//! whose open batch is detected again as it grows, and for turns that serve several keys at
//! once. (`fleet.rs` runs several processes on one PostgreSQL with the helpers here.)

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omr_client::{Client, ClientOptions, ClueKey, DigestState, Keys, Registration, StartAt};

use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_proto::v1::registration_header::Start;
use omr_store::Backend;
use omr_test_support::{
    insecure_keys, light_messages_to, seeded_rng, test_each_backend, wait_until, Omrd, RawClient,
    Recipient, TestDb,
};
use rand::Rng;

const OMRD: &str = env!("CARGO_BIN_EXE_omrd");

/// omrd with its data in `dir`, on `db`'s store (SQLite: `dir` is its data directory),
/// detecting in small batches and polling often; `env` adds variables.
pub(crate) fn start(dir: &Path, db: &TestDb, env: &[(&str, &str)]) -> Omrd {
    start_set(
        dir,
        db,
        &["--param-set", "insecure-test", "--allow-insecure-params"],
        env,
    )
}

/// [`start`] with the parameter-set arguments `set` (omr-light-v1: its default epoch).
fn start_set(dir: &Path, db: &TestDb, set: &[&str], env: &[(&str, &str)]) -> Omrd {
    let epoch_len = if set.contains(&"omr-light-v1") {
        "4096"
    } else {
        "16"
    };
    Omrd::spawn(OMRD, dir, |cmd| {
        cmd.args(set)
            .env("OMR_DETECT_BATCH", "2")
            .env("OMR_EPOCH_LEN", epoch_len)
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
pub(crate) fn data_dir(db: &TestDb) -> (std::path::PathBuf, Option<tempfile::TempDir>) {
    match db.data_dir() {
        Some(dir) => (dir.to_path_buf(), None),
        None => {
            let dir = tempfile::tempdir().unwrap();
            (dir.path().to_path_buf(), Some(dir))
        }
    }
}

/// Wait until `r`'s digest covers the board up to `end`, and require exactly `want` in it.
pub(crate) async fn assert_exact(
    api: &RawClient,
    r: &Recipient,
    end: u64,
    want: &[(u64, Vec<u8>)],
) {
    let digest = api.caught_up_digest(r, None).await;
    assert_eq!(digest.end, end, "key {}", r.key_id);
    assert_eq!(digest.messages, want, "key {}", r.key_id);
}

test_each_backend!(
    sigkill_during_detection_loses_nothing_and_folds_nothing_twice,
    sigkill_during_light_detection_loses_nothing,
    sigkill_while_light_recipients_are_online_loses_nothing,
);

async fn sigkill_during_detection_loses_nothing_and_folds_nothing_twice(db: &TestDb) {
    let mut rng = seeded_rng(match db.backend() {
        Backend::Sqlite => "sigkill_during_detection_loses_nothing_and_folds_nothing_twice_sqlite",
        Backend::Postgres => {
            "sigkill_during_detection_loses_nothing_and_folds_nothing_twice_postgres"
        }
    });
    let (dir, _tmp) = data_dir(db);
    let noise = insecure_keys(4);
    // Six threads and batches of two: keys a few messages behind are served together, so
    // some kills fall inside a turn of several keys.
    let threads = [("OMR_WORKER_THREADS", "6")];
    let mut o = start(&dir, db, &threads);
    let mut group_turns = 0.0;
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
        // A first message has every key loaded (one turn each); then each of the round's
        // messages puts all three, in memory, behind together.
        api.post(&noise.clue_key, b"warm-up").await;
        n += 1;
        wait_until(Duration::from_secs(60), "every key is loaded", || async {
            api.metric("omr_keys_loaded").await == Some(3.0)
        })
        .await;
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
        group_turns += api
            .metric("omr_detect_group_turns_total")
            .await
            .unwrap_or(0.0);
        o.kill();
        o = start(&dir, db, &threads);
    }
    // Let it catch up, then every digest must be exact.
    let api = o.client();
    for (r, w) in recipients.iter().zip(&want) {
        assert_exact(&api, r, n, w).await;
    }
    group_turns += api
        .metric("omr_detect_group_turns_total")
        .await
        .unwrap_or(0.0);
    assert!(group_turns >= 1.0, "no turn served several keys");
    o.kill();
}

async fn sigkill_during_light_detection_loses_nothing(db: &TestDb) {
    let mut rng = seeded_rng(match db.backend() {
        Backend::Sqlite => "sigkill_during_light_detection_loses_nothing_sqlite",
        Backend::Postgres => "sigkill_during_light_detection_loses_nothing_postgres",
    });
    let (dir, _tmp) = data_dir(db);
    let light = ["--param-set", "omr-light-v1"];
    // The open batch detected up to the head when asked (the digests below wait for it).
    let env = [("OMR_LIGHT_REFRESH_MESSAGES", "1")];
    let mut o = start_set(&dir, db, &light, &env);
    let mut recipients = Vec::new();
    for _ in 0..3 {
        recipients.push(o.client().register_light().await);
    }
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    let mut want: Vec<Vec<u64>> = vec![Vec::new(); 3];
    let mut n = 0u64;
    // Two full batches and part of a third, the recipients offline: each round's kill falls
    // while a batch is detected (or just after).
    for round in 0..3u64 {
        let count = if round < 2 { d } else { 100 };
        let indices = n..n + count;
        let messages = light_messages_to(&mut rng, &recipients, &stranger, indices, 200, &mut want);
        n += count;
        o.client().post_all(messages).await;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..600))).await;
        o.kill();
        o = start_set(&dir, db, &light, &env);
    }
    // The recipients come online: the open batch is detected too, and every digest is exact.
    let api = o.client();
    for (r, w) in recipients.iter().zip(&want) {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, n), "key {}", r.key_id);
        assert_eq!(&got, w, "key {}", r.key_id);
    }
    o.kill();
}

/// An SDK client of `o` that asks the server (no tail read: digests and fetch rounds) and does
/// not retry, so that a call to a killed omrd fails at once.
fn asking_client(o: &Omrd) -> Client {
    let api = o.client();
    let options = ClientOptions {
        tail_messages: 0,
        retries: 0,
        ..ClientOptions::default()
    };
    Client::with_options(&api.url(""), api.grpc_url(), options).expect("a client")
}

/// One recipient online until `stop`: `retrieve` again and again (each call polls the digest,
/// so the worker keeps refreshing the key's open batch, and fetches from the open epoch's
/// snapshot, which omrd rebuilds as the board grows). A failed call (omrd killed under it)
/// leaves `state` as it was. Returns the state and the messages retrieved, in order.
async fn online(
    client: Client,
    keys: Keys,
    reg: Registration,
    mut state: DigestState,
    stop: Arc<AtomicBool>,
) -> (DigestState, Vec<(u64, Vec<u8>)>) {
    let mut got = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(r) = client.retrieve(&keys.secret, &reg, &mut state, None).await {
            got.extend(r.messages.into_iter().map(|m| (m.index, m.payload)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (state, got)
}

async fn sigkill_while_light_recipients_are_online_loses_nothing(db: &TestDb) {
    let mut rng = seeded_rng(match db.backend() {
        Backend::Sqlite => "sigkill_while_light_recipients_are_online_loses_nothing_sqlite",
        Backend::Postgres => "sigkill_while_light_recipients_are_online_loses_nothing_postgres",
    });
    let (dir, _tmp) = data_dir(db);
    let light = ["--param-set", "omr-light-v1"];
    // Refreshes every 4 messages: each round's 8 cross two marks, and the kill may come during
    // a refresh of the three keys to one.
    let env = [
        ("OMR_LIGHT_FETCH_OPEN_REBUILD_MS", "50"),
        ("OMR_LIGHT_REFRESH_MESSAGES", "4"),
    ];
    let mut o = start_set(&dir, db, &light, &env);
    let keys: Vec<Keys> = (0..3)
        .map(|_| Keys::generate(OMR_LIGHT_V1.name, 1).expect("keys"))
        .collect();
    let stranger = Keys::generate(OMR_LIGHT_V1.name, 1).expect("keys");
    let mut regs = Vec::new();
    for k in &keys {
        let reg = asking_client(&o)
            .register(&k.detection_key, StartAt::Index(0), None)
            .await;
        regs.push(reg.expect("registered"));
    }
    let mut states: Vec<DigestState> = regs.iter().map(DigestState::new).collect();
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 3];
    let mut got: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 3];
    for round in 0..4 {
        // A few messages (one recipient may get none in a round), then every recipient online
        // and a kill at a random moment of their refreshes, rounds and the rebuilds.
        let batch: Vec<(usize, ClueKey, Vec<u8>)> = (0..8)
            .map(|i| {
                let to = rng.gen_range(0..4usize);
                let key = keys.get(to).unwrap_or(&stranger).clue_key.clone();
                (to, key, format!("round {round} message {i}").into_bytes())
            })
            .collect();
        let posts: Vec<(ClueKey, Vec<u8>)> = (batch.iter())
            .map(|(_, k, p)| (k.clone(), p.clone()))
            .collect();
        let range = (asking_client(&o).send_batch(&posts).await).expect("posted");
        for (index, (to, _, payload)) in range.zip(batch) {
            if let Some(w) = want.get_mut(to) {
                w.push((index, payload));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..3)
            .map(|i| {
                let (k, r, s) = (keys[i].clone(), regs[i].clone(), states[i].clone());
                tokio::spawn(online(asking_client(&o), k, r, s, stop.clone()))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..2500))).await;
        o.kill();
        stop.store(true, Ordering::Relaxed);
        for (i, t) in tasks.into_iter().enumerate() {
            let (state, messages) = t.await.expect("the recipient's task");
            states[i] = state;
            got[i].extend(messages);
        }
        o = start_set(&dir, db, &light, &env);
    }
    // Online once more until every payload is in: each exactly once, in order.
    let client = asking_client(&o);
    for i in 0..3 {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while got[i].len() < want[i].len() {
            assert!(
                std::time::Instant::now() < deadline,
                "recipient {i}: {:?}",
                got[i]
            );
            let r = client.retrieve(&keys[i].secret, &regs[i], &mut states[i], None);
            if let Ok(r) = r.await {
                got[i].extend(r.messages.into_iter().map(|m| (m.index, m.payload)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(got[i], want[i], "recipient {i}");
        assert!(states[i].pending_payloads.is_empty(), "recipient {i}");
    }
    o.kill();
}
