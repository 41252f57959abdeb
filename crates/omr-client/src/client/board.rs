//! The public board: the server's parameters and posting messages (HTTP).

use base64::Engine as _;
use omr_api::http::{BatchIn, BatchPosted, MessageIn, Posted};
use omr_core::{ClueKey, Message};

use super::{Client, ServerParams};
use crate::error::Result;

impl Client {
    /// The server's parameter set and limits.
    pub async fn params(&self) -> Result<ServerParams> {
        self.retrying(|| async {
            let r = self
                .http_send(self.http.get(self.url("/v1/params")))
                .await?;
            self.http_json(r).await
        })
        .await
    }

    /// Make a clue for the recipient whose public clue key is `to`, and post it with `payload`.
    /// Returns the message's board index.
    pub async fn send(&self, to: &ClueKey, payload: &[u8]) -> Result<u64> {
        let message = Message::new(to.make_clue(), payload.to_vec())?;
        self.post(&message).await
    }

    /// Post one message; returns its board index. Retried only when no connection could be made
    /// (a request that reached the server is never sent twice: it would post twice).
    pub async fn post(&self, message: &Message) -> Result<u64> {
        let body = message.to_bytes();
        let posted: Posted = self
            .retrying_unsent(|| async {
                let req = self
                    .http
                    .post(self.url("/v1/messages"))
                    .header("content-type", "application/octet-stream")
                    .body(body.clone());
                let r = self.http_send(req).await?;
                self.http_json(r).await
            })
            .await?;
        Ok(posted.index)
    }

    /// Post messages in one atomic batch; returns their board indices, in order.
    pub async fn post_batch(&self, messages: &[Message]) -> Result<std::ops::Range<u64>> {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let body = BatchIn {
            messages: messages
                .iter()
                .map(|m| MessageIn {
                    clue: b64(&m.clue.to_bytes()),
                    payload: b64(&m.payload),
                })
                .collect(),
        };
        let posted: BatchPosted = self
            .retrying_unsent(|| async {
                let r = self
                    .http_send(self.http.post(self.url("/v1/messages/batch")).json(&body))
                    .await?;
                self.http_json(r).await
            })
            .await?;
        Ok(posted.first_index..posted.first_index + posted.count)
    }
}
