//! Retrieval: fetch what is new for a key since the last call, decode it, drop what was already
//! seen, and split a range that holds more than k̄ messages (TFHE) or fetch the payloads by PIR
//! (omr-light-v1, see `client/light.rs`).

use std::collections::BTreeMap;

use omr_core::{OmrError, Retrieved, SecretKey};
use serde::Serialize;

use crate::client::{Client, FetchedDigest, PirFetch, Progress, TailRead, FIRST_PAGE};
use crate::error::{Api, Error, Result};
use crate::keydir::{DigestState, Registration};
use crate::scheme::{Digest, Secret};
use crate::seal::{AttachmentRef, Letter, SealKey};

/// How long a retrieval of an omr-light-v1 key more than the tail behind waits for the server to
/// detect the key's open batch, which its digest asked for (a pass over the key: tens of
/// milliseconds, a second or so when the key must be loaded first). Past it the retrieval goes on
/// with what the server had.
const LIGHT_DETECT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What one [`Client::retrieve`] call found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Retrieval {
    /// Messages not retrieved before, by index, with their payloads.
    #[serde(skip)]
    pub messages: Vec<Retrieved>,
    /// omr-light-v1: messages detected (this call or before) whose payloads have not been
    /// fetched yet, because their epoch has not closed (or held more than one round's
    /// queries): a later call fetches them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<u64>,
    /// omr-light-v1: what fetching payloads by PIR cost in this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pir: Option<PirFetch>,
    /// omr-light-v1: what reading the board's newest messages itself cost in this call (a
    /// recipient at most `ClientOptions::tail_messages` behind; `client/tail.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailRead>,
    /// omr-light-v1: the sealed attachments that came in this call, by index (open them with
    /// the reference the letter names): with their messages' payloads (read from the board's
    /// tail or fetched by PIR), or by PIR for letters of an earlier call
    /// (`DigestState::pending_attachments`).
    #[serde(skip)]
    pub attachments: BTreeMap<u64, Vec<u8>>,
    /// Board range examined: every pertinent message in `[from, to)` has now been retrieved.
    pub from: u64,
    pub to: u64,
    pub board_head: u64,
    /// The server's epoch length (digests start on epoch boundaries; on omr-light-v1 a
    /// payload can be fetched once its epoch has closed).
    pub epoch_length: u64,
    /// Board messages the server has not detected for this key yet (retrieve again later).
    pub lag: u64,
    /// Digests downloaded, their encoded bytes, and how often a range was split in two.
    pub digests: usize,
    pub digest_bytes: usize,
    pub splits: usize,
}

/// A retrieved message, its payload opened (see [`Retrieval::open`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Its board index.
    pub index: u64,
    /// The payload's length on the board (sealed: the letter's plus the seal's 50 bytes, 86 with an attachment).
    pub board_bytes: usize,
    pub letter: Letter,
    /// The attachment its letter names, if any: fetch it with [`Client::fetch_attachment`] once
    /// its epoch has closed.
    pub attachment: Option<AttachmentRef>,
}

impl Retrieval {
    /// Open every retrieved payload with the recipient's seal key: sealed ones are opened (or
    /// reported as [`Letter::Unopenable`]: a false positive or a forgery), unsealed ones pass as
    /// [`Letter::Plain`].
    pub fn open(&self, seal: &SealKey) -> Vec<Received> {
        self.messages
            .iter()
            .map(|m| {
                let (letter, attachment) = seal.open_letter(&m.payload);
                Received {
                    index: m.index,
                    board_bytes: m.payload.len(),
                    letter,
                    attachment,
                }
            })
            .collect()
    }
}

impl Client {
    /// Retrieve the key's messages the server has detected since `state` was last advanced.
    ///
    /// Asks from `state.next_from`, follows the server's paging, splits a range that holds more
    /// than k̄ messages at an epoch boundary and asks for both halves, and skips messages already
    /// in `state.seen` (digests start on epoch boundaries, so a digest may cover part of the last
    /// one again). On success `state` is advanced; save it to make the next call incremental.
    ///
    /// On omr-light-v1 (`secret` is a light key) the digest names the messages and their
    /// payloads come by PIR from each closed epoch, in a fixed number of queries per epoch
    /// (`client/light.rs`); messages of an open epoch are in [`Retrieval::pending`] until a
    /// call after it closes.
    ///
    /// `state` changes only when the call succeeds: a retrieval that fails part-way (the server
    /// went away after the digest, a round was refused) or is cancelled leaves it as it was, so
    /// the next call finds the same messages again instead of counting them as seen and
    /// returning them nowhere.
    pub async fn retrieve<'s>(
        &self,
        secret: impl Into<Secret<'s>>,
        reg: &Registration,
        state: &mut DigestState,
        progress: Option<Progress>,
    ) -> Result<Retrieval> {
        let mut work = state.clone();
        let out = (self.retrieve_into(secret.into(), reg, &mut work, progress)).await?;
        *state = work;
        Ok(out)
    }

    /// [`Client::retrieve`]'s work, advancing `state` as it goes.
    async fn retrieve_into(
        &self,
        secret: Secret<'_>,
        reg: &Registration,
        state: &mut DigestState,
        progress: Option<Progress>,
    ) -> Result<Retrieval> {
        if state.key_id != reg.key_id {
            *state = DigestState::new(reg);
        }
        let mut out = Retrieval {
            from: state.next_from,
            to: state.next_from,
            ..Retrieval::default()
        };
        // omr-light-v1: a recipient close to the head reads the board itself
        // (`client/tail.rs`); one further behind asks for digests first. The first board read
        // names the head, so an online recipient's poll is one request.
        let light = match secret {
            Secret::Light(_) => Some(self.known_params().await?),
            Secret::Tfhe(_) => None,
        };
        let tail = light.as_ref().map_or(0, |_| self.options.tail_messages);
        let mut first_page = None;
        if let Some(p) = &light {
            out.epoch_length = p.epoch_len.max(1);
            out.board_head = if tail > 0 {
                let attachments = p.max_attachment_bytes > 0;
                let page =
                    (self.board_page(state.next_from, tail.min(FIRST_PAGE), attachments)).await?;
                let head = page.0.head;
                first_page = Some(page);
                head
            } else {
                self.params().await?.board_head
            };
        }
        let near = |head: u64, from: u64| tail > 0 && head.saturating_sub(from) <= tail;
        let digest_from = state.next_from;
        let skip_digests = near(out.board_head, state.next_from);
        let mut waited = false;
        loop {
            if skip_digests {
                break;
            }
            let d = self
                .digest(reg, Some(state.next_from), None, progress.clone())
                .await?;
            out.board_head = out.board_head.max(d.board_head);
            out.lag = d.lag;
            let (cursor, lag) = (d.board_head.saturating_sub(d.lag), d.lag);
            let (epoch, more) = (d.epoch_length.max(1), d.next_from);
            out.epoch_length = epoch;
            let end = match secret {
                Secret::Tfhe(secret) => {
                    let (found, end) = self
                        .decode_or_split(secret, reg, d, &mut out, progress.clone())
                        .await?;
                    for r in found {
                        if state.seen.insert(r.index) {
                            out.messages.push(r);
                        }
                    }
                    end
                }
                Secret::Light(secret) => {
                    out.digests += 1;
                    out.digest_bytes += d.encoded_bytes;
                    let Digest::Light(digest) = &d.digest else {
                        let what = "a TFHE digest for an omr-light-v1 key".to_string();
                        return Err(self.protocol(Api::Http, what));
                    };
                    for index in secret.pertinent(digest) {
                        let pending = state.pending_payloads.contains(&index);
                        if state.seen.insert(index) && !pending {
                            state.pending_payloads.push(index);
                        }
                    }
                    d.range_end
                }
            };
            let advanced = end > state.next_from;
            state.next_from = state.next_from.max(end);
            forget_past(state, reg, epoch);
            out.to = state.next_from;
            // omr-light-v1, still more than the tail behind, the key's open batch not detected
            // up to the head: this digest asked the server for it, which detects it up to the
            // last refresh mark below the head (every `light_refresh_messages`, fewer than the
            // tail's messages at the defaults). Wait for that once and ask again, so that this
            // retrieval reads the rest from the tail and makes one round (not one now on what
            // the server had, and another at the next retrieval on the rest). It depends on the
            // key's lag alone, which the server sees anyway.
            let behind = more.is_none() && lag > 0 && !near(out.board_head, state.next_from);
            if light.is_some() && behind && !waited {
                waited = true;
                self.wait_for_progress(reg, cursor, LIGHT_DETECT_WAIT)
                    .await?;
                continue;
            }
            if more.is_none() || !advanced {
                break;
            }
        }
        if let (Secret::Light(secret), Some(p)) = (secret, &light) {
            let digested = (digest_from, state.next_from);
            // What the digests did not reach (not detected yet, or none was asked for), up to
            // the newest head the server gave (the first board read, its params, or a digest's
            // answer).
            let head = out.board_head;
            if near(head, state.next_from) {
                // The first page, if the digests did not move where the tail starts.
                let first = first_page.filter(|_| state.next_from == digest_from);
                let found = &mut out.messages;
                // On a server that takes attachments they come with the pages.
                let attachments = (p.max_attachment_bytes > 0).then_some(&mut out.attachments);
                let read = (self.read_tail(secret, state, head, found, attachments, first)).await?;
                out.tail = Some(read);
                forget_past(state, reg, out.epoch_length);
                out.to = state.next_from;
                out.lag = head.saturating_sub(out.to);
            }
            let (head, epoch) = (out.board_head, out.epoch_length);
            let fetched = if p.max_attachment_bytes == 0 {
                (self.fetch_light_batch(secret, reg, state, head, epoch, digested)).await?
            } else {
                (self.fetch_light_payloads(reg, state, head, epoch)).await?
            };
            out.messages.extend(fetched.messages);
            out.attachments.extend(fetched.attachments);
            out.pir = fetched.pir;
            out.pending = state.pending_payloads.clone();
        }
        out.messages.sort_by_key(|r| r.index);
        Ok(out)
    }

    /// Decode `d`; on overflow ask for the two halves of its range and decode each (recursively).
    /// Returns the messages and the end of the range covered.
    async fn decode_or_split(
        &self,
        secret: &SecretKey,
        reg: &Registration,
        d: FetchedDigest,
        out: &mut Retrieval,
        progress: Option<Progress>,
    ) -> Result<(Vec<Retrieved>, u64)> {
        out.digests += 1;
        out.digest_bytes += d.encoded_bytes;
        let Digest::Tfhe(digest) = &d.digest else {
            let what = "an omr-light-v1 digest for a TFHE key".to_string();
            return Err(self.protocol(Api::Http, what));
        };
        match secret.decode(digest) {
            Ok(found) => Ok((found, d.range_end)),
            Err(OmrError::Overflow { kbar, .. }) => {
                let (start, end) = (d.range_start, d.range_end);
                let mid = split_point(start, end, d.epoch_length).ok_or(Error::Overflow {
                    start,
                    end,
                    kbar,
                })?;
                tracing::info!(start, mid, end, "more than k̄ messages in range: splitting");
                out.splits += 1;
                let left = self
                    .digest(reg, Some(start), Some(mid), progress.clone())
                    .await?;
                let (mut found, _) =
                    Box::pin(self.decode_or_split(secret, reg, left, out, progress.clone()))
                        .await?;
                let right = self
                    .digest(reg, Some(mid), Some(end), progress.clone())
                    .await?;
                let (more, end) =
                    Box::pin(self.decode_or_split(secret, reg, right, out, progress)).await?;
                found.extend(more);
                Ok((found, end))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Drop from `state.seen` the indices no later call can meet again: the next digest starts at
/// the epoch boundary at or below `next_from` (or at the key's start).
fn forget_past(state: &mut DigestState, reg: &Registration, epoch: u64) {
    let floor = (state.next_from / epoch * epoch).max(reg.start_index);
    state.seen = state.seen.split_off(&floor);
}

/// An epoch boundary strictly inside `(start, end)`, as close to the middle as boundaries
/// allow; `None` when the range lies within one epoch.
pub fn split_point(start: u64, end: u64, epoch: u64) -> Option<u64> {
    let epoch = epoch.max(1);
    let first = (start / epoch + 1) * epoch;
    let last = end.checked_sub(1)? / epoch * epoch;
    if first > last || first >= end {
        return None;
    }
    let mid = start + (end - start) / 2;
    Some((mid / epoch * epoch).clamp(first, last))
}

#[cfg(test)]
mod tests {
    use super::split_point;

    #[test]
    fn split_points_are_epoch_boundaries_inside_the_range() {
        assert_eq!(split_point(0, 16, 4), Some(8));
        assert_eq!(split_point(0, 8, 4), Some(4));
        assert_eq!(split_point(0, 5, 4), Some(4));
        assert_eq!(split_point(3, 9, 4), Some(4));
        assert_eq!(split_point(4, 13, 4), Some(8));
        // One epoch (or part of one): nothing to split.
        assert_eq!(split_point(0, 4, 4), None);
        assert_eq!(split_point(5, 8, 4), None);
        assert_eq!(split_point(0, 0, 4), None);
        assert_eq!(split_point(0, 1, 1), None);
        assert_eq!(split_point(0, 2, 1), Some(1));
    }
}
