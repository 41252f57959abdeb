//! The `omr` binary on omr-light-v1 against a real omrd on each store: keygen, register, send
//! (with an attachment), digest (the indices from the digest, the payloads and the attachment by
//! PIR from the closed epoch in a fixed number of queries, the open epoch's message pending
//! until its epoch closes), status, `digest --follow` on a server that takes attachments (a
//! live message printed with its payload and its attachment written at once, both read from
//! the board's tail in the open epoch; the earlier pending payload fetched in its epoch's one
//! round once it closes), and a key or address of the other scheme refused. On a quiet board of a server without attachments (the
//! light lane's default), `omr digest` prints the payload of a message posted a moment ago
//! (read from the board's tail, or with `--tail-messages 0` fetched by PIR from the open
//! epoch), and `--follow` announces a new message with its payload.

use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_test_support::{light_message, quick_light, test_each_backend, TestDb, TestServer};
use serde_json::Value;

use crate::common::{keygen, omr_fails, omr_json, payloads, register, s, wait_detected};
use crate::follow::Follower;

test_each_backend!(
    a_light_recipient_gets_its_messages_and_payloads_by_pir,
    a_payload_posted_seconds_ago_is_readable_on_a_quiet_light_board,
);

/// `omr send --to TO --http HTTP --json MORE…`, required to succeed: the board index.
fn send(to: &std::path::Path, http: &str, more: &[&str]) -> u64 {
    let args = [&["send", "--to", s(to), "--http", http, "--json"][..], more].concat();
    omr_json(&args)["index"].as_u64().unwrap()
}

async fn a_light_recipient_gets_its_messages_and_payloads_by_pir(db: &TestDb) {
    let server = TestServer::start_configured(db, |c| {
        c.max_attachment_bytes = Some(1024);
        c.param_set = Some(OMR_LIGHT_V1.name.to_string());
        c.epoch_len = OMR_LIGHT_V1.batch as u64;
        c.poll_interval_ms = 200;
    })
    .await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let api = server.client();
    let tmp = tempfile::tempdir().unwrap();
    let (alice, tfhe) = (tmp.path().join("alice"), tmp.path().join("tfhe"));
    let inbox = tmp.path().join("inbox");
    let photo = tmp.path().join("photo.bin");
    let picture: Vec<u8> = (0..700u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&photo, &picture).unwrap();
    let (followed, sketch) = (tmp.path().join("followed"), tmp.path().join("sketch.bin"));
    let drawing: Vec<u8> = (0..900u32).map(|i| (i * 13 % 241) as u8).collect();
    std::fs::write(&sketch, &drawing).unwrap();

    let (a, h, g) = (alice.clone(), http.clone(), grpc.clone());
    let first = tokio::task::spawn_blocking(move || {
        // k̄ has no meaning on the light lane.
        let e = omr_fails(&[
            "keygen",
            "--out",
            s(&a),
            "--param-set",
            "omr-light-v1",
            "--kbar",
            "5",
        ]);
        assert!(e.contains("--kbar does not apply to omr-light-v1"), "{e}");
        let made = omr_json(&[
            "keygen",
            "--out",
            s(&a),
            "--param-set",
            "omr-light-v1",
            "--json",
        ]);
        assert_eq!(
            (made["param_set"].as_str(), made["kbar"].as_u64()),
            (Some("omr-light-v1"), Some(1))
        );
        let reg = register(&a, &h, &g);
        assert_eq!(reg["param_set"], "omr-light-v1");
        assert_eq!(reg["key_bytes"], OMR_LIGHT_V1.detection_key_bytes() as u64);
        let address = omr_json(&["address", "--keys", s(&a), "--json"]);
        assert_eq!(address["param_set"], "omr-light-v1");
        let to = a.join("address");
        let first = send(&to, &h, &["--message", "first, in epoch 0"]);
        let attached = send(
            &to,
            &h,
            &["--message", "with a photo", "--attach", s(&photo)],
        );
        assert_eq!(attached, first + 1);
        first
    })
    .await
    .unwrap();

    // Someone else's messages fill epoch 0; then one more for alice opens epoch 1.
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let noise = OMR_LIGHT_V1.batch as u64 - 2;
    let messages = (0..noise)
        .map(|i| light_message(&stranger, &i.to_le_bytes()))
        .collect();
    api.post_all(messages).await;
    let (a, h, i, f) = (alice.clone(), http.clone(), inbox.clone(), followed);
    let sk = sketch;
    let (mut follower, late, live) = tokio::task::spawn_blocking(move || {
        let to = a.join("address");
        let late = send(&to, &h, &["--message", "late"]);
        assert_eq!(late, OMR_LIGHT_V1.batch as u64, "the first of epoch 1");
        wait_detected(&a);

        let got = omr_json(&["digest", "--keys", s(&a), "--out", s(&i), "--json"]);
        assert_eq!(
            payloads(&got),
            vec![
                (first, "first, in epoch 0".into()),
                (first + 1, "with a photo".into())
            ]
        );
        assert_eq!(got["pending"], serde_json::json!([late]), "{got}");
        // One round in the closed epoch: its hint and a fixed number of queries.
        assert_eq!(got["pir"]["epochs"], 1, "{got}");
        assert_eq!(
            got["pir"]["queries"],
            omr_client::LIGHT_QUERIES_PER_EPOCH as u64
        );
        let attachment = &got["attachments"][0];
        assert_eq!(attachment["index"], first + 1, "{got}");
        assert_eq!(
            std::fs::read(attachment["file"].as_str().unwrap()).unwrap(),
            picture
        );
        assert_eq!(
            std::fs::read(i.join(format!("{first}.bin"))).unwrap(),
            b"first, in epoch 0"
        );

        // Again: nothing new, no PIR round (epoch 1 is open), the late one still pending.
        let again = omr_json(&["digest", "--keys", s(&a), "--json"]);
        assert!(payloads(&again).is_empty(), "{again}");
        assert_eq!(again["pending"], serde_json::json!([late]));
        assert_eq!(again["pir"], Value::Null, "{again}");

        // Text output names the pending message; status works as on the TFHE lane.
        let out = crate::common::omr(&["digest", "--keys", s(&a)]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("#{late}")) && text.contains("once its epoch closes"),
            "{text}"
        );
        let status = omr_json(&["status", "--keys", s(&a), "--json"]);
        assert_eq!(status["param_set"], "omr-light-v1");
        // The next refresh of its open batch (every message on this test server).
        let next = status["cursor"].as_u64().unwrap() + 1;
        assert_eq!(status["refresh_at"], next, "{status}");
        let out = crate::common::omr(&["status", "--keys", s(&a)]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("board reaches {next}")), "{text}");

        // --follow: a message posted now, with an attachment, is printed with its payload and
        // its attachment written at once (the follower reads the board's tail, attachments
        // included), in the open epoch.
        let mut follower = Follower::start(&a, &["--json", "--out", s(&f)]);
        follower.wait_for_line("\"pending\"");
        let live = send(&to, &h, &["--message", "live", "--attach", s(&sk)]);
        follower.wait_for_line("\"text\":\"live\"");
        follower.wait_for_line("\"attachment\":true");
        assert_eq!(
            follower.count(&format!("\"index\":{live},")),
            2,
            "{:?}",
            follower.seen
        );
        assert_eq!(
            std::fs::read(f.join(format!("{live}.bin"))).unwrap(),
            b"live"
        );
        let file = f.join(format!("{live}.attachment"));
        assert_eq!(std::fs::read(&file).unwrap(), drawing);
        let line = format!("\"file\":\"{}\"", file.display());
        assert_eq!(follower.count(&line), 1, "{:?}", follower.seen);
        (follower, late, live)
    })
    .await
    .unwrap();

    // Strangers' messages close epoch 1: in its one round the follower fetches `late`'s payload
    // by PIR, once; nothing of `live` comes again.
    let d = OMR_LIGHT_V1.batch as u64;
    let messages = (live + 1..2 * d)
        .map(|i| light_message(&stranger, &i.to_le_bytes()))
        .collect();
    api.post_all(messages).await;
    tokio::task::spawn_blocking(move || {
        // `late` was pending before the follower started (its first object lists it).
        follower.wait_for_line("\"text\":\"late\"");
        for (index, lines) in [(late, 1), (live, 2)] {
            let line = format!("\"index\":{index},");
            let seen = follower.seen.iter().filter(|l| l.contains(&line)).count();
            assert_eq!(seen, lines, "{index}: {:?}", follower.seen);
        }
    })
    .await
    .unwrap();

    // The other scheme's keys and addresses are refused by this server, naming the sets.
    let (h, g) = (http.clone(), grpc.clone());
    tokio::task::spawn_blocking(move || {
        keygen(&tfhe, "2");
        let e = omr_fails(&["register", "--keys", s(&tfhe), "--http", &h, "--grpc", &g]);
        assert!(
            e.contains("insecure-test") && e.contains("omr-light-v1"),
            "{e}"
        );
        let to = tfhe.join("address");
        let e = omr_fails(&["send", "--to", s(&to), "--http", &h, "--message", "x"]);
        assert!(
            e.contains("param_set_mismatch") || e.contains("omr-light-v1"),
            "{e}"
        );
    })
    .await
    .unwrap();
    let head = api.get("/v1/params").await.json::<Value>().await.unwrap()["board_head"].clone();
    assert_eq!(
        head,
        2 * OMR_LIGHT_V1.batch as u64,
        "nothing refused was stored"
    );
}

async fn a_payload_posted_seconds_ago_is_readable_on_a_quiet_light_board(db: &TestDb) {
    let server = TestServer::start_configured(db, quick_light).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tmp = tempfile::tempdir().unwrap();
    let (alice, bob) = (tmp.path().join("alice"), tmp.path().join("bob"));
    tokio::task::spawn_blocking(move || {
        for dir in [&alice, &bob] {
            omr_json(&[
                "keygen",
                "--out",
                s(dir),
                "--param-set",
                "omr-light-v1",
                "--json",
            ]);
            register(dir, &http, &grpc);
        }
        let to = alice.join("address");
        send(&bob.join("address"), &http, &["--message", "for bob"]);
        let lunch = send(&to, &http, &["--message", "lunch at noon?"]);
        // At once: read from the board's tail, no digest, no round.
        let got = omr_json(&["digest", "--keys", s(&alice), "--json"]);
        assert_eq!(
            payloads(&got),
            vec![(lunch, "lunch at noon?".into())],
            "{got}"
        );
        assert_eq!(
            (got["digests"].as_u64(), got["tail"]["messages"].as_u64()),
            (Some(0), Some(2))
        );
        assert_eq!(got["pir"], Value::Null, "{got}");

        // Asking the server instead: the digest, then one round on the open epoch.
        let late = send(&to, &http, &["--message", "and dinner"]);
        wait_detected(&alice);
        let got = omr_json(&[
            "digest",
            "--keys",
            s(&alice),
            "--tail-messages",
            "0",
            "--json",
        ]);
        assert_eq!(payloads(&got), vec![(late, "and dinner".into())], "{got}");
        assert_eq!(got["pir"]["queries"], 1, "{got}");
        assert!(got["pending"].is_null(), "{got}");

        // Text: the payload, and what reading the tail cost.
        let tea = send(&to, &http, &["--message", "tea?"]);
        let out = crate::common::omr(&["digest", "--keys", s(&alice)]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("#{tea}")) && text.contains("\"tea?\""),
            "{text}"
        );
        assert!(
            text.contains("read the board's newest 1 message itself"),
            "{text}"
        );

        // --follow announces a new message with its payload, once.
        let mut follower = Follower::start(&alice, &["--json"]);
        let live = send(&to, &http, &["--message", "live"]);
        follower.wait_for_line("\"text\":\"live\"");
        let line = format!("\"index\":{live},");
        assert_eq!(follower.count(&line), 1, "{:?}", follower.seen);
        assert!(
            follower.seen.iter().all(|l| !l.contains("pending")),
            "{:?}",
            follower.seen
        );
    })
    .await
    .unwrap();
}
