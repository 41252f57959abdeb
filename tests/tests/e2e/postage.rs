//! Postage over real HTTP, on both stores: with `postage_bits` on, a message without a stamp or
//! with a wrong one is refused (`402`, `postage_required` / `postage_invalid`) and stores
//! nothing, a stamp is bound to its clue and payload, a batch with one bad stamp is refused
//! whole, `/v1/params` and gRPC `GetParams` advertise the bits, and the SDK solves the stamp
//! (also when the server turns postage on under it); with postage off the old message encoding
//! and the stamped one are both taken.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_client::Client;
use omr_core::{ClueKey, Message, Postage, INSECURE_TEST};
use omr_proto::v1::registration_header::Start;
use omr_test_support::{insecure_keys, quick_detection, test_each_backend, TestDb, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// Quick to solve (4,096 hashes on average), and a random stamp passes it 1 time in 4,096.
const BITS: u32 = 12;

test_each_backend!(
    postage_on_refuses_missing_and_wrong_stamps_and_stores_nothing,
    a_stamp_is_bound_to_its_payload_and_clue,
    a_batch_with_one_bad_stamp_is_refused_whole,
    the_sdk_solves_postage_and_the_recipient_gets_the_message,
    the_sdk_stamps_once_the_server_turns_postage_on,
    postage_off_takes_the_old_encoding_and_stamped_messages,
);

fn stamped(to: &ClueKey, payload: &[u8], bits: u32) -> Message {
    let mut m = Message::new(to.make_clue(), payload.to_vec()).unwrap();
    m.nonce = m.postage().search(bits, 0..u64::MAX);
    m
}

/// A nonce whose stamp hash for `m` falls short of `bits`.
fn short_nonce(m: &Message, bits: u32) -> u64 {
    let p = m.postage();
    (0..).find(|&n| p.zero_bits(n) < bits).unwrap()
}

fn json_of(m: &Message) -> Value {
    let mut v = json!({
        "clue": B64.encode(m.clue.to_bytes()),
        "payload": B64.encode(&m.payload),
    });
    if let Some(n) = m.nonce {
        v["nonce"] = json!(n);
    }
    v
}

const BINARY: Option<&str> = Some("application/octet-stream");

/// Post `m` as JSON and as its binary encoding; both answers.
async fn post_both(s: &TestServer, m: &Message) -> [(StatusCode, Value); 2] {
    post_each(s, m, m).await
}

/// `json` as JSON, then `binary` in the binary encoding (two messages: the board refuses a
/// message it already has).
async fn post_each(s: &TestServer, json: &Message, binary: &Message) -> [(StatusCode, Value); 2] {
    [
        s.client().post_json("/v1/messages", &json_of(json)).await,
        s.client()
            .post_bytes("/v1/messages", BINARY, binary.to_bytes())
            .await,
    ]
}

fn assert_refused(answers: &[(StatusCode, Value)], code: &str) {
    for (status, body) in answers {
        assert_eq!(*status, StatusCode::PAYMENT_REQUIRED, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("nothing was stored"),
            "{body}"
        );
    }
}

async fn head(s: &TestServer) -> u64 {
    s.client().board(0, 1).await["head"].as_u64().unwrap()
}

async fn with_postage(db: &TestDb) -> TestServer {
    TestServer::start_configured(db, |c| c.postage_bits = BITS).await
}

async fn postage_on_refuses_missing_and_wrong_stamps_and_stores_nothing(db: &TestDb) {
    let s = with_postage(db).await;
    let params: Value = s.client().get("/v1/params").await.json().await.unwrap();
    assert_eq!(params["postage_bits"], BITS, "{params}");
    assert_eq!(s.client().grpc_params().await.postage_bits, BITS);

    let to = insecure_keys(4).clue_key;
    // No stamp: the old encoding (version 1) and JSON without `nonce`.
    let plain = Message::new(to.make_clue(), b"no stamp".to_vec()).unwrap();
    assert_refused(&post_both(&s, &plain).await, "postage_required");
    // A wrong stamp.
    let mut wrong = plain.clone();
    wrong.nonce = Some(short_nonce(&wrong, BITS));
    let answers = post_both(&s, &wrong).await;
    assert_refused(&answers, "postage_invalid");
    assert!(
        answers[0].1["message"]
            .as_str()
            .unwrap()
            .contains("requires 12"),
        "{}",
        answers[0].1
    );
    assert_eq!(head(&s).await, 0, "a refused message was stored");
    let rejected = |code: &str| format!("omr_messages_rejected_total{{code=\"{code}\"}}");
    let metrics = s.client().metrics().await;
    for line in [rejected("postage_required"), rejected("postage_invalid")] {
        assert!(metrics.contains(&format!("{line} 2")), "{line}:\n{metrics}");
    }

    // The right stamp, in both forms: accepted, in order.
    let (good, again) = (
        stamped(&to, b"stamped", BITS),
        stamped(&to, b"stamped", BITS),
    );
    let answers = post_each(&s, &good, &again).await;
    for (i, (status, body)) in answers.iter().enumerate() {
        assert_eq!(*status, StatusCode::CREATED, "{body}");
        assert_eq!(body["index"], i as u64);
    }
    assert_eq!(head(&s).await, 2);
}

async fn a_stamp_is_bound_to_its_payload_and_clue(db: &TestDb) {
    let s = with_postage(db).await;
    let to = insecure_keys(4).clue_key;
    let good = stamped(&to, b"the payload it was made for", BITS);
    // The same clue and nonce with another payload, and the same payload and nonce under
    // another clue. (Among other payloads, one in 4,096 would pass by chance; the test uses the
    // first that does not, which is what the server must then refuse.)
    let nonce = good.nonce.unwrap();
    let falls_short = |m: &Message| {
        Postage::new(&INSECURE_TEST, &m.clue.to_bytes(), &m.payload).zero_bits(nonce) < BITS
    };
    let other_payload = (0..)
        .map(|i| Message {
            payload: format!("another payload {i}").into_bytes(),
            ..good.clone()
        })
        .find(falls_short)
        .unwrap();
    let other_clue = (0..)
        .map(|_| Message {
            clue: to.make_clue(),
            ..good.clone()
        })
        .find(falls_short)
        .unwrap();
    for m in [&other_payload, &other_clue] {
        assert_refused(&post_both(&s, m).await, "postage_invalid");
    }
    assert_eq!(head(&s).await, 0);
    let [(status, body), _] = post_both(&s, &good).await;
    assert_eq!((status, &body["index"]), (StatusCode::CREATED, &json!(0)));
}

async fn a_batch_with_one_bad_stamp_is_refused_whole(db: &TestDb) {
    let s = with_postage(db).await;
    let to = insecure_keys(4).clue_key;
    let good: Vec<Message> = (0..3)
        .map(|i| stamped(&to, format!("batch {i}").as_bytes(), BITS))
        .collect();
    let mut unstamped = good[1].clone();
    unstamped.nonce = None;
    let mut wrong = good[2].clone();
    wrong.nonce = Some(short_nonce(&wrong, BITS));
    let framed = |ms: &[&Message]| -> Vec<u8> {
        let mut out = Vec::new();
        for m in ms {
            let b = m.to_bytes();
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(&b);
        }
        out
    };
    for (bad, code) in [
        (&unstamped, "postage_required"),
        (&wrong, "postage_invalid"),
    ] {
        let batch = [&good[0], bad];
        let answers = [
            s.client()
                .post_json(
                    "/v1/messages/batch",
                    &json!({"messages": batch.map(json_of)}),
                )
                .await,
            s.client()
                .post_bytes("/v1/messages/batch", BINARY, framed(&batch))
                .await,
        ];
        assert_refused(&answers, code);
        for (_, body) in &answers {
            assert!(
                body["message"].as_str().unwrap().starts_with("message 1: "),
                "the refusal names the message: {body}"
            );
        }
    }
    assert_eq!(head(&s).await, 0, "a refused batch stored something");
    let all: Vec<&Message> = good.iter().collect();
    let (status, body) = s
        .client()
        .post_bytes("/v1/messages/batch", BINARY, framed(&all))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The same in JSON, with fresh clues (the board refuses messages it already has).
    let more: Vec<Message> = (0..3)
        .map(|i| stamped(&to, format!("batch {i}").as_bytes(), BITS))
        .collect();
    let (status, body) = s
        .client()
        .post_json(
            "/v1/messages/batch",
            &json!({"messages": more.iter().map(json_of).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(head(&s).await, 6);
}

async fn the_sdk_solves_postage_and_the_recipient_gets_the_message(db: &TestDb) {
    let s = TestServer::start_configured(db, |c| {
        quick_detection(c);
        c.postage_bits = BITS;
    })
    .await;
    let api = s.client();
    let alice = api.register(insecure_keys(4), Start::FromNow(true)).await;
    let client = Client::new(&s.url(""), &s.grpc_url()).unwrap();
    assert_eq!(client.postage_bits().await.unwrap(), BITS);
    let sent = client
        .send_stamped(&alice.keys.clue_key, b"paid for", None)
        .await
        .unwrap();
    let stamp = sent.stamp.expect("the SDK stamped the message");
    assert_eq!(stamp.bits, BITS);
    assert!(stamp.hashes > stamp.nonce, "{stamp:?}");
    assert_eq!(
        client.send(&alice.keys.clue_key, b"again").await.unwrap(),
        1
    );
    let digest = api.caught_up_digest(&alice, None).await;
    assert_eq!(
        digest.messages,
        vec![(0, b"paid for".to_vec()), (1, b"again".to_vec())]
    );
}

async fn the_sdk_stamps_once_the_server_turns_postage_on(db: &TestDb) {
    let s = TestServer::start(db).await;
    let client = Client::new(&s.url(""), &s.grpc_url()).unwrap();
    let to = insecure_keys(4).clue_key;
    let sent = client.send_stamped(&to, b"free", None).await.unwrap();
    assert_eq!((sent.index, sent.stamp), (0, None));
    // The same addresses, now with postage: the client still believes it is off, is refused,
    // asks again and stamps.
    let (http, grpc) = (s.http, s.grpc.expect("a gRPC listener"));
    let s = s
        .restart_configured(|c| {
            c.http_addr = http;
            c.grpc_addr = grpc;
            c.postage_bits = BITS;
        })
        .await;
    let sent = client.send_stamped(&to, b"paid", None).await.unwrap();
    assert_eq!(sent.index, 1);
    assert_eq!(sent.stamp.map(|st| st.bits), Some(BITS));
    assert_eq!(client.postage_bits().await.unwrap(), BITS);
    assert_eq!(head(&s).await, 2);
}

async fn postage_off_takes_the_old_encoding_and_stamped_messages(db: &TestDb) {
    let s = TestServer::start(db).await;
    let params: Value = s.client().get("/v1/params").await.json().await.unwrap();
    assert_eq!(params["postage_bits"], 0, "{params}");
    assert_eq!(
        params["invite_required"], false,
        "open registration: {params}"
    );
    let to = insecure_keys(4).clue_key;
    let plain = || Message::new(to.make_clue(), b"old encoding".to_vec()).unwrap();
    assert_eq!(
        plain().to_bytes()[4],
        1,
        "an unstamped message is version 1"
    );
    let any_stamp = || {
        let mut m = plain();
        m.nonce = Some(short_nonce(&m, BITS));
        m
    };
    let mut answers = post_each(&s, &plain(), &plain()).await.to_vec();
    answers.extend(post_each(&s, &any_stamp(), &any_stamp()).await);
    for (i, (status, body)) in answers.iter().enumerate() {
        assert_eq!(*status, StatusCode::CREATED, "{body}");
        assert_eq!(body["index"], i as u64);
    }
    let client = Client::new(&s.url(""), &s.grpc_url()).unwrap();
    let sent = client.send_stamped(&to, b"sdk", None).await.unwrap();
    assert_eq!((sent.index, sent.stamp), (4, None));
}
