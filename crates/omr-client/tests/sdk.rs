//! The SDK against a real omrd: retrieval across epochs, overflow splitting, typed errors.
//!
//! Long: one end-to-end SDK suite against a real omrd; each test starts its own server.

use std::time::{Duration, Instant};

use omr_client::{Client, ClientOptions, DigestState, Error, Registration, StartAt};
use omr_test_support::{insecure_keys, quick_light, wait_until, TestDb, TestServer};

async fn wait_detected(client: &Client, reg: &Registration) {
    wait_until(Duration::from_secs(60), "the key has no lag", || async {
        client.key_status(reg).await.unwrap().lag == 0
    })
    .await;
}

/// A server on `db` whose accumulator epochs are 4 messages long.
async fn server_with_short_epochs(db: &TestDb) -> TestServer {
    TestServer::start_configured(db, |c| c.epoch_len = 4).await
}

/// (index, payload) of what a retrieval returned.
fn pairs(got: &omr_client::Retrieval) -> Vec<(u64, Vec<u8>)> {
    got.messages
        .iter()
        .map(|m| (m.index, m.payload.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_over_kbar_is_split_at_epoch_boundaries() {
    let db = TestDb::sqlite().await;
    let server = server_with_short_epochs(&db).await;
    let client = Client::new(&server.url(""), &server.grpc_url()).unwrap();
    let (me, other) = (insecure_keys(2), insecure_keys(2));
    let reg = client
        .register(&me.detection_key.to_bytes(), StartAt::Index(0), None)
        .await
        .unwrap();
    // Two messages for me in each of the epochs [0, 4), [4, 8), [8, 12): six in all, k̄ = 2.
    let mut mine = Vec::new();
    for i in 0..12u64 {
        let to = if i % 4 < 2 { &me } else { &other };
        let payload = format!("m{i}").into_bytes();
        let index = client.send(&to.clue_key, &payload).await.unwrap();
        assert_eq!(index, i);
        if i % 4 < 2 {
            mine.push((i, payload));
        }
    }
    wait_detected(&client, &reg).await;
    let mut state = DigestState::new(&reg);
    let got = client
        .retrieve(&me.secret, &reg, &mut state, None)
        .await
        .unwrap();
    assert_eq!(pairs(&got), mine);
    assert!(got.splits >= 2, "splits: {}", got.splits);
    assert_eq!((got.from, got.to, got.lag), (0, 12, 0));
    assert_eq!(state.next_from, 12);

    // Then one message at a time inside the epoch [12, 16) (at most k̄ = 2 there): each digest
    // covers the epoch from its start again, and only the new message is returned.
    for i in 12..14u64 {
        let p = format!("m{i}").into_bytes();
        assert_eq!(client.send(&me.clue_key, &p).await.unwrap(), i);
        wait_detected(&client, &reg).await;
        let got = client
            .retrieve(&me.secret, &reg, &mut state, None)
            .await
            .unwrap();
        assert_eq!(pairs(&got), vec![(i, p)]);
        assert_eq!((got.splits, got.to), (0, i + 1));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_epoch_over_kbar_is_a_clear_error_and_state_stays() {
    let db = TestDb::sqlite().await;
    let server = server_with_short_epochs(&db).await;
    let client = Client::new(&server.url(""), &server.grpc_url()).unwrap();
    let me = insecure_keys(1);
    let reg = client
        .register(&me.detection_key.to_bytes(), StartAt::Now, None)
        .await
        .unwrap();
    for i in 0..3 {
        client.send(&me.clue_key, &[i]).await.unwrap();
    }
    wait_detected(&client, &reg).await;
    let mut state = DigestState::new(&reg);
    let before = state.clone();
    let e = client
        .retrieve(&me.secret, &reg, &mut state, None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Overflow { kbar: 1, .. }), "{e}");
    assert!(e.to_string().contains("larger k̄"), "{e}");
    assert_eq!(state, before);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed() {
    let server = TestServer::start_sqlite().await;
    let client = Client::new(&server.url(""), &server.grpc_url()).unwrap();
    let me = insecure_keys(2);
    let reg = client
        .register(&me.detection_key.to_bytes(), StartAt::Now, None)
        .await
        .unwrap();
    assert_eq!(client.params().await.unwrap().param_set, "insecure-test");
    assert_eq!(client.grpc_params().await.unwrap(), "insecure-test");

    let wrong = Registration {
        access_token: "11".repeat(32),
        ..reg.clone()
    };
    let e = client.digest(&wrong, None, None, None).await.unwrap_err();
    assert!(matches!(e, Error::Forbidden { .. }), "{e}");
    let e = client.key_status(&wrong).await.unwrap_err();
    assert!(matches!(e, Error::Forbidden { .. }), "{e}");
    let e = client
        .digest(&reg, Some(5), Some(5), None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Rejected { ref code, .. } if code == "malformed_query"),
        "{e}"
    );

    client.delete_key(&reg).await.unwrap();
    let e = client.key_status(&reg).await.unwrap_err();
    assert!(matches!(e, Error::UnknownKey { .. }), "{e}");
    let e = client.digest(&reg, None, None, None).await.unwrap_err();
    assert!(matches!(e, Error::UnknownKey { .. }), "{e}");

    // A malformed detection key is refused before anything is sent.
    let e = client
        .register(b"not a key", StartAt::Now, None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Omr(_)), "{e}");

    // Nothing listens on port 1: unreachable, after the configured retries.
    let options = ClientOptions {
        retries: 2,
        backoff: Duration::from_millis(10),
        ..ClientOptions::default()
    };
    let dead = Client::with_options("http://127.0.0.1:1", "http://127.0.0.1:1", options).unwrap();
    let started = Instant::now();
    let e = dead.params().await.unwrap_err();
    assert!(
        matches!(e, Error::Unreachable { .. }) && e.is_transient(),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(30), "no backoff");
    let e = dead.key_status(&reg).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot reach gRPC server at http://127.0.0.1:1"),
        "{e}"
    );
    let e = dead.send(&me.clue_key, b"x").await.unwrap_err();
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    server.stop().await;
}

/// A post refused by the client's rate limit is retried after the server's `Retry-After`
/// (nothing was stored), and lands once; with no retries left the refusal is `Busy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_post_waits_for_retry_after_and_lands_once() {
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| {
        c.rate_limit_per_second = 1.0;
        c.rate_limit_burst = 1;
    })
    .await;
    let to = insecure_keys(2).clue_key;
    let client = Client::new(&server.url(""), &server.grpc_url()).unwrap();
    assert_eq!(client.send(&to, b"first").await.unwrap(), 0);
    let started = Instant::now();
    assert_eq!(client.send(&to, b"second").await.unwrap(), 1);
    assert!(started.elapsed() >= Duration::from_millis(900), "no wait");

    let impatient = ClientOptions {
        retries: 0,
        ..ClientOptions::default()
    };
    let impatient = Client::with_options(&server.url(""), &server.grpc_url(), impatient).unwrap();
    let e = impatient.send(&to, b"third").await.unwrap_err();
    assert!(
        matches!(e, Error::Busy { ref code, retry_after, .. } if code == "rate_limited" && retry_after >= Duration::from_secs(1)),
        "{e}"
    );
    assert!(e.is_transient());
    assert_eq!(db.store().board_head().await.unwrap(), 2);
    server.stop().await;
    db.cleanup().await;
}

/// A hostile "server" on a loopback port: every connection gets `head` and then, with
/// `endless`, chunks of JSON-looking bytes until the client hangs up.
async fn hostile_server(head: &'static str, endless: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = conn.read(&mut request).await;
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
                while endless && conn.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cannot_make_the_client_allocate_what_it_declares() {
    // A Content-Length of 1 TiB is refused before anything is read or allocated.
    let url = hostile_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1099511627776\r\n\r\n{",
        false,
    )
    .await;
    let client = Client::new(&url, "http://127.0.0.1:1").unwrap();
    let started = Instant::now();
    match client.params().await {
        Err(Error::Protocol { message, .. }) => {
            assert!(message.contains("1099511627776"), "{message}")
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // A body with no declared length that never ends is cut off at the answer's limit.
    let url = hostile_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        true,
    )
    .await;
    let client = Client::new(&url, "http://127.0.0.1:1").unwrap();
    match client.params().await {
        Err(Error::Protocol { message, .. }) => {
            assert!(message.contains("longer body"), "{message}")
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

/// omr-light-v1 through the SDK, on a server that takes no attachments: sealed messages to a
/// light address, detected, their payloads fetched by the batch fetch: the fetch key uploaded
/// on the first round, more messages than a round takes in a second round of the same call,
/// and no round once nothing new has closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_payloads_come_by_the_batch_fetch_in_rounds() {
    use omr_client::{Address, ClueKey, Keys, SealKey};
    use omr_light::fetch::{FetchKey, RECORDS_PER_FETCH};
    let db = TestDb::sqlite().await;
    let d = omr_light::OMR_LIGHT_V1.batch as u64;
    let server = TestServer::start_configured(&db, |c| {
        c.param_set = Some(omr_light::OMR_LIGHT_V1.name.into());
        c.epoch_len = d;
        c.poll_interval_ms = 200;
    })
    .await;
    let client = Client::new(&server.url(""), &server.grpc_url()).unwrap();
    let (me, stranger) = (
        Keys::generate("omr-light-v1", 1).unwrap(),
        Keys::generate("omr-light-v1", 1).unwrap(),
    );
    let reg = client
        .register(&me.detection_key, StartAt::Now, None)
        .await
        .unwrap();
    assert_eq!((reg.param_set.as_str(), reg.kbar), ("omr-light-v1", 1));
    let seal = SealKey::generate();
    let address = Address {
        clue_key: me.clue_key.clone(),
        seal: seal.public().clone(),
    };

    // Two more than a round fetches, sealed, in epoch 0; strangers close it.
    let extra = RECORDS_PER_FETCH + 2;
    let mut sent = Vec::new();
    for i in 0..extra {
        let letter = format!("letter {i}");
        let index = client
            .send_to(&address, letter.as_bytes(), None)
            .await
            .unwrap()
            .index;
        sent.push((index, letter));
    }
    let noise: Vec<(ClueKey, Vec<u8>)> = (extra as u64..d + 2)
        .map(|i| (stranger.clue_key.clone(), i.to_le_bytes().to_vec()))
        .collect();
    for chunk in noise.chunks(1000) {
        client.send_batch(chunk).await.unwrap();
    }
    wait_detected(&client, &reg).await;

    let mut state = DigestState::new(&reg);
    let first = client
        .retrieve(&me.secret, &reg, &mut state, None)
        .await
        .unwrap();
    let opened: Vec<(u64, String)> = (first.open(&seal).into_iter())
        .map(|r| {
            let text = String::from_utf8(r.letter.bytes().unwrap().to_vec()).unwrap();
            (r.index, text)
        })
        .collect();
    assert_eq!(opened, sent);
    assert!(first.pending.is_empty());
    let pir = first.pir.expect("fetch rounds");
    // Two rounds on the closed epoch (52 payloads), and one on the open epoch, which the
    // digests reached too (two strangers' messages: a round whatever it holds).
    assert_eq!((pir.epochs, pir.queries), (1, 3));
    assert_eq!(pir.key_bytes_up, FetchKey::encoded_len() as u64);
    // Each query ≈ 64 KB up at most, 10 answers of 16 KiB down.
    assert!(pir.bytes_up < 3 * 70_000, "{pir:?}");
    assert!(pir.bytes_down < 3 * 170_000, "{pir:?}");
    // Nothing new: the board's tail (empty) is read, no digest, no round.
    let again = client
        .retrieve(&me.secret, &reg, &mut state, None)
        .await
        .unwrap();
    assert!(again.messages.is_empty() && again.pending.is_empty() && again.pir.is_none());
    assert_eq!(
        (again.digests, again.tail.map(|t| t.messages)),
        (0, Some(0))
    );
}

/// omr-light-v1 on a quiet board (no epoch ever closes): a sealed letter is readable at once.
/// A recipient at the head reads the board's tail itself (no digest, no round); one that asks
/// the server (`tail_messages = 0`) gets it from the open epoch's snapshot in one round, and a
/// recipient with nothing there makes a round of the same size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_payloads_of_the_open_epoch_are_readable_at_once() {
    use omr_client::{Address, Keys, SealKey};
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, quick_light).await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let tailing = Client::new(&http, &grpc).unwrap();
    let options = ClientOptions {
        tail_messages: 0,
        ..ClientOptions::default()
    };
    let asking = Client::with_options(&http, &grpc, options).unwrap();
    let (me, idle, stranger) = (
        Keys::generate("omr-light-v1", 1).unwrap(),
        Keys::generate("omr-light-v1", 1).unwrap(),
        Keys::generate("omr-light-v1", 1).unwrap(),
    );
    let reg = (tailing
        .register(&me.detection_key, StartAt::Now, None)
        .await)
        .unwrap();
    let idle_reg = (tailing
        .register(&idle.detection_key, StartAt::Now, None)
        .await)
        .unwrap();
    let seal = SealKey::generate();
    let address = Address {
        clue_key: me.clue_key.clone(),
        seal: seal.public().clone(),
    };
    tailing
        .send(stranger.clue_key.clone(), b"noise 0")
        .await
        .unwrap();
    let sent = (tailing.send_to(&address, b"paid 5", None).await)
        .unwrap()
        .index;
    tailing
        .send(stranger.clue_key.clone(), b"noise 2")
        .await
        .unwrap();
    let letters = |got: &omr_client::Retrieval| -> Vec<(u64, Vec<u8>)> {
        (got.open(&seal).into_iter())
            .map(|r| (r.index, r.letter.bytes().unwrap().to_vec()))
            .collect()
    };

    // At the head: the tail, read at once.
    let mut state = DigestState::new(&reg);
    let got = (tailing.retrieve(&me.secret, &reg, &mut state, None).await).unwrap();
    assert_eq!(letters(&got), vec![(sent, b"paid 5".to_vec())]);
    assert_eq!((got.digests, got.to, got.lag), (0, 3, 0));
    assert!(got.pir.is_none() && got.pending.is_empty());
    let tail = got.tail.expect("the tail was read");
    assert_eq!(tail.messages, 3);
    assert!(tail.bytes > 3 * 2956, "{tail:?}");

    // Asking the server: the digest once detection has reached the head, then one round.
    wait_detected(&asking, &reg).await;
    let mut state = DigestState::new(&reg);
    let got = (asking.retrieve(&me.secret, &reg, &mut state, None).await).unwrap();
    assert_eq!(letters(&got), vec![(sent, b"paid 5".to_vec())]);
    assert!(got.tail.is_none() && got.pending.is_empty());
    let pir = got.pir.expect("a round");
    assert_eq!((pir.epochs, pir.queries), (0, 1));
    // A recipient with nothing on the board makes the same round.
    wait_detected(&asking, &idle_reg).await;
    let mut idle_state = DigestState::new(&idle_reg);
    let none = (asking
        .retrieve(&idle.secret, &idle_reg, &mut idle_state, None)
        .await)
        .unwrap();
    assert!(none.messages.is_empty());
    let idle_pir = none.pir.expect("a round whatever it holds");
    assert_eq!(
        (idle_pir.queries, idle_pir.bytes_up, idle_pir.bytes_down),
        (pir.queries, pir.bytes_up, pir.bytes_down)
    );
}

/// A retrieval that fails part-way leaves the state as it was. On omr-light-v1 with the client
/// asking the server, the digest is served and the fetch round then refused (the client address
/// has spent its rate-limit tokens): the call fails and `state` is unchanged, not advanced past
/// a digest whose payloads never came back. Once the server allows it, the same state retrieves
/// the payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_retrieval_leaves_the_state_as_it_was() {
    use omr_client::Keys;
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, quick_light).await;
    let asking = |s: &TestServer| {
        let options = ClientOptions {
            tail_messages: 0,
            retries: 0,
            ..ClientOptions::default()
        };
        Client::with_options(&s.url(""), &s.grpc_url(), options).unwrap()
    };
    let me = Keys::generate("omr-light-v1", 1).unwrap();
    let client = asking(&server);
    let reg = (client.register(&me.detection_key, StartAt::Now, None).await).unwrap();
    let sent = client.send(me.clue_key.clone(), b"paid").await.unwrap();
    wait_detected(&client, &reg).await;

    // One token: the digest's. The round that follows is refused.
    let server = server
        .restart_configured(|c| {
            c.digest_rate_limit_per_second = 0.001;
            c.digest_rate_limit_burst = 1;
        })
        .await;
    let mut state = DigestState::new(&reg);
    let before = state.clone();
    let err = (asking(&server).retrieve(&me.secret, &reg, &mut state, None))
        .await
        .expect_err("the round is over the rate limit");
    assert!(
        matches!(&err, Error::Busy { code, .. } if code == "rate_limited"),
        "{err:?}"
    );
    assert_eq!(state, before);

    let server = server
        .restart_configured(|c| c.digest_rate_limit_per_second = 0.0)
        .await;
    let got = (asking(&server).retrieve(&me.secret, &reg, &mut state, None))
        .await
        .unwrap();
    assert_eq!(pairs(&got), vec![(sent, b"paid".to_vec())]);
    assert_eq!((state.next_from, state.pending_payloads.len()), (1, 0));
}

/// omr-light-v1 on a server that takes attachments. A recipient near the head reads the board's
/// pages with every message's attachment (`attachments=true`): its payload and its attachment
/// at once, the epoch open. A letter whose attachment did not come so (pending in the state) has
/// it fetched by PIR in its epoch's one round once the epoch closes, in the round's usual number
/// of queries. A page read with attachments ends once they pass 1 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_attachments_come_with_the_tail_or_in_their_epochs_round() {
    use base64::Engine;
    use omr_client::{mailbox, Address, Keys, PendingAttachment, SealKey};
    use omr_light::OMR_LIGHT_V1;
    let db = TestDb::sqlite().await;
    let server = TestServer::start_configured(&db, |c| {
        quick_light(c);
        c.max_attachment_bytes = Some(65_536);
    })
    .await;
    let (http, grpc) = (server.url(""), server.grpc_url());
    let client = Client::new(&http, &grpc).unwrap();
    let me = Keys::generate("omr-light-v1", 1).unwrap();
    let reg = (client.register(&me.detection_key, StartAt::Now, None).await).unwrap();
    let seal = SealKey::generate();
    let address = Address {
        clue_key: me.clue_key.clone(),
        seal: seal.public().clone(),
    };
    let photo: Vec<u8> = (0..900u32).map(|i| (i * 7 % 251) as u8).collect();
    let sent = (client.send_with_attachment(&address, b"see attached", &photo, None))
        .await
        .unwrap()
        .index;
    let stranger = omr_light::SecretKey::generate(&OMR_LIGHT_V1).address();
    let api = server.client();
    api.post_all(vec![omr_test_support::light_message(&stranger, b"noise")])
        .await;

    // Near the head: the payload and the attachment at once, from the pages.
    let mut state = DigestState::new(&reg);
    let got = (client.retrieve(&me.secret, &reg, &mut state, None).await).unwrap();
    let letters = mailbox::open_letters(Some(&seal), &got);
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].letter.bytes(), Some(&b"see attached"[..]));
    assert!(got.tail.is_some() && got.pir.is_none() && got.pending.is_empty());
    let arrived = mailbox::arrived_attachments(Some(&seal), &mut state, &got, &letters);
    assert_eq!(arrived.len(), 1);
    assert_eq!(arrived[0].data(), Some(&photo[..]));
    mailbox::remember_attachments(&mut state, &got, &letters);
    assert!(state.pending_attachments.is_empty());

    // The same letter as if its attachment had not come: pending, fetched in the round of its
    // epoch once the epoch closes, among the round's usual queries.
    let reference = letters[0].attachment.expect("the letter names it");
    let mut later = state.clone();
    later
        .pending_attachments
        .push(PendingAttachment::new(sent, &reference));
    let fill = (2..OMR_LIGHT_V1.batch as u64)
        .map(|i| omr_test_support::light_message(&stranger, &i.to_le_bytes()))
        .collect();
    api.post_all(fill).await;
    wait_detected(&client, &reg).await;
    let got = (client.retrieve(&me.secret, &reg, &mut later, None).await).unwrap();
    assert!(got.messages.is_empty(), "the payload came before");
    let pir = got.pir.expect("the epoch's round");
    assert_eq!(
        (pir.epochs, pir.queries),
        (1, omr_client::LIGHT_QUERIES_PER_EPOCH)
    );
    let arrived = mailbox::arrived_attachments(Some(&seal), &mut later, &got, &[]);
    assert_eq!(arrived.len(), 1);
    assert_eq!(arrived[0].data(), Some(&photo[..]));
    assert!(later.pending_attachments.is_empty());

    // A page read with attachments ends after the one that takes it past 1 MiB.
    let big: Vec<u8> = vec![7; 65_000];
    let first = OMR_LIGHT_V1.batch as u64;
    for _ in 0..20 {
        (client.send_with_attachment(&address, b"big", &big, None))
            .await
            .unwrap();
    }
    let page: omr_api::http::BoardPage = api
        .get(&format!("/v1/messages?from={first}&attachments=true"))
        .await
        .json()
        .await
        .unwrap();
    let sizes: Vec<usize> = (page.messages.iter())
        .map(|m| {
            let a = m.attachment.as_deref().expect("each has one");
            base64::engine::general_purpose::STANDARD
                .decode(a)
                .unwrap()
                .len()
        })
        .collect();
    let total: usize = sizes.iter().sum();
    assert!(sizes.len() < 20, "{sizes:?}");
    assert!(
        total >= 1 << 20 && total - sizes[sizes.len() - 1] < 1 << 20,
        "{sizes:?}"
    );
    assert_eq!(page.next, first + sizes.len() as u64);
    // Without asking, no attachment.
    let plain: omr_api::http::BoardPage = (api.get(&format!("/v1/messages?from={first}")).await)
        .json()
        .await
        .unwrap();
    assert_eq!(plain.messages.len(), 20);
    assert!(plain.messages.iter().all(|m| m.attachment.is_none()));
}
