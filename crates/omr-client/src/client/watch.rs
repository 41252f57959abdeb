//! Waiting for a key's next detected messages: one long-poll over HTTP
//! ([`Client::wait_for_progress`]) or a stream of statuses over gRPC ([`Client::watch_status`]).
//! While either waits, the server counts the recipient as online and schedules its key first.

use std::time::Duration;

use futures::{Stream, StreamExt as _};
use omr_api::http::{KeyStatus, MAX_WAIT_SECS};
use omr_proto::v1::WatchKeyStatusRequest;

use super::Client;
use crate::error::Result;
use crate::keydir::Registration;
use crate::scheme::Secret;

/// How long one wait of [`Client::wait_for_news`] lasts on a TFHE key before it is asked again
/// (the server's cap).
const NEWS_WAIT: Duration = Duration::from_secs(MAX_WAIT_SECS);
/// How often a follower of an omr-light-v1 key reads the board ([`Client::wait_for_news`]).
pub const LIGHT_FOLLOW_POLL: Duration = Duration::from_secs(1);

impl Client {
    /// Wait until the server has detected past board index `past` for the key (its cursor is
    /// greater than `past`), or `timeout` passes (the server waits at most 60 s: a longer
    /// timeout is cut to that), and return the key's status then. Compare the returned cursor
    /// with `past` to tell which happened. `GET /v1/keys/{key_id}/status?wait_past=…`.
    pub async fn wait_for_progress(
        &self,
        reg: &Registration,
        past: u64,
        timeout: Duration,
    ) -> Result<KeyStatus> {
        let secs = timeout.as_secs().min(MAX_WAIT_SECS);
        // The server answers after `secs` at the latest: allow that on top of a normal request.
        let deadline = Duration::from_secs(secs) + self.options.request_timeout;
        self.retrying(|| async {
            let req = self
                .http
                .get(self.url(&format!("/v1/keys/{}/status", reg.key_id)))
                .query(&[("wait_past", past), ("timeout_secs", secs)])
                .timeout(deadline)
                .bearer_auth(&reg.access_token);
            let r = self.http_send(req).await?;
            let r = self.http_check(r, &reg.key_id).await?;
            self.json_body(r).await
        })
        .await
    }

    /// For a recipient that follows its key (`omr digest --follow`, the bindings' `follow`):
    /// wait until a [`Client::retrieve`] may find something past board index `past`.
    ///
    /// - TFHE: a long-poll on the key's detection ([`Client::wait_for_progress`], 60 s at
    ///   most): `Some(cursor)` once the server has detected past `past`, `None` when the wait
    ///   ended first (wait again).
    /// - omr-light-v1: [`LIGHT_FOLLOW_POLL`] passes, then `Some(0)`: a recipient that close to
    ///   the head reads the new board messages itself on its next retrieval, so no long-poll
    ///   makes the server detect its open batch.
    ///
    /// After retrieving, follow on from the larger of the state's `next_from` and the cursor.
    pub async fn wait_for_news<'s>(
        &self,
        secret: impl Into<Secret<'s>>,
        reg: &Registration,
        past: u64,
    ) -> Result<Option<u64>> {
        if matches!(secret.into(), Secret::Light(_)) {
            tokio::time::sleep(LIGHT_FOLLOW_POLL).await;
            return Ok(Some(0));
        }
        let status = self.wait_for_progress(reg, past, NEWS_WAIT).await?;
        Ok((status.cursor > past).then_some(status.cursor))
    }

    /// The key's status now, then again each time the server's detection moves its cursor, for
    /// as long as the stream is read (gRPC `WatchKeyStatus`). The stream ends after an error,
    /// e.g. when the server shuts down (`Error::Server` with code `Unavailable`): watch again.
    pub async fn watch_status(
        &self,
        reg: &Registration,
    ) -> Result<impl Stream<Item = Result<KeyStatus>> + Send + Unpin + 'static> {
        let mut c = self.grpc().await?;
        let req = self.with_token(
            reg,
            WatchKeyStatusRequest {
                key_id: reg.key_id.clone(),
            },
        )?;
        let stream = c
            .watch_key_status(req)
            .await
            .map_err(|s| self.grpc_error(s, &reg.key_id))?
            .into_inner();
        let (client, key_id) = (self.clone(), reg.key_id.clone());
        Ok(stream.map(move |item| {
            item.map(KeyStatus::from)
                .map_err(|s| client.grpc_error(s, &key_id))
        }))
    }
}
