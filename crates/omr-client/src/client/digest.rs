//! Downloading a key's digest (`GET /v1/digests/{key_id}`) and checking what the headers say.

use omr_api::headers;

use super::{Client, Progress};
use crate::error::{Api, Result};
use crate::keydir::Registration;
use crate::scheme::Digest;

/// A downloaded digest and the range it covers (`GET /v1/digests/{key_id}`).
#[derive(Debug, Clone)]
pub struct FetchedDigest {
    /// The digest, of the key's scheme.
    pub digest: Digest,
    pub encoded_bytes: usize,
    pub range_start: u64,
    pub range_end: u64,
    pub board_head: u64,
    pub lag: u64,
    /// Epoch length of the server's accumulators (digests start on epoch boundaries).
    pub epoch_length: u64,
    /// Set when the key's detected range continues beyond this digest.
    pub next_from: Option<u64>,
}

impl Client {
    /// Download the key's digest from the epoch holding `from` (default: the key's start) up to
    /// the first epoch boundary at or after `to` (default: everything detected, at most the
    /// parameter set's range per digest). `progress` sees the bytes received.
    pub async fn digest(
        &self,
        reg: &Registration,
        from: Option<u64>,
        to: Option<u64>,
        progress: Option<Progress>,
    ) -> Result<FetchedDigest> {
        // A digest of the key's parameter set and k̄ has a largest size: never read more.
        let max_bytes = Digest::max_encoded_len(&reg.param_set, reg.kbar)? as u64;
        let mut query = Vec::new();
        if let Some(f) = from {
            query.push(("from", f));
        }
        if let Some(t) = to {
            query.push(("to", t));
        }
        self.retrying(|| async {
            let req = self
                .http
                .get(self.url(&format!("/v1/digests/{}", reg.key_id)))
                .query(&query)
                .bearer_auth(&reg.access_token);
            let r = self.http_send(req).await?;
            let r = self.http_check(r, &reg.key_id).await?;
            let header = |name: &str| -> Result<Option<u64>> {
                r.headers()
                    .get(name)
                    .map(|v| {
                        v.to_str().ok().and_then(|s| s.parse().ok()).ok_or_else(|| {
                            self.protocol(Api::Http, format!("header {name} is not a number"))
                        })
                    })
                    .transpose()
            };
            let required = |name: &str| -> Result<u64> {
                header(name)?
                    .ok_or_else(|| self.protocol(Api::Http, format!("header {name} is missing")))
            };
            let (range_start, range_end) = (
                required(headers::RANGE_START)?,
                required(headers::RANGE_END)?,
            );
            let (board_head, lag) = (required(headers::BOARD_HEAD)?, required(headers::LAG)?);
            let epoch_length = required(headers::EPOCH_LENGTH)?;
            let next_from = header(headers::NEXT_FROM)?;
            // Content-Length is the server's word: allocate and read at most the digest's size.
            let body = self.read_capped(r, max_bytes, progress.as_ref()).await?;
            let digest = Digest::from_bytes(&reg.param_set, &body)?;
            let covers = digest.range().unwrap_or((range_start, range_start));
            if covers != (range_start, range_end) {
                return Err(self.protocol(
                    Api::Http,
                    format!(
                        "digest covers [{}, {}) but the headers say [{range_start}, {range_end})",
                        covers.0, covers.1
                    ),
                ));
            }
            Ok(FetchedDigest {
                digest,
                encoded_bytes: body.len(),
                range_start,
                range_end,
                board_head,
                lag,
                epoch_length,
                next_from,
            })
        })
        .await
    }
}
