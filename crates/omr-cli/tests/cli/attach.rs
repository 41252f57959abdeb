//! Attachments with the `omr` binary against a real omrd: `omr send --attach` posts a sealed
//! attachment with a sealed letter that names it; `omr digest --out` shows it waiting while its
//! epoch is open, then fetches it by PIR once the board has passed the epoch's end and writes
//! it byte for byte; an attachment over the server's limit is refused before anything is
//! posted. On omr-v2, a production set: the insecure test set's 64-byte payload has no room for
//! the letter's 36-byte reference to its attachment.

use crate::common::{omr_fails, omr_json, register, s, wait_detected};
use omr_test_support::{quick_detection, TestDb, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_is_fetched_by_pir_once_its_epoch_closes() {
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| {
        quick_detection(c);
        c.param_set = Some("omr-v2".to_string());
        c.epoch_len = 4;
        c.max_attachment_bytes = Some(4096);
    })
    .await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    tokio::task::spawn_blocking(move || {
        let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
        for dir in [&alice, &bob] {
            let out = s(dir);
            omr_json(&[
                "keygen",
                "--out",
                out,
                "--kbar",
                "4",
                "--param-set",
                "omr-v2",
                "--json",
            ]);
        }
        register(&alice, &http, &grpc);
        let file = tmp.path().join("photo.bin");
        let photo: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&file, &photo).unwrap();
        let send = |to: &std::path::Path, text: &str, more: &[&str]| {
            let address = to.join("address");
            let args = ["send", "--to", s(&address), "--message", text];
            omr_json(&[&args[..], more, &["--http", &http, "--json"]].concat())
        };
        let sent = send(&alice, "see attached", &["--attach", s(&file)]);
        assert_eq!(
            (sent["index"].as_u64(), sent["attachment_bytes"].as_u64()),
            (Some(0), Some(3000))
        );

        // Over the limit (4,096 less the 50 bytes of seal): refused, nothing posted.
        let big = tmp.path().join("big.bin");
        std::fs::write(&big, vec![1u8; 4096 - 50 + 1]).unwrap();
        let refused = omr_fails(&[
            "send",
            "--to",
            s(&alice.join("address")),
            "--message",
            "x",
            "--attach",
            s(&big),
            "--http",
            &http,
        ]);
        assert!(refused.contains("max_attachment_bytes"), "{refused}");

        let out = tmp.path().join("inbox");
        let digest = |dir: &std::path::Path| {
            omr_json(&[
                "digest",
                "--keys",
                s(dir),
                "--out",
                s(&out),
                "--http",
                &http,
                "--json",
            ])
        };
        wait_detected(&alice);
        let first = digest(&alice);
        assert_eq!(first["messages"][0]["text"], "see attached", "{first}");
        let waiting = &first["attachments"][0];
        assert_eq!(waiting["index"], 0, "{first}");
        assert_eq!(waiting["bytes"], 3000, "{first}");
        assert!(
            waiting["status"].as_str().unwrap().starts_with("waiting"),
            "{first}"
        );
        assert!(!out.join("0.attachment").exists());

        // Three more messages close the epoch [0, 4).
        for i in 0..3 {
            send(&bob, &format!("filler {i}"), &[]);
        }
        wait_detected(&alice);
        let second = digest(&alice);
        let fetched = &second["attachments"][0];
        assert_eq!(fetched["status"], "fetched", "{second}");
        assert_eq!(std::fs::read(out.join("0.attachment")).unwrap(), photo);
        // Fetched once: nothing is pending any more.
        let third = digest(&alice);
        assert_eq!(third["attachments"], serde_json::json!([]), "{third}");
    })
    .await
    .unwrap();
}
