//! Retrieval on omr-light-v1 from a server that takes attachments: the digest says which board
//! indices are the recipient's, not what they carry; the payloads and attachments come by PIR
//! from each closed epoch's database, whose records are whole messages. (A server that takes
//! none, the default, serves payloads by the batch fetch of `fetch`.)
//!
//! What the server sees is the same for every recipient: for every epoch a recipient's
//! retrievals cover, once the epoch has closed and detection has covered it, the epoch's hint and
//! exactly [`LIGHT_QUERIES_PER_EPOCH`] queries, one per record wanted and dummies for the rest —
//! whether the recipient has no message there or eight. An epoch holding more than that many of
//! the recipient's messages takes more rounds, on later calls (which the server does see).
//!
//! A recipient near the head reads the board's tail itself (`tail`), attachments included: it
//! has those messages whole at once, the epoch open or not. A letter whose attachment did not
//! come so ([`DigestState::pending_attachments`]) has its record fetched in its epoch's one
//! round, beside the payloads still wanted there. A message the digest found in an open epoch
//! is reported as pending ([`crate::Retrieval::pending`]) and fetched by the first call after
//! its epoch closes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use omr_core::Retrieved;
use omr_light::LightParams;
use omr_pir::attachment::unframe_message;
use omr_pir::{Answer, Query, Shape, PIR_V1};
use serde::Serialize;

use super::Client;
use crate::error::{Api, Result};
use crate::keydir::{DigestState, Registration};

/// PIR queries a recipient makes of each epoch it fetches payloads from (real ones and
/// dummies): the same for every recipient, so the count says nothing.
pub const LIGHT_QUERIES_PER_EPOCH: usize = 8;

/// What fetching omr-light-v1 payloads by PIR cost in one retrieval.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct PirFetch {
    /// Epochs the fetch covered for the first time.
    pub epochs: usize,
    /// Queries made: [`LIGHT_QUERIES_PER_EPOCH`] per epoch on a server that takes attachments
    /// (each epoch its own database), one per round of the batch fetch otherwise.
    pub queries: usize,
    /// Bytes downloaded (hints, answers) and uploaded (queries).
    pub bytes_down: u64,
    pub bytes_up: u64,
    /// Bytes of the fetch key uploaded (once per key, on its first batch fetch).
    pub key_bytes_up: u64,
}

/// What one retrieval's PIR rounds fetched.
#[derive(Debug, Default)]
pub(crate) struct LightFetched {
    pub messages: Vec<Retrieved>,
    /// Sealed attachments that came with their payloads, by index.
    pub attachments: BTreeMap<u64, Vec<u8>>,
    /// `None` when no round was made.
    pub pir: Option<PirFetch>,
}

/// (epoch length, first epoch not ready, first epoch not yet fetched from): an epoch is ready
/// once it closed on a board of `board_head` messages and detection covered it.
pub(super) fn ready_epochs(
    reg: &Registration,
    state: &DigestState,
    board_head: u64,
    epoch_len: u64,
) -> (u64, u64, u64) {
    let epoch_len = epoch_len.max(1);
    let ready = board_head.min(state.next_from) / epoch_len;
    let next = state.next_pir_epoch.unwrap_or(reg.start_index / epoch_len);
    (epoch_len, ready, next)
}

impl Client {
    /// Fetch by PIR the payloads of `state`'s pending messages from every epoch that is ready
    /// (closed on a board of `board_head` messages, and detected through), as the module says,
    /// and in the same rounds the records of `state`'s pending attachments.
    pub(crate) async fn fetch_light_payloads(
        &self,
        reg: &Registration,
        state: &mut DigestState,
        board_head: u64,
        epoch_len: u64,
    ) -> Result<LightFetched> {
        let mut out = LightFetched::default();
        let (epoch_len, ready, next) = ready_epochs(reg, state, board_head, epoch_len);
        let attached: Vec<u64> = (state.pending_attachments.iter().map(|p| p.index))
            .filter(|i| !state.pending_payloads.contains(i))
            .collect();
        let mut epochs: BTreeSet<u64> = (next..ready).collect();
        epochs.extend(
            (state.pending_payloads.iter())
                .chain(state.pending_attachments.iter().map(|p| &p.index))
                .map(|i| i / epoch_len)
                .filter(|&e| e < ready),
        );
        if !epochs.is_empty() {
            let p = LightParams::by_name(&reg.param_set)
                .ok_or_else(|| self.protocol(Api::Http, "not an omr-light-v1 key".into()))?;
            let max_attachment = self.params().await?.max_attachment_bytes;
            let shape = Shape::for_messages(epoch_len as usize, p.payload_bytes, max_attachment)
                .map_err(|e| self.protocol(Api::Http, format!("its PIR settings: {e}")))?;
            let mut pir = PirFetch::default();
            for epoch in epochs {
                let range = epoch * epoch_len..(epoch + 1) * epoch_len;
                // The payloads still wanted, then the attachments (none is both).
                let wanted: Vec<u64> = (state.pending_payloads.iter().chain(&attached))
                    .copied()
                    .filter(|i| range.contains(i))
                    .take(LIGHT_QUERIES_PER_EPOCH)
                    .collect();
                let records = self.pir_round(epoch, shape, &wanted, &mut pir).await?;
                for (index, record) in wanted.into_iter().zip(records) {
                    let (payload, attachment) = self.unframed(index, &record)?;
                    let awaited = state.pending_attachments.iter().any(|p| p.index == index);
                    if !attachment.is_empty() || awaited {
                        out.attachments.insert(index, attachment.to_vec());
                    }
                    if state.pending_payloads.contains(&index) {
                        out.messages.push(Retrieved {
                            index,
                            payload: payload.to_vec(),
                        });
                        state.pending_payloads.retain(|&i| i != index);
                    }
                }
            }
            out.pir = Some(pir);
        }
        state.next_pir_epoch = Some(next.max(ready));
        Ok(out)
    }

    /// The payload and attachment a PIR record of message `index` holds (either fetch).
    pub(super) fn unframed<'r>(
        &self,
        index: u64,
        record: &'r [u8],
    ) -> Result<(&'r [u8], &'r [u8])> {
        unframe_message(record).ok_or_else(|| {
            let why = "its lengths run past the record (the fetch decoded wrong)";
            self.protocol(
                Api::Http,
                format!("the PIR record of message {index}: {why}"),
            )
        })
    }

    /// One round in `epoch`: its hint, then [`LIGHT_QUERIES_PER_EPOCH`] queries, those for
    /// `wanted` first and dummies after (the server cannot tell them apart); the records of
    /// `wanted`, in order.
    async fn pir_round(
        &self,
        epoch: u64,
        shape: Shape,
        wanted: &[u64],
        pir: &mut PirFetch,
    ) -> Result<Vec<Vec<u8>>> {
        let hint = Arc::new(self.pir_hint(epoch, shape, None).await?);
        pir.epochs += 1;
        pir.bytes_down += shape.hint_bytes(&PIR_V1) as u64;
        let records: Vec<Option<usize>> = (0..LIGHT_QUERIES_PER_EPOCH)
            .map(|q| wanted.get(q).map(|&i| (i % shape.records as u64) as usize))
            .collect();
        let h = hint.clone();
        let queries = tokio::task::spawn_blocking(move || {
            let rng = &mut rand::rngs::OsRng;
            (records.into_iter())
                .map(|r| match r {
                    Some(r) => h.query(r, rng).map(|(q, f)| (q, Some(f))),
                    None => Ok(h.dummy_query(rng)).map(|(q, _)| (q, None)),
                })
                .collect::<std::result::Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| self.protocol(Api::Http, format!("making the PIR queries: {e}")))?
        .map_err(|e| self.protocol(Api::Http, format!("making the PIR queries: {e}")))?;
        let mut found = Vec::with_capacity(wanted.len());
        for (query, fetch) in queries {
            let answer = self.pir_answer(epoch, shape, &query).await?;
            pir.queries += 1;
            pir.bytes_up += shape.query_bytes() as u64;
            pir.bytes_down += shape.answer_bytes(&PIR_V1) as u64;
            if let Some(fetch) = fetch {
                let h = hint.clone();
                let record = tokio::task::spawn_blocking(move || h.decode(&fetch, &answer))
                    .await
                    .map_err(|e| self.protocol(Api::Http, format!("decoding a PIR answer: {e}")))?
                    .map_err(|e| self.protocol(Api::Http, format!("a PIR answer: {e}")))?;
                found.push(record);
            }
        }
        Ok(found)
    }

    /// `POST /v1/pir/{epoch}/query`: the server's answer to `query`, at most its shape's size.
    pub(crate) async fn pir_answer(
        &self,
        epoch: u64,
        shape: Shape,
        query: &Query,
    ) -> Result<Answer> {
        let body = query.to_bytes();
        let url = self.url(&format!("/v1/pir/{epoch}/query"));
        let answer = self
            .retrying(|| async {
                let req = (self.http.post(&url))
                    .header("content-type", "application/octet-stream")
                    .body(body.clone());
                let r = self.http_check(self.http_send(req).await?, "").await?;
                self.read_capped(r, shape.answer_bytes(&PIR_V1) as u64, None)
                    .await
            })
            .await?;
        Answer::from_bytes(&answer)
            .map_err(|e| self.protocol(Api::Http, format!("the PIR answer: {e}")))
    }
}
