//! omr-light-v1 payloads by the batch fetch (`omr_light::fetch`), on a server that takes no
//! attachments (the light lane's default): the payloads of every closed epoch are one snapshot,
//! and a round fetches up to 50 of them at once, in 75 buckets, each asking for one record.
//!
//! What the server sees is the same for every recipient: one round of the same shape
//! (`GET /v1/fetch`, then a query of ≈ 64 KB, answers of 160 KiB) each time its retrievals reach
//! an epoch that has closed and been detected through — whether it has no message there or
//! fifty. More than fit one round take more rounds (which the server does see). The round needs
//! the key's fetch key, uploaded the first time the server asks for it (3.3 MB, once).

use omr_api::http::FetchRange;
use omr_api::ErrorCode;
use omr_core::Retrieved;
use omr_light::fetch::layout::{assign, Geometry};
use omr_light::fetch::wire::{answers_from_bytes, answers_len};
use omr_light::fetch::FetchSecret;

use super::light::{ready_epochs, LightFetched, PirFetch};
use super::Client;
use crate::error::{Api, Error, Result};
use crate::keydir::{DigestState, Registration};

impl Client {
    /// Fetch the payloads of `state`'s pending messages in closed, detected epochs, as the
    /// module says.
    pub(crate) async fn fetch_light_batch(
        &self,
        secret: &omr_light::SecretKey,
        reg: &Registration,
        state: &mut DigestState,
        board_head: u64,
        epoch_len: u64,
    ) -> Result<LightFetched> {
        let mut out = LightFetched::default();
        let (epoch_len, ready, next) = ready_epochs(reg, state, board_head, epoch_len);
        let waiting = |state: &DigestState| -> Vec<u64> {
            (state.pending_payloads.iter().copied())
                .filter(|i| i / epoch_len < ready)
                .collect()
        };
        if ready <= next && waiting(state).is_empty() {
            return Ok(out);
        }
        let fetch_secret = secret.fetch_secret();
        let mut pir = PirFetch {
            epochs: ready.saturating_sub(next) as usize,
            ..PirFetch::default()
        };
        loop {
            let range = self.fetch_range().await?;
            let mut wanted = waiting(state);
            // A message retention deleted before its payload was fetched is gone.
            let lost: Vec<u64> = wanted
                .iter()
                .copied()
                .filter(|&i| i < range.start)
                .collect();
            if !lost.is_empty() {
                tracing::warn!(
                    ?lost,
                    "payloads deleted by retention before they were fetched"
                );
                state.pending_payloads.retain(|i| !lost.contains(i));
            }
            wanted.retain(|&i| (range.start..range.end).contains(&i));
            wanted.truncate(range.records_per_round as usize);
            let got = self
                .fetch_round(&fetch_secret, reg, &range, &wanted, &mut pir)
                .await?;
            for (index, payload) in got {
                out.messages.push(Retrieved { index, payload });
                state.pending_payloads.retain(|&i| i != index);
            }
            pir.queries += 1;
            if waiting(state).iter().all(|&i| i >= range.end) {
                break;
            }
        }
        out.pir = Some(pir);
        state.next_pir_epoch = Some(next.max(ready));
        Ok(out)
    }

    /// `GET /v1/fetch`: the snapshot served now.
    async fn fetch_range(&self) -> Result<FetchRange> {
        self.retrying(|| async {
            let r = self.http_send(self.http.get(self.url("/v1/fetch"))).await?;
            self.http_json::<FetchRange>(r).await
        })
        .await
    }

    /// One round for `wanted` (at most a round's records) against `range`: the payloads that
    /// came back, by index. The fetch key is uploaded when the server has none.
    async fn fetch_round(
        &self,
        fetch_secret: &FetchSecret,
        reg: &Registration,
        range: &FetchRange,
        wanted: &[u64],
        pir: &mut PirFetch,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let buckets = range.buckets as usize;
        let geometry = Geometry::new(range.start..range.end, buckets);
        if geometry.rows != range.rows as usize {
            let why = format!(
                "{} rows for {}..{}, this client makes {}",
                range.rows, range.start, range.end, geometry.rows
            );
            return Err(self.protocol(Api::Http, format!("the fetch snapshot: {why}")));
        }
        let (placed, left) = assign(wanted, buckets);
        if !left.is_empty() {
            tracing::info!(
                ?left,
                "records for the next round (their buckets were taken)"
            );
        }
        let p = self.light_params(reg)?;
        let query = fetch_secret.query(&geometry, &placed, &mut rand::rngs::OsRng);
        let body = query.to_bytes(p);
        let url = self.url(&format!("/v1/keys/{}/fetch", reg.key_id));
        let mut uploaded = false;
        let answers = loop {
            let sent = self
                .retrying(|| async {
                    let req = (self.http.post(&url))
                        .bearer_auth(&reg.access_token)
                        .header("content-type", "application/octet-stream")
                        .body(body.clone());
                    let r = self
                        .http_check(self.http_send(req).await?, &reg.key_id)
                        .await?;
                    self.read_capped(r, answers_len(buckets) as u64, None).await
                })
                .await;
            match sent {
                Err(Error::Rejected { ref code, .. })
                    if !uploaded && code == ErrorCode::NoFetchKey.as_str() =>
                {
                    self.upload_fetch_key(fetch_secret, reg, pir).await?;
                    uploaded = true;
                }
                other => break other?,
            }
        };
        pir.bytes_up += body.len() as u64;
        pir.bytes_down += answers.len() as u64;
        let count = buckets.div_ceil(omr_light::fetch::BUCKETS_PER_ANSWER);
        let answers = answers_from_bytes(&answers, count)
            .map_err(|e| self.protocol(Api::Http, format!("the fetch answers: {e}")))?;
        (fetch_secret.decode(&placed, &answers).into_iter())
            .map(|(index, record)| Ok((index, self.unframed(index, &record)?.0.to_vec())))
            .collect()
    }

    fn light_params(&self, reg: &Registration) -> Result<&'static omr_light::LightParams> {
        omr_light::LightParams::by_name(&reg.param_set).ok_or_else(|| {
            let why = format!(
                "{} is not omr-light-v1: it has no payload fetch",
                reg.param_set
            );
            self.protocol(Api::Http, why)
        })
    }

    /// `PUT /v1/keys/{key_id}/fetch-key`: the one-time key of the payload fetch (counted in
    /// `pir.key_bytes_up`).
    pub async fn upload_fetch_key(
        &self,
        fetch_secret: &FetchSecret,
        reg: &Registration,
        pir: &mut PirFetch,
    ) -> Result<()> {
        let p = self.light_params(reg)?;
        let key = fetch_secret.key(&mut rand::rngs::OsRng).to_bytes(p);
        let url = self.url(&format!("/v1/keys/{}/fetch-key", reg.key_id));
        self.retrying(|| async {
            let req = (self.http.put(&url))
                .bearer_auth(&reg.access_token)
                .header("content-type", "application/octet-stream")
                .body(key.clone());
            self.http_check(self.http_send(req).await?, &reg.key_id)
                .await?;
            Ok(())
        })
        .await?;
        pir.key_bytes_up += key.len() as u64;
        tracing::info!(key_id = %reg.key_id, bytes = key.len(), "fetch key uploaded");
        Ok(())
    }
}
