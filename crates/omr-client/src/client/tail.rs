//! omr-light-v1: an online recipient reads the board's newest messages itself.
//!
//! The board is public, so reading it tells the server nothing about who reads: a recipient a
//! few messages behind the head downloads those messages (clue and payload, ≈ 4 KB each as the
//! board's JSON), keeps the ones whose clue passes its own range check
//! ([`omr_light::SecretKey::matches`], n·ℓ products), and has their payloads at once. The
//! server does no detection and no PIR for it. A retrieval's first board read (at most
//! [`FIRST_PAGE`] messages) names the head, so a poll that finds a few new messages is one
//! request, answered from one statement of the store. Past [`ClientOptions::tail_messages`]
//! messages behind, the digest (15 B a message) and the batch fetch cost fewer bytes, and the
//! retrieval uses them instead (docs/light/STUDY.md §9 compares the two).
//!
//! On a server that takes attachments the pages carry every message's sealed attachment too
//! (`attachments=true`), whoever it is for, so the recipient has its own at once and the server
//! learns nothing more than from the payloads: a range read whole, as anyone may read it.
//!
//! [`ClientOptions::tail_messages`]: super::ClientOptions::tail_messages

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use omr_api::http::BoardPage;
use omr_core::Retrieved;
use omr_light::Clue;
use serde::Serialize;

use super::Client;
use crate::error::{Api, Result};
use crate::keydir::DigestState;

/// The default [`ClientOptions::tail_messages`](super::ClientOptions::tail_messages): 256
/// messages are ≈ 1 MB of board JSON, about what a digest and a batch-fetch round cost a
/// recipient that far behind (0.03 MB of digest for a part of an epoch, 0.23 MB a round, and
/// the server a round's CPU, far more than a board read's).
pub const DEFAULT_TAIL_MESSAGES: u64 = 256;

/// Most messages one board page holds (the server's limit).
const PAGE: u64 = 1000;

/// Messages a retrieval asks for in its first board read, the one whose answer names the head:
/// a poll every second on a board of up to 16 messages a second needs no other request, and a
/// recipient found to be far behind has downloaded at most these (≈ 65 KB) for nothing.
pub(crate) const FIRST_PAGE: u64 = 16;

/// What reading the board's tail cost in one retrieval.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TailRead {
    /// Board messages read and checked.
    pub messages: u64,
    /// Bytes downloaded (the pages' bodies).
    pub bytes: u64,
}

impl Client {
    /// `GET /v1/messages?from=…&limit=…` (`&attachments=true` with `attachments`), and its
    /// body's bytes.
    pub(crate) async fn board_page(
        &self,
        from: u64,
        limit: u64,
        attachments: bool,
    ) -> Result<(BoardPage, u64)> {
        self.retrying(|| async {
            let mut req = (self.http.get(self.url("/v1/messages")))
                .query(&[("from", from), ("limit", limit.clamp(1, PAGE))]);
            if attachments {
                req = req.query(&[("attachments", true)]);
            }
            let r = self.http_check(self.http_send(req).await?, "").await?;
            let bytes = self.read_capped(r, 16 << 20, None).await?;
            let page = serde_json::from_slice(&bytes).map_err(|e| {
                self.protocol(
                    Api::Http,
                    format!("a board page is not the JSON expected: {e}"),
                )
            })?;
            Ok((page, bytes.len() as u64))
        })
        .await
    }

    /// Read the board from `state.next_from` up to `to`, keep the messages whose clues are
    /// `secret`'s (and not in `state.seen`) and, with `attachments`, their sealed attachments,
    /// and advance `state.next_from` past what was read. `first`, a page already read from
    /// `state.next_from` (and its bytes), is used before any other is asked for.
    pub(crate) async fn read_tail(
        &self,
        secret: &omr_light::SecretKey,
        state: &mut DigestState,
        to: u64,
        found: &mut Vec<Retrieved>,
        mut attachments: Option<&mut BTreeMap<u64, Vec<u8>>>,
        mut first: Option<(BoardPage, u64)>,
    ) -> Result<TailRead> {
        let with_attachments = attachments.is_some();
        let mut read = TailRead::default();
        while state.next_from < to {
            let (page, bytes) = match first.take() {
                Some(page) => page,
                None => {
                    let limit = to - state.next_from;
                    (self.board_page(state.next_from, limit, with_attachments)).await?
                }
            };
            read.bytes += bytes;
            let mut next = state.next_from;
            for m in page.messages.into_iter().take_while(|m| m.index < to) {
                if m.index != next {
                    let why = format!("board index {} where {next} was expected", m.index);
                    return Err(self.protocol(Api::Http, why));
                }
                next += 1;
                read.messages += 1;
                let decoded = B64.decode(&m.clue).ok();
                let Some(clue) = decoded.and_then(|c| Clue::from_bytes(&c).ok()) else {
                    let why = format!("the clue of board message {} does not decode", m.index);
                    return Err(self.protocol(Api::Http, why));
                };
                if clue.params().id != secret.params().id || !secret.matches(&clue) {
                    continue;
                }
                let payload = B64.decode(&m.payload).map_err(|e| {
                    let why = format!("the payload of board message {}: {e}", m.index);
                    self.protocol(Api::Http, why)
                })?;
                if !state.seen.insert(m.index) {
                    continue;
                }
                found.push(Retrieved {
                    index: m.index,
                    payload,
                });
                if let (Some(kept), Some(a)) = (attachments.as_deref_mut(), &m.attachment) {
                    let sealed = B64.decode(a).map_err(|e| {
                        let why = format!("the attachment of board message {}: {e}", m.index);
                        self.protocol(Api::Http, why)
                    })?;
                    kept.insert(m.index, sealed);
                }
            }
            if next == state.next_from {
                break; // the board holds nothing there yet
            }
            state.next_from = next;
        }
        Ok(read)
    }
}
