//! Sealed payloads with the `omr` binary against a real omrd: `omr send --to ADDRESS` (the text
//! `omr address` prints) puts only ciphertext on the public board, 50 bytes longer than the
//! message; the recipient's `omr digest` opens it; `--plaintext` posts a readable payload that
//! the digest marks as unsealed; a payload sealed to another recipient (a false positive, as the
//! digest sees it) is reported as one that cannot be opened, not shown.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use crate::common::{keygen, omr_json, register, s, wait_detected};
use omr_test_support::{quick_detection, TestDb, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_message_is_ciphertext_on_the_board_and_opens_for_its_recipient() {
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, quick_detection).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    let secret = "keys: the mat";
    let digest = tokio::task::spawn_blocking(move || {
        keygen(&alice, "4");
        keygen(&bob, "4");
        register(&alice, &http, &grpc);
        let printed = omr_json(&["address", "--keys", s(&alice), "--json"]);
        let address = printed["address"].as_str().unwrap().to_string();
        assert!(address.starts_with("omr1"), "{printed}");
        let file = std::fs::read_to_string(alice.join("address")).unwrap();
        assert_eq!(file.trim(), address);

        let send = |to: &str, text: &str, more: &[&str]| {
            let args = [
                "send",
                "--to",
                to,
                "--message",
                text,
                "--http",
                &http,
                "--json",
            ];
            omr_json(&[&args[..], more].concat())
        };
        let sealed = send(&address, secret, &[]);
        assert_eq!(
            (sealed["index"].as_u64(), &sealed["sealed"]),
            (Some(0), &true.into())
        );
        let plain = send(s(&alice.join("address")), "public notice", &["--plaintext"]);
        assert_eq!(plain["sealed"], false, "{plain}");
        // Sealed to bob, with a clue for alice: what a false positive of detection looks like
        // from alice's side (the clue is hers, the payload is not for her key).
        let alice_clue = std::fs::read(alice.join("clue.key")).unwrap();
        let bob_seal = std::fs::read_to_string(bob.join("address")).unwrap();
        let mixed = omr_client::Address {
            clue_key: omr_core::ClueKey::from_bytes(&alice_clue).unwrap().into(),
            seal: omr_client::Address::parse(&bob_seal).unwrap().seal,
        };
        send(&mixed.encode(), "for bob's eyes", &[]);

        wait_detected(&alice);
        omr_json(&["digest", "--keys", s(&alice), "--json"])
    })
    .await
    .unwrap();

    let m = digest["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{digest}");
    assert_eq!(
        (&m[0]["text"], &m[0]["sealed"], &m[0]["opened"]),
        (&secret.into(), &true.into(), &true.into())
    );
    assert_eq!(m[0]["board_bytes"].as_u64(), Some(secret.len() as u64 + 50));
    assert_eq!(
        (&m[1]["text"], &m[1]["sealed"], &m[1]["opened"]),
        (&"public notice".into(), &false.into(), &false.into())
    );
    assert_eq!(
        (&m[2]["sealed"], &m[2]["opened"]),
        (&true.into(), &false.into())
    );
    assert!(
        m[2]["text"].is_null() && m[2]["payload_base64"].is_null(),
        "{digest}"
    );

    // The public board: the sealed payload is not the message, the unsealed one is.
    let board = server.client().board(0, 10).await;
    let payloads: Vec<Vec<u8>> = (board["messages"].as_array().unwrap().iter())
        .map(|m| B64.decode(m["payload"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(payloads.len(), 3);
    assert!(!payloads[0]
        .windows(secret.len())
        .any(|w| w == secret.as_bytes()));
    assert_eq!(payloads[0].len(), secret.len() + 50);
    assert_eq!(payloads[1], b"public notice");
    server.stop().await;
    db.cleanup().await;
}
