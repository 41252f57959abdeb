//! omr-light-v1 through omrd's APIs, for the tests of that lane: a light recipient registered
//! over the gRPC upload stream, messages posted as JSON batches, and the digest once detection
//! caught up, decoded to the board indices it finds pertinent.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_light::{Address, Digest, SecretKey, OMR_LIGHT_V1};
use omr_proto::v1::registration_header::Start;
use omr_proto::v1::RegisterDetectionKeyResponse;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::RawClient;

/// A light recipient: its secret key and the server's id and token for it.
#[derive(Debug)]
pub struct LightRecipient {
    pub secret: SecretKey,
    pub key_id: String,
    pub token: String,
}

impl RawClient {
    /// Register a fresh omr-light-v1 key from board index 0 over the gRPC upload stream.
    pub async fn register_light(&self) -> LightRecipient {
        self.register_light_key(SecretKey::generate(&OMR_LIGHT_V1))
            .await
    }

    /// Register `secret`'s detection key from board index 0.
    pub async fn register_light_key(&self, secret: SecretKey) -> LightRecipient {
        let key = secret.detection_key().to_bytes();
        let registered = self
            .try_register_light_bytes(key, Start::StartIndex(0))
            .await
            .unwrap_or_else(|e| panic!("register a light key: {e:?}"));
        LightRecipient {
            secret,
            key_id: registered.key_id,
            token: registered.access_token,
        }
    }

    /// Upload `key` as an omr-light-v1 detection key (k̄ = 1) starting at `start`: the
    /// registration, or the server's refusal.
    pub async fn try_register_light_bytes(
        &self,
        key: Vec<u8>,
        start: Start,
    ) -> Result<RegisterDetectionKeyResponse, tonic::Status> {
        let requests =
            omr_proto::registration_stream(OMR_LIGHT_V1.name, 1, start, None, key.into());
        let registered = self
            .detector()
            .await
            .register_detection_key(tokio_stream::iter(requests))
            .await?;
        Ok(registered.into_inner())
    }

    /// Post `messages` (JSON, see [`light_message`]) in batches of at most 1,000; the index of
    /// the first.
    pub async fn post_all(&self, messages: Vec<Value>) -> u64 {
        let mut first = None;
        for chunk in messages.chunks(1000) {
            let (status, body) = self
                .post_json("/v1/messages/batch", &json!({ "messages": chunk }))
                .await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            first.get_or_insert(body["first_index"].as_u64().expect("first_index"));
        }
        first.expect("at least one message")
    }

    /// The recipient's digest once detection has reached the board head: its range and the
    /// board indices it finds pertinent (see [`RawClient::caught_up_bytes`]).
    pub async fn light_caught_up(&self, r: &LightRecipient) -> (u64, u64, Vec<u64>) {
        let (start, end, bytes) = self.caught_up_bytes(&r.key_id, &r.token, None).await;
        let digest = Digest::from_bytes(&bytes).expect("a light digest decodes");
        assert_eq!(
            digest.messages(),
            end - start,
            "the digest covers its range"
        );
        (start, end, r.secret.pertinent(&digest))
    }
}

/// A message to `to` with a fresh clue, as the JSON the board takes.
pub fn light_message(to: &Address, payload: &[u8]) -> Value {
    json!({ "clue": B64.encode(to.clue().to_bytes()), "payload": B64.encode(payload) })
}

/// The messages for board indices `indices`, each (payload: its index) to one of `recipients`
/// drawn by `rng` one time in `one_in` for each, to `stranger` otherwise; each index a recipient
/// gets is appended to its `want`.
pub fn light_messages_to(
    rng: &mut impl rand::Rng,
    recipients: &[LightRecipient],
    stranger: &Address,
    indices: std::ops::Range<u64>,
    one_in: usize,
    want: &mut [Vec<u64>],
) -> Vec<Value> {
    indices
        .map(|i| {
            let to = rng.gen_range(0..one_in);
            let address = match recipients.get(to) {
                Some(r) => {
                    want[to].push(i);
                    r.secret.address()
                }
                None => stranger.clone(),
            };
            light_message(&address, format!("{i}").as_bytes())
        })
        .collect()
}
