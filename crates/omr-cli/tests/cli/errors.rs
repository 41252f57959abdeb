//! The `omr` binary's errors against a real omrd: each names the file or the server involved
//! and says what to do.

use crate::common::{keygen, omr_fails, omr_json, register, s};
use omr_test_support::TestServer;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_file_the_server_and_what_to_do() {
    let server = TestServer::start_sqlite().await;
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
        // A payload over the parameter set's limit is refused before anything is sent: sealed,
        // 50 bytes less fit.
        let limit = omr_core::INSECURE_TEST.payload_bytes;
        let (address, clue) = (alice.join("address"), alice.join("clue.key"));
        let sealed_max = (limit - 50).to_string();
        let big = "x".repeat(limit - 49);
        let e = omr_fails(&[
            "send",
            "--to",
            s(&address),
            "--message",
            &big,
            "--http",
            &http,
        ]);
        assert!(
            e.contains("sealed, at most") && e.contains(&sealed_max),
            "{e}"
        );
        let big = "x".repeat(limit + 1);
        let plain = ["send", "--to", s(&clue), "--plaintext", "--message", &big];
        let e = omr_fails(&[&plain[..], &["--http", &http]].concat());
        assert!(e.contains("payload is") && e.contains("at most"), "{e}");
        // A bare clue key cannot seal: the error says what to send to instead.
        let e = omr_fails(&["send", "--to", s(&clue), "--message", "x", "--http", &http]);
        assert!(
            e.contains("cannot seal") && e.contains("omr address"),
            "{e}"
        );

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
            s(&address),
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
            s(&address),
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
        register(&alice, &http, &grpc);
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
