//! omr-light-v1's payload fetch through the service, on each store, on a server that takes no
//! attachments (the light lane's default): three registered recipients and an unregistered one
//! share a closed epoch (the first and the last index among theirs) and an open one; each
//! recipient uploads its fetch key and fetches its closed epoch's payloads in one round of the
//! same size as everyone's, byte-exact. Bad input is refused with its code before any work and
//! changes nothing: a round without a fetch key, a fetch key that does not decode, missing and
//! wrong tokens, a malformed query, a query for a snapshot no longer served, a TFHE server
//! (`unknown_route`, after the token check). On a quiet board (ten messages, no epoch closed)
//! the open epoch's snapshot serves every payload byte-exact over HTTP and gRPC, in rounds of
//! one size, and follows the board as it grows; a round against a snapshot no longer kept is
//! refused.
//!
//! Long: the payload fetch end to end, closed and open snapshots, with their shared round helpers.

use omr_light::fetch::layout::{assign, Geometry};
use omr_light::fetch::wire::answers_from_bytes;
use omr_light::fetch::{FetchKey, BUCKETS, BUCKETS_PER_ANSWER};
use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_pir::attachment::unframe_message;
use omr_proto::v1::detector_client::DetectorClient;
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::{FetchRequest, GetFetchRangeRequest, PutFetchKeyRequest};
use omr_test_support::{light_message, test_each_backend, with_token, RawClient, TestDb};
use omr_test_support::{quick_light, LightRecipient, TestServer};
use reqwest::StatusCode;
use serde_json::Value;
use tonic::transport::Channel;

test_each_backend!(
    payloads_come_back_by_the_batch_fetch,
    the_batch_fetch_refuses_bad_input,
    open_epoch_payloads_come_back_on_a_quiet_board,
);

/// omr-light-v1 quick to watch ([`quick_light`]) on two detection threads.
async fn light_server(db: &TestDb) -> TestServer {
    TestServer::start_configured(db, |c| {
        quick_light(c);
        c.worker_threads = 2;
    })
    .await
}

fn payload(i: u64) -> Vec<u8> {
    if i.is_multiple_of(7) {
        (0..OMR_LIGHT_V1.payload_bytes)
            .map(|b| (b as u64 * 3 + i) as u8)
            .collect()
    } else {
        format!("light payload {i}").into_bytes()
    }
}

/// `PUT`/`POST` `bytes` to `path` with `token` (none: no Authorization).
async fn send(
    api: &RawClient,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    bytes: Vec<u8>,
) -> reqwest::Response {
    let mut req = (api.http().request(method, api.url(path)))
        .header("content-type", "application/octet-stream")
        .body(bytes);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

async fn refused(response: reqwest::Response, status: StatusCode, code: &str) {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], code, "{body}");
}

async fn range(api: &RawClient) -> Value {
    range_at(api, "/v1/fetch").await
}

/// The snapshot `GET path` serves.
async fn range_at(api: &RawClient, path: &str) -> Value {
    let r = api.get(path).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// One round for `wanted` of `secret`'s key against the closed epochs' snapshot: the payloads
/// by index, in order, and the query's size.
async fn round(
    api: &RawClient,
    secret: &SecretKey,
    key_id: &str,
    token: &str,
    wanted: &[u64],
) -> (Vec<(u64, Vec<u8>)>, usize) {
    round_at(api, "/v1/fetch", secret, key_id, token, wanted).await
}

/// [`round`] against the snapshot `GET range_path` serves.
async fn round_at(
    api: &RawClient,
    range_path: &str,
    secret: &SecretKey,
    key_id: &str,
    token: &str,
    wanted: &[u64],
) -> (Vec<(u64, Vec<u8>)>, usize) {
    let r = range_at(api, range_path).await;
    let (start, end) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
    let round = Round::new(secret, start..end, wanted);
    assert_eq!(r["rows"].as_u64(), Some(round.geometry.rows as u64));
    let path = format!("/v1/keys/{key_id}/fetch");
    let query = round.query.clone();
    let response = send(api, reqwest::Method::POST, &path, Some(token), query).await;
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.bytes().await.unwrap();
    (round.decode(&bytes), round.query.len())
}

/// One round's query for `wanted` against the snapshot of `range`, and what decodes its
/// answers.
struct Round {
    geometry: Geometry,
    fetch: omr_light::fetch::FetchSecret,
    placed: Vec<(usize, u64)>,
    query: Vec<u8>,
}

impl Round {
    fn new(secret: &SecretKey, range: std::ops::Range<u64>, wanted: &[u64]) -> Round {
        let geometry = Geometry::new(range, BUCKETS);
        let (placed, left) = assign(wanted, BUCKETS);
        assert!(left.is_empty());
        let fetch = secret.fetch_secret();
        let query = fetch
            .query(&geometry, &placed, &mut rand::rngs::OsRng)
            .to_bytes(&OMR_LIGHT_V1);
        Round {
            geometry,
            fetch,
            placed,
            query,
        }
    }

    /// The payloads the answers hold, by index, in order.
    fn decode(&self, answers: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let answers = answers_from_bytes(answers, BUCKETS.div_ceil(BUCKETS_PER_ANSWER)).unwrap();
        let mut got: Vec<(u64, Vec<u8>)> = (self.fetch.decode(&self.placed, &answers))
            .into_iter()
            .map(|(i, record)| {
                let payload = unframe_message(&record).expect("a framed payload").0;
                (i, payload.to_vec())
            })
            .collect();
        got.sort();
        got
    }

    /// The round made over gRPC (`Fetch`) by `r`: the payloads it fetched.
    async fn over_grpc(
        &self,
        detector: &mut DetectorClient<Channel>,
        r: &LightRecipient,
    ) -> Vec<(u64, Vec<u8>)> {
        let request = FetchRequest {
            key_id: r.key_id.clone(),
            query: self.query.clone(),
        };
        let answers = (detector.fetch(with_token(request, &r.token)).await)
            .unwrap()
            .into_inner()
            .answers;
        self.decode(&answers)
    }
}

async fn put_fetch_key(api: &RawClient, secret: &SecretKey, key_id: &str, token: &str) {
    let key = secret
        .fetch_secret()
        .key(&mut rand::rngs::OsRng)
        .to_bytes(&OMR_LIGHT_V1);
    let path = format!("/v1/keys/{key_id}/fetch-key");
    let r = send(api, reqwest::Method::PUT, &path, Some(token), key).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
}

async fn payloads_come_back_by_the_batch_fetch(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    let rs = [
        api.register_light().await,
        api.register_light().await,
        api.register_light().await,
    ];
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let d = OMR_LIGHT_V1.batch as u64;
    // Recipient 0 has the first and the last index of the closed epoch; every recipient has
    // one message in the open epoch.
    let to = |i: u64| -> Option<usize> {
        match i {
            0 | 99 | 4095 => Some(0),
            7 | 1000 | 2047 => Some(1),
            3 | 13 | 23 => Some(2),
            i if i >= d => Some((i - d) as usize),
            _ => None,
        }
    };
    let messages = (0..d + 3)
        .map(|i| {
            let address = to(i).map_or(stranger.clone(), |r| rs[r].secret.address());
            light_message(&address, &payload(i))
        })
        .collect();
    api.post_all(messages).await;
    let mut sizes = Vec::new();
    for (n, r) in rs.iter().enumerate() {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, d + 3));
        let want: Vec<u64> = (0..d + 3).filter(|&i| to(i) == Some(n)).collect();
        assert_eq!(got, want);
        put_fetch_key(&api, &r.secret, &r.key_id, &r.token).await;
        // The closed epoch's; the open epoch's is not in the snapshot.
        let closed: Vec<u64> = want.iter().copied().filter(|&i| i < d).collect();
        let (fetched, size) = round(&api, &r.secret, &r.key_id, &r.token, &closed).await;
        sizes.push(size);
        let expected: Vec<(u64, Vec<u8>)> = closed.iter().map(|&i| (i, payload(i))).collect();
        assert_eq!(fetched, expected, "recipient {n}");
    }
    // gRPC: the same snapshot, and a round whose answers decode to the same payloads.
    let mut detector = api.detector().await;
    let grpc_range = (detector
        .get_fetch_range(GetFetchRangeRequest::default())
        .await)
        .unwrap()
        .into_inner();
    assert_eq!(
        (grpc_range.start, grpc_range.end, grpc_range.buckets),
        (0, d, 75)
    );
    let got = Round::new(&rs[0].secret, 0..d, &[0, 4095])
        .over_grpc(&mut detector, &rs[0])
        .await;
    assert_eq!(got, vec![(0, payload(0)), (4095, payload(4095))]);
    // A round with nothing wanted looks the same.
    let (none, size) = round(&api, &rs[0].secret, &rs[0].key_id, &rs[0].token, &[]).await;
    assert!(none.is_empty());
    sizes.push(size);
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");
    let r = range(&api).await;
    assert_eq!((r["start"].as_u64(), r["end"].as_u64()), (Some(0), Some(d)));
    assert_eq!(
        (r["buckets"].as_u64(), r["records_per_round"].as_u64()),
        (Some(75), Some(50))
    );
    s.stop().await;
}

async fn the_batch_fetch_refuses_bad_input(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    let r = api.register_light().await;
    // No epoch has closed.
    refused(
        api.get("/v1/fetch").await,
        StatusCode::NOT_FOUND,
        "unknown_epoch",
    )
    .await;
    let d = OMR_LIGHT_V1.batch as u64;
    let to = SecretKey::generate(&OMR_LIGHT_V1).address();
    api.post_all((0..d).map(|i| light_message(&to, &payload(i))).collect())
        .await;
    let rng = &mut rand::rngs::OsRng;
    let fetch = r.secret.fetch_secret();
    let geometry = Geometry::new(0..d, BUCKETS);
    let query = fetch.query(&geometry, &[], rng).to_bytes(&OMR_LIGHT_V1);
    let (post, put) = (reqwest::Method::POST, reqwest::Method::PUT);
    let round_path = format!("/v1/keys/{}/fetch", r.key_id);
    let key_path = format!("/v1/keys/{}/fetch-key", r.key_id);
    let tok = Some(r.token.as_str());
    // A round before the fetch key.
    let response = send(&api, post.clone(), &round_path, tok, query.clone()).await;
    refused(response, StatusCode::CONFLICT, "no_fetch_key").await;
    // Fetch keys: cut short, not a fetch key, without and with a wrong token.
    let key = fetch.key(rng).to_bytes(&OMR_LIGHT_V1);
    let key_len = key.len();
    for bad in [key[..key.len() - 9].to_vec(), query.clone()] {
        let response = send(&api, put.clone(), &key_path, tok, bad).await;
        refused(response, StatusCode::BAD_REQUEST, "invalid_fetch_key").await;
    }
    let response = send(&api, put.clone(), &key_path, None, key.clone()).await;
    refused(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let response = send(&api, put.clone(), &key_path, Some("wrong"), key.clone()).await;
    refused(response, StatusCode::FORBIDDEN, "forbidden").await;
    // And over gRPC: a key that does not decode.
    let request = PutFetchKeyRequest {
        key_id: r.key_id.clone(),
        fetch_key: key[..1000].to_vec(),
    };
    let status = (api
        .detector()
        .await
        .put_fetch_key(with_token(request, &r.token))
        .await)
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("fetch key"), "{status:?}");
    // Nothing was stored.
    let response = send(&api, post.clone(), &round_path, tok, query.clone()).await;
    refused(response, StatusCode::CONFLICT, "no_fetch_key").await;
    let response = send(&api, put.clone(), &key_path, tok, key).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    // Queries: cut short, for a snapshot that is not served, for an unknown key.
    let response = send(&api, post.clone(), &round_path, tok, query[..100].to_vec()).await;
    refused(response, StatusCode::BAD_REQUEST, "malformed_pir_query").await;
    let other = Geometry::new(0..d - 1, BUCKETS);
    let stale = fetch.query(&other, &[], rng).to_bytes(&OMR_LIGHT_V1);
    let response = send(&api, post.clone(), &round_path, tok, stale).await;
    refused(response, StatusCode::NOT_FOUND, "unknown_epoch").await;
    let response = send(
        &api,
        post.clone(),
        "/v1/keys/nobody/fetch",
        tok,
        query.clone(),
    )
    .await;
    refused(response, StatusCode::NOT_FOUND, "unknown_key").await;
    // And the round itself works.
    let response = send(&api, post, &round_path, tok, query).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(key_len, FetchKey::encoded_len());
    s.stop().await;

    // A TFHE server (its own store) has no payload fetch.
    let tfhe_db = TestDb::sqlite().await;
    let tfhe = TestServer::start_configured(&tfhe_db, |_| {}).await;
    let api = tfhe.client();
    refused(
        api.get("/v1/fetch").await,
        StatusCode::NOT_FOUND,
        "unknown_route",
    )
    .await;
    // A keyed route checks the token first, then says the same.
    let t = api
        .register(omr_test_support::insecure_keys(2), Start::FromNow(true))
        .await;
    let path = format!("/v1/keys/{}/fetch", t.key_id);
    let response = send(&api, reqwest::Method::POST, &path, None, vec![0]).await;
    refused(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let response = send(&api, reqwest::Method::POST, &path, Some(&t.token), vec![0]).await;
    refused(response, StatusCode::NOT_FOUND, "unknown_route").await;
    tfhe.stop().await;
}

/// Ten messages on a quiet board, none of them in a closed epoch: three recipients (one with
/// the first and the last index) and an idle fourth fetch from the open epoch's snapshot.
async fn open_epoch_payloads_come_back_on_a_quiet_board(db: &TestDb) {
    let s = light_server(db).await;
    let api = s.client();
    // An empty open epoch has no snapshot; nor is there a closed one.
    refused(
        api.get("/v1/fetch/open").await,
        StatusCode::NOT_FOUND,
        "unknown_epoch",
    )
    .await;
    let rs = [
        api.register_light().await,
        api.register_light().await,
        api.register_light().await,
        api.register_light().await,
    ];
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let to = |i: u64| -> Option<usize> {
        match i {
            0 | 9 => Some(0),
            3 | 5 => Some(1),
            7 | 10 => Some(2),
            _ => None,
        }
    };
    let message = |i: u64| {
        let address = to(i).map_or(stranger.clone(), |r| rs[r].secret.address());
        light_message(&address, &payload(i))
    };
    api.post_all((0..10).map(message).collect()).await;
    refused(
        api.get("/v1/fetch").await,
        StatusCode::NOT_FOUND,
        "unknown_epoch",
    )
    .await;
    let open = range_at(&api, "/v1/fetch/open").await;
    assert_eq!(
        (open["start"].as_u64(), open["end"].as_u64()),
        (Some(0), Some(10))
    );
    assert_eq!(open["buckets"].as_u64(), Some(75));

    let mut sizes = Vec::new();
    for (n, r) in rs.iter().enumerate() {
        put_fetch_key(&api, &r.secret, &r.key_id, &r.token).await;
        let want: Vec<u64> = (0..10).filter(|&i| to(i) == Some(n)).collect();
        let (got, size) = round_at(
            &api,
            "/v1/fetch/open",
            &r.secret,
            &r.key_id,
            &r.token,
            &want,
        )
        .await;
        let expected: Vec<(u64, Vec<u8>)> = want.iter().map(|&i| (i, payload(i))).collect();
        assert_eq!(got, expected, "recipient {n}");
        sizes.push(size);
    }
    // The idle recipient's round (nothing wanted) is the same size as the others'.
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");

    // gRPC: the same snapshot, and a round that decodes to the same payloads.
    let mut detector = api.detector().await;
    let request = GetFetchRangeRequest {
        open: true,
        min_end: None,
    };
    let g = (detector.get_fetch_range(request).await)
        .unwrap()
        .into_inner();
    assert_eq!((g.start, g.end, g.buckets), (0, 10, 75));
    let r1 = &rs[1];
    let round = Round::new(&r1.secret, 0..10, &[3, 5]);
    let got = round.over_grpc(&mut detector, r1).await;
    assert_eq!(got, vec![(3, payload(3)), (5, payload(5))]);

    // The board grows: the next request for the head waits for a rebuild that holds it.
    api.post_all(vec![message(10)]).await;
    let r2 = &rs[2];
    let (got, _) = round_at(
        &api,
        "/v1/fetch/open",
        &r2.secret,
        &r2.key_id,
        &r2.token,
        &[10],
    )
    .await;
    assert_eq!(got, vec![(10, payload(10))]);
    // `min_end` below the snapshot's end is served by it; a malformed one is refused.
    let held = range_at(&api, "/v1/fetch/open?min_end=3").await;
    assert_eq!(held["end"].as_u64(), Some(11));
    refused(
        api.get("/v1/fetch/open?min_end=soon").await,
        StatusCode::BAD_REQUEST,
        "malformed_query",
    )
    .await;

    // Three more rebuilds: the snapshot of 0..10 is no longer kept, and a round for it is
    // refused before any work (it charged nothing and stored nothing).
    for i in 11..14 {
        api.post_all(vec![message(i)]).await;
        let r = range_at(&api, "/v1/fetch/open").await;
        assert_eq!(r["end"].as_u64(), Some(i + 1));
    }
    let path = format!("/v1/keys/{}/fetch", r1.key_id);
    let stale = send(
        &api,
        reqwest::Method::POST,
        &path,
        Some(&r1.token),
        round.query,
    )
    .await;
    refused(stale, StatusCode::NOT_FOUND, "unknown_epoch").await;
    s.stop().await;
}
