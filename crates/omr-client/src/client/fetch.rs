//! omr-light-v1 payloads by the batch fetch (`omr_light::fetch`), on a server that takes no
//! attachments (the light lane's default). The server serves two snapshots: every closed,
//! retained epoch (`GET /v1/fetch`) and the open epoch so far (`GET /v1/fetch/open`, rebuilt
//! within about a second when a request needs newer messages). A round fetches up to 50
//! payloads of one snapshot at once, in 75 buckets, each asking for one record.
//!
//! What the server sees does not depend on what the recipient has: each retrieval whose digests
//! reached new messages makes one round of the same shape (a query of ≈ 64 KB, answers of
//! 160 KiB) on each snapshot those messages are in — the closed one, the open one or both —
//! whether it has no message there or fifty. More than fit one round take more rounds (which
//! the server does see), and so does a payload a round could not fetch (a later retrieval makes
//! another round for it). A retrieval that read the board's tail itself (`client/tail.rs`) has
//! its payloads already and makes no round for that part. The round needs the key's fetch key,
//! uploaded the first time the server asks for it (3.3 MB, once).

use omr_api::http::FetchRange;
use omr_api::ErrorCode;
use omr_core::Retrieved;
use omr_light::fetch::layout::{assign, Geometry};
use omr_light::fetch::wire::{answers_from_bytes, answers_len};
use omr_light::fetch::FetchSecret;

use super::light::{LightFetched, PirFetch};
use super::Client;
use crate::error::{Api, Error, Result};
use crate::keydir::{DigestState, Registration};

/// Which snapshot a round is made against.
#[derive(Debug, Clone, Copy)]
enum Snapshot {
    /// Every closed, retained epoch.
    Closed,
    /// The open epoch, holding at least the messages before this index.
    Open { min_end: u64 },
}

/// Times a round is made again after its snapshot was replaced before it was answered.
const STALE_RETRIES: u32 = 3;

impl Client {
    /// Fetch the payloads of `state`'s pending messages: one round on each snapshot that
    /// `digested` (the range this retrieval's digests covered) reached, and rounds for payloads
    /// left over from before, as the module says.
    pub(crate) async fn fetch_light_batch(
        &self,
        secret: &omr_light::SecretKey,
        reg: &Registration,
        state: &mut DigestState,
        board_head: u64,
        epoch_len: u64,
        digested: (u64, u64),
    ) -> Result<LightFetched> {
        let mut out = LightFetched::default();
        let epoch_len = epoch_len.max(1);
        let open_start = board_head / epoch_len * epoch_len;
        let (a, b) = digested;
        let pending = &state.pending_payloads;
        let closed = (a < b && a < open_start) || pending.iter().any(|&i| i < open_start);
        let open = (a < b && b > open_start) || pending.iter().any(|&i| i >= open_start);
        if !closed && !open {
            return Ok(out);
        }
        let fetch_secret = secret.fetch_secret();
        let closed_end = b.min(open_start);
        let mut pir = PirFetch {
            epochs: match a < closed_end {
                true => (closed_end.div_ceil(epoch_len) - a / epoch_len) as usize,
                false => 0,
            },
            ..PirFetch::default()
        };
        if closed {
            let snapshot = Snapshot::Closed;
            (self.rounds(&fetch_secret, reg, state, snapshot, &mut pir, &mut out)).await?;
        }
        if open {
            let newest = state.pending_payloads.iter().map(|&i| i + 1).max();
            let min_end = newest.unwrap_or(0).max(b).min(board_head);
            let snapshot = Snapshot::Open { min_end };
            (self.rounds(&fetch_secret, reg, state, snapshot, &mut pir, &mut out)).await?;
        }
        out.pir = Some(pir);
        Ok(out)
    }

    /// Rounds against `snapshot` until none of `state`'s pending payloads in it is left (one
    /// round at least).
    async fn rounds(
        &self,
        fetch_secret: &FetchSecret,
        reg: &Registration,
        state: &mut DigestState,
        snapshot: Snapshot,
        pir: &mut PirFetch,
        out: &mut LightFetched,
    ) -> Result<()> {
        let mut stale = 0;
        loop {
            let range = match snapshot {
                Snapshot::Closed => self.fetch_range(None).await?,
                Snapshot::Open { min_end } => self.fetch_range(Some(min_end)).await?,
            };
            let inside = |state: &DigestState| -> Vec<u64> {
                (state.pending_payloads.iter().copied())
                    .filter(|i| (range.start..range.end).contains(i))
                    .collect()
            };
            if let Snapshot::Closed = snapshot {
                // A message retention deleted before its payload was fetched is gone.
                let lost: Vec<u64> = (state.pending_payloads.iter().copied())
                    .filter(|&i| i < range.start)
                    .collect();
                if !lost.is_empty() {
                    tracing::warn!(
                        ?lost,
                        "payloads deleted by retention before they were fetched"
                    );
                    state.pending_payloads.retain(|i| !lost.contains(i));
                }
            }
            let mut wanted = inside(state);
            wanted.truncate(range.records_per_round as usize);
            let got = match self
                .fetch_round(fetch_secret, reg, &range, &wanted, pir)
                .await
            {
                Err(Error::Rejected { ref code, .. })
                    if code == ErrorCode::UnknownEpoch.as_str() && stale < STALE_RETRIES =>
                {
                    stale += 1;
                    continue; // the snapshot was replaced before the round came: again
                }
                other => other?,
            };
            for (index, payload) in got {
                out.messages.push(Retrieved { index, payload });
                state.pending_payloads.retain(|&i| i != index);
            }
            pir.queries += 1;
            if inside(state).is_empty() {
                return Ok(());
            }
        }
    }

    /// `GET /v1/fetch` (the closed epochs), or with `min_end` `GET /v1/fetch/open`.
    async fn fetch_range(&self, min_end: Option<u64>) -> Result<FetchRange> {
        self.retrying(|| async {
            let req = match min_end {
                None => self.http.get(self.url("/v1/fetch")),
                Some(m) => (self.http.get(self.url("/v1/fetch/open"))).query(&[("min_end", m)]),
            };
            let r = self.http_send(req).await?;
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
