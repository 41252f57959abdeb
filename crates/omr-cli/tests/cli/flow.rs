//! The `omr` binary's whole flow against a real omrd on each store: keygen, register, send
//! (text, file, stdin), digest, status and delete, for two recipients.

use std::path::Path;

use crate::common::{keygen, omr, omr_fails, omr_json, omr_with_stdin, payloads, s, wait_detected};
use omr_test_support::{test_each_backend, TestDb, TestServer};
use serde_json::Value;

test_each_backend!(keygen_register_send_digest_for_two_recipients);

async fn keygen_register_send_digest_for_two_recipients(db: &TestDb) {
    let server = TestServer::start(db).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    let kinds = format!("{:?}", db.backend());
    tokio::task::spawn_blocking(move || {
        keygen(&alice, "4");
        keygen(&bob, "4");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode =
                |p: std::path::PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
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
            let address = to.join("address");
            let mut args = vec!["send", "--to", s(&address), "--http", &http];
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
        std::fs::write(&file, "alice: a file").unwrap();
        let a2 = send(&alice, &["--payload", s(&file)], None);
        let b2 = send(&bob, &["--payload", "-"], Some(b"bob: stdin"));
        assert!(a1 < b1 && b1 < a2 && a2 < b2);

        // Each recipient gets exactly its own messages. (The servers come from
        // registration.json.)
        for (dir, want) in [
            (&alice, vec![(a1, "hello alice"), (a2, "alice: a file")]),
            (&bob, vec![(b1, "hello bob"), (b2, "bob: stdin")]),
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
