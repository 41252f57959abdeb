//! The real `omr` binary against a real omrd (HTTP and gRPC on ephemeral ports, SQLite and —
//! when OMR_TEST_POSTGRES_URL is set — PostgreSQL).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use omr_e2e::{StoreKind, TestServer};
use serde_json::Value;

/// Run `omr` with `args`; never inherits the caller's OMR_* URLs.
fn omr(args: &[&str]) -> Output {
    omr_with_stdin(args, None)
}

fn omr_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_omr"));
    cmd.args(args)
        .env_remove("OMR_HTTP_URL")
        .env_remove("OMR_GRPC_URL")
        .env_remove("RUST_LOG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("omr runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().expect("omr finishes")
}

/// Run `omr`, require success, and parse its `--json` output.
fn omr_json(args: &[&str]) -> Value {
    let out = omr(args);
    assert!(
        out.status.success(),
        "omr {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "omr {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Run `omr`, require failure, and return its stderr.
fn omr_fails(args: &[&str]) -> String {
    let out = omr(args);
    assert!(
        !out.status.success(),
        "omr {args:?} should fail but printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn keygen(dir: &Path, kbar: &str) {
    omr_json(&[
        "keygen",
        "--out",
        dir.to_str().unwrap(),
        "--kbar",
        kbar,
        "--param-set",
        "insecure-test",
        "--allow-insecure-params",
        "--json",
    ]);
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Poll `omr status` until the key has detected the whole board.
fn wait_detected(keys: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = omr_json(&["status", "--keys", s(keys), "--json"]);
        if st["lag"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "detection stalled: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn payloads(digest: &Value) -> Vec<(u64, String)> {
    digest["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["index"].as_u64().unwrap(),
                m["text"].as_str().unwrap_or("<binary>").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keygen_register_send_digest_for_two_recipients() {
    for kind in StoreKind::all().await {
        let server = TestServer::start(&kind).await;
        let (http, grpc) = (server.url(""), server.grpc_url());
        let tmp = tempfile::tempdir().unwrap();
        let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
        let kinds = kind.name();
        tokio::task::spawn_blocking(move || {
            keygen(&alice, "4");
            keygen(&bob, "4");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = |p: std::path::PathBuf| {
                    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
                };
                assert_eq!(mode(alice.join("secret.key")), 0o600);
            }

            // Registration: the token goes to registration.json (0600), never to the terminal.
            let mut regs = Vec::new();
            for dir in [&alice, &bob] {
                let out = omr(&[
                    "register",
                    "--keys",
                    s(dir),
                    "--http",
                    &http,
                    "--grpc",
                    &grpc,
                    "--json",
                ]);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let reg: Value =
                    serde_json::from_slice(&std::fs::read(dir.join("registration.json")).unwrap())
                        .unwrap();
                let token = reg["access_token"].as_str().unwrap();
                assert_eq!(token.len(), 64);
                for stream in [&out.stdout, &out.stderr] {
                    assert!(!String::from_utf8_lossy(stream).contains(token));
                }
                let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(printed["key_id"], reg["key_id"]);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let m = std::fs::metadata(dir.join("registration.json"))
                        .unwrap()
                        .permissions()
                        .mode();
                    assert_eq!(m & 0o777, 0o600);
                }
                regs.push(reg);
            }
            // Registering again without --force is refused and changes nothing.
            let e = omr_fails(&["register", "--keys", s(&alice), "--grpc", &grpc]);
            assert!(
                e.contains("already registered") && e.contains("omr delete"),
                "{e}"
            );

            // Senders: text, a file, and standard input; the URLs come from the flag.
            let send = |to: &Path, extra: &[&str], stdin: Option<&[u8]>| -> u64 {
                let clue = to.join("clue.key");
                let mut args = vec!["send", "--to", s(&clue), "--http", &http];
                args.extend_from_slice(extra);
                let out = omr_with_stdin(&args, stdin);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            };
            let a1 = send(&alice, &["--message", "hello alice"], None);
            let b1 = send(&bob, &["--message", "hello bob"], None);
            let file = tmp.path().join("payload.txt");
            std::fs::write(&file, "alice, from a file").unwrap();
            let a2 = send(&alice, &["--payload", s(&file)], None);
            let b2 = send(&bob, &["--payload", "-"], Some(b"bob, from stdin"));
            assert!(a1 < b1 && b1 < a2 && a2 < b2);

            // Each recipient gets exactly its own messages. (The servers come from
            // registration.json.)
            for (dir, want) in [
                (
                    &alice,
                    vec![(a1, "hello alice"), (a2, "alice, from a file")],
                ),
                (&bob, vec![(b1, "hello bob"), (b2, "bob, from stdin")]),
            ] {
                wait_detected(dir);
                let inbox = dir.join("inbox");
                let d = omr_json(&["digest", "--keys", s(dir), "--out", s(&inbox), "--json"]);
                let want: Vec<(u64, String)> =
                    want.into_iter().map(|(i, t)| (i, t.to_string())).collect();
                assert_eq!(payloads(&d), want, "{kinds}: {d}");
                assert_eq!(d["lag"], 0);
                for (i, text) in &want {
                    assert_eq!(
                        std::fs::read_to_string(inbox.join(format!("{i}.bin"))).unwrap(),
                        *text
                    );
                }
                // Nothing new the second time.
                let again = omr_json(&["digest", "--keys", s(dir), "--json"]);
                assert_eq!(payloads(&again), vec![], "{again}");
            }

            // A later message: only it is retrieved; human output shows it.
            let a3 = send(&alice, &["--message", "third"], None);
            wait_detected(&alice);
            let out = omr(&["digest", "--keys", s(&alice)]);
            assert!(out.status.success());
            let text = String::from_utf8(out.stdout).unwrap();
            assert!(text.starts_with("1 new message "), "{text}");
            assert!(
                text.contains(&format!("#{a3}")) && text.contains("\"third\""),
                "{text}"
            );
            assert!(!text.contains("hello alice"), "{text}");
            // --from 0 starts over.
            let all = omr_json(&["digest", "--keys", s(&alice), "--from", "0", "--json"]);
            assert_eq!(payloads(&all).len(), 3);

            // Status, then delete: the key is gone on the server and locally.
            let st = omr_json(&["status", "--keys", s(&bob), "--json"]);
            assert_eq!(st["key_id"], regs[1]["key_id"]);
            assert_eq!(
                (st["cursor"].as_u64(), st["lag"].as_u64()),
                (st["board_head"].as_u64(), Some(0))
            );
            let del = omr_json(&["delete", "--keys", s(&bob), "--json"]);
            assert_eq!(del["deleted"], regs[1]["key_id"]);
            assert!(!bob.join("registration.json").exists());
            let e = omr_fails(&["status", "--keys", s(&bob)]);
            assert!(
                e.contains("not registered yet") && e.contains("omr register"),
                "{e}"
            );
        })
        .await
        .unwrap();
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_file_the_server_and_what_to_do() {
    let server = TestServer::start(&StoreKind::Sqlite).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    let alice = tmp.path().join("alice");
    tokio::task::spawn_blocking(move || {
        // A missing clue key file.
        let missing = tmp.path().join("nobody/clue.key");
        let e = omr_fails(&[
            "send",
            "--to",
            s(&missing),
            "--message",
            "x",
            "--http",
            &http,
        ]);
        assert!(
            e.contains("cannot read") && e.contains("nobody/clue.key"),
            "{e}"
        );
        // A missing key directory.
        let e = omr_fails(&[
            "register",
            "--keys",
            s(&tmp.path().join("nobody")),
            "--grpc",
            &grpc,
        ]);
        assert!(e.contains("detection.key"), "{e}");

        // The insecure set needs an explicit flag; an unknown set is named.
        let e = omr_fails(&["keygen", "--out", s(&alice), "--param-set", "insecure-test"]);
        assert!(
            e.contains("insecure") && e.contains("--allow-insecure-params"),
            "{e}"
        );
        assert!(!alice.join("secret.key").exists());
        let e = omr_fails(&["keygen", "--out", s(&alice), "--param-set", "omr-v9"]);
        assert!(e.contains("omr-v9"), "{e}");
        // k̄ defaults to 50, or the set's maximum when that is lower.
        let other = tmp.path().join("other");
        let k = omr_json(&[
            "keygen",
            "--out",
            s(&other),
            "--param-set",
            "insecure-test",
            "--allow-insecure-params",
            "--json",
        ]);
        assert_eq!(
            k["kbar"].as_u64(),
            Some(omr_core::INSECURE_TEST.max_kbar as u64)
        );
        keygen(&alice, "4");
        // keygen never overwrites a secret key without --force.
        let before = std::fs::read(alice.join("secret.key")).unwrap();
        let e = omr_fails(&[
            "keygen",
            "--out",
            s(&alice),
            "--param-set",
            "insecure-test",
            "--allow-insecure-params",
        ]);
        assert!(e.contains("already holds a secret key"), "{e}");
        assert_eq!(std::fs::read(alice.join("secret.key")).unwrap(), before);

        // A file that is not a clue key.
        let e = omr_fails(&[
            "send",
            "--to",
            s(&alice.join("secret.key")),
            "--message",
            "x",
            "--http",
            &http,
        ]);
        assert!(
            e.contains("secret.key") && e.contains("not a clue key"),
            "{e}"
        );
        // A payload over the parameter set's limit is refused before anything is sent.
        let big = "x".repeat(omr_core::INSECURE_TEST.payload_bytes + 1);
        let clue = alice.join("clue.key");
        let e = omr_fails(&["send", "--to", s(&clue), "--message", &big, "--http", &http]);
        assert!(e.contains("payload is") && e.contains("at most"), "{e}");

        // Unreachable servers (port 1: nothing listens there).
        let e = omr_fails(&[
            "register",
            "--keys",
            s(&alice),
            "--grpc",
            "http://127.0.0.1:1",
        ]);
        assert!(
            e.contains("cannot reach gRPC server at http://127.0.0.1:1")
                && e.contains("is omrd running"),
            "{e}"
        );
        assert!(!alice.join("registration.json").exists());
        let e = omr_fails(&[
            "send",
            "--to",
            s(&clue),
            "--message",
            "x",
            "--http",
            "http://127.0.0.1:1",
        ]);
        assert!(
            e.contains("cannot reach HTTP server at http://127.0.0.1:1"),
            "{e}"
        );
        let e = omr_fails(&[
            "send",
            "--to",
            s(&clue),
            "--message",
            "x",
            "--http",
            "127.0.0.1:1",
        ]);
        assert!(e.contains("must start with http://"), "{e}");

        // Digest before registering.
        let e = omr_fails(&["digest", "--keys", s(&alice), "--http", &http]);
        assert!(
            e.contains("registration.json") && e.contains("omr register"),
            "{e}"
        );

        // A wrong token: refused by HTTP (digest) and gRPC (status), and says which key.
        omr_json(&[
            "register",
            "--keys",
            s(&alice),
            "--http",
            &http,
            "--grpc",
            &grpc,
            "--json",
        ]);
        let reg_path = alice.join("registration.json");
        let mut reg: Value = serde_json::from_slice(&std::fs::read(&reg_path).unwrap()).unwrap();
        let key_id = reg["key_id"].as_str().unwrap().to_string();
        reg["access_token"] = Value::String("00".repeat(32));
        std::fs::write(&reg_path, serde_json::to_vec(&reg).unwrap()).unwrap();
        let e = omr_fails(&["digest", "--keys", s(&alice)]);
        assert!(
            e.contains("refused the access token") && e.contains(&key_id),
            "{e}"
        );
        assert!(e.contains("HTTP server at"), "{e}");
        let e = omr_fails(&["status", "--keys", s(&alice)]);
        assert!(
            e.contains("refused the access token") && e.contains("gRPC"),
            "{e}"
        );
        assert!(!alice.join("digest-state.json").exists());
        // A corrupt registration file is named.
        std::fs::write(&reg_path, b"{").unwrap();
        let e = omr_fails(&["digest", "--keys", s(&alice)]);
        assert!(
            e.contains("registration.json") && e.contains("not valid"),
            "{e}"
        );
    })
    .await
    .unwrap();
    server.stop().await;
}

/// `omr demo` with the production parameter set (a small board keeps it ≈ 30 s).
#[test]
fn demo_runs_to_success() {
    let out = omr(&[
        "demo",
        "--recipients",
        "2",
        "--messages",
        "12",
        "--per-recipient",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["param_set"], "omr-v1");
    assert_eq!(report["ok"], true);
    for r in report["recipients"].as_array().unwrap() {
        assert_eq!(r["sent"].as_array().unwrap().len(), 2);
        assert_eq!(r["sent"], r["retrieved"], "{report}");
    }
}

#[test]
fn every_command_has_help_with_examples() {
    for cmd in [
        "keygen", "register", "send", "digest", "status", "delete", "bench", "demo",
    ] {
        let out = omr(&[cmd, "--help"]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Example"),
            "omr {cmd} --help has no examples:\n{text}"
        );
    }
}

/// `omr bench --json` prints the fields DESIGN.md names, with plausible values.
#[test]
fn bench_prints_the_designed_json() {
    let r = omr_json(&[
        "bench",
        "--param-set",
        "insecure-test",
        "--messages",
        "4",
        "--threads",
        "2",
        "--json",
    ]);
    assert_eq!(r["param_set"], "insecure-test");
    assert_eq!(
        (r["threads"].as_u64(), r["messages"].as_u64()),
        (Some(2), Some(4))
    );
    for k in ["detect_ms_per_message", "reference_pbs_ms", "decode_ms"] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
    for k in ["level1", "keyswitch", "level2", "trace", "fold"] {
        assert!(r["stage_ms"][k].as_f64().unwrap() > 0.0, "stage {k}: {r}");
    }
    let p = &omr_core::INSECURE_TEST;
    assert_eq!(r["clue_bytes"].as_u64(), Some(p.clue_bytes() as u64));
    assert_eq!(r["kbar"].as_u64(), Some(p.max_kbar as u64));
    for k in ["clue_key_bytes", "detection_key_bytes", "digest_bytes"] {
        assert!(r[k].as_u64().unwrap() > 0, "{k}: {r}");
    }
    // k̄ above the set's maximum is refused with the limit named.
    let e = omr_fails(&["bench", "--param-set", "insecure-test", "--kbar", "999"]);
    assert!(e.contains("999") && e.contains("32"), "{e}");
}
