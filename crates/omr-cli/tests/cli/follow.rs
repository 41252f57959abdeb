//! `omr digest --follow` against a real omrd on each store: it prints what is there, then stays
//! and prints each message posted afterwards as soon as the server detects it, once each (as
//! text, and as one JSON line per message with --json), until it is stopped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{keygen, omr_json, register, s};
use omr_test_support::{quick_detection, test_each_backend, TestDb, TestServer};
use serde_json::Value;

test_each_backend!(digest_follow_prints_each_new_message_once_as_it_is_detected);

/// Long enough for the insecure set's detection on a small, busy machine.
const DETECTED: Duration = Duration::from_secs(60);

/// `omr digest --follow` running, its stdout read line by line on a thread; killed on drop.
pub(crate) struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub(crate) seen: Vec<String>,
}

impl Follower {
    pub(crate) fn start(keys: &Path, extra: &[&str]) -> Follower {
        let mut child = Command::new(env!("CARGO_BIN_EXE_omr"))
            .args(["digest", "--keys", s(keys), "--follow"])
            .args(extra)
            .env_remove("OMR_HTTP_URL")
            .env_remove("OMR_GRPC_URL")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("omr runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follower {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Read lines until one contains `text`; panic if none does within [`DETECTED`].
    pub(crate) fn wait_for_line(&mut self, text: &str) {
        let deadline = Instant::now() + DETECTED;
        while !self.seen.iter().any(|l| l.contains(text)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(e) => panic!(
                    "omr digest --follow printed no line with {text:?} within {DETECTED:?} \
                     ({e}); it printed {:?}",
                    self.seen
                ),
            }
        }
        assert_eq!(
            self.child.try_wait().expect("child status"),
            None,
            "omr digest --follow exited"
        );
    }

    /// Lines printed so far that contain `text`.
    pub(crate) fn count(&self, text: &str) -> usize {
        self.seen.iter().filter(|l| l.contains(text)).count()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn digest_follow_prints_each_new_message_once_as_it_is_detected(db: &TestDb) {
    let server = TestServer::start_configured(db, quick_detection).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    tokio::task::spawn_blocking(move || {
        let alice = tmp.path().join("alice");
        keygen(&alice, "4");
        register(&alice, &http, &grpc);
        let address = alice.join("address");
        let send = |text: &str| -> u64 {
            let sent = omr_json(&[
                "send",
                "--to",
                s(&address),
                "--message",
                text,
                "--http",
                &http,
                "--json",
            ]);
            sent["index"].as_u64().expect("an index")
        };
        send("before");

        // Text: what is there (or, if not detected yet, soon after), then each new message.
        let mut follower = Follower::start(&alice, &[]);
        follower.wait_for_line("\"before\"");
        let first = send("first, live");
        follower.wait_for_line("\"first, live\"");
        assert_eq!(
            follower.count(&format!("#{first} ")),
            1,
            "{:?}",
            follower.seen
        );
        send("second, live");
        follower.wait_for_line("\"second, live\"");
        for text in ["before", "first, live", "second, live"] {
            assert_eq!(
                follower.count(&format!("\"{text}\"")),
                1,
                "{:?}",
                follower.seen
            );
        }
        drop(follower);

        // JSON: the first object as `omr digest --json` prints it (nothing new: the text
        // follower saved its state), then one object per new message.
        let mut follower = Follower::start(&alice, &["--json"]);
        follower.wait_for_line("\"messages\"");
        let index = send("as json");
        follower.wait_for_line("\"as json\"");
        let objects: Vec<Value> = follower
            .seen
            .iter()
            .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
            .collect();
        assert_eq!(objects[0]["messages"], serde_json::json!([]), "{objects:?}");
        let last = objects.last().unwrap();
        assert_eq!(
            (last["index"].as_u64(), last["text"].as_str()),
            (Some(index), Some("as json"))
        );
        assert_eq!(follower.count("\"as json\""), 1);
    })
    .await
    .unwrap();
    server.stop().await;
}
