//! The public board: the server's parameters and posting messages (HTTP), with postage solved
//! when the server asks for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use omr_api::http::{BatchIn, BatchPosted, MessageIn, Posted};
use omr_api::ErrorCode;
use omr_core::{Message, Postage, MAX_POSTAGE_BITS};

use super::{Client, Progress, ServerParams};
use crate::address::Address;
use crate::error::{Error, Result};
use crate::postage::{solve, SolveError, Stamp};
use crate::scheme::ClueKey;
use crate::seal::SEAL_OVERHEAD;

/// How often a postage search reports progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// What [`Client::send_stamped`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The message's board index.
    pub index: u64,
    /// The postage stamp and what it cost, when the server asked for postage.
    pub stamp: Option<Stamp>,
}

impl Client {
    /// The server's parameter set and limits (and, remembered for sending, its postage).
    pub async fn params(&self) -> Result<ServerParams> {
        let params: ServerParams = self
            .retrying(|| async {
                let r = self
                    .http_send(self.http.get(self.url("/v1/params")))
                    .await?;
                self.http_json(r).await
            })
            .await?;
        *self.known_params.lock().unwrap_or_else(|e| e.into_inner()) = Some(params.clone());
        Ok(params)
    }

    /// The server's parameters as last asked, or asked now: for what does not change while the
    /// server runs (its `board_head` is stale; ask [`Client::params`] for the head).
    pub(crate) async fn known_params(&self) -> Result<ServerParams> {
        let known = (self.known_params.lock().unwrap_or_else(|e| e.into_inner())).clone();
        match known {
            Some(params) => Ok(params),
            None => self.params().await,
        }
    }

    /// The leading zero bits the server asks of each message's postage stamp (`postage_bits` of
    /// `GET /v1/params`; 0: none), asked once and remembered.
    pub async fn postage_bits(&self) -> Result<u32> {
        Ok(self.known_params().await?.postage_bits)
    }

    /// Make a clue for the recipient whose public clue key is `to` (of either scheme), and
    /// post it with `payload` as it is — readable by anyone on the board: [`Client::send_to`]
    /// seals it first —, stamped when the server asks for postage. Returns the message's board
    /// index.
    pub async fn send(&self, to: impl Into<ClueKey>, payload: &[u8]) -> Result<u64> {
        Ok(self.send_stamped(to, payload, None).await?.index)
    }

    /// Seal `plaintext` to the recipient at `to` (its seal public key, [`crate::seal`]) and post
    /// it with a clue made from its clue key, stamped when the server asks for postage (see
    /// [`Client::send_stamped`]). The board shows only the sealed bytes, 50 more than
    /// `plaintext`, which must leave room for them in the parameter set's payload.
    pub async fn send_to(
        &self,
        to: &Address,
        plaintext: &[u8],
        progress: Option<Progress>,
    ) -> Result<Sent> {
        let draft = sealed_draft(to, plaintext)?;
        self.send_draft(draft, progress).await
    }

    /// [`Client::send`], also returning the stamp and its cost; while a stamp is searched for,
    /// `progress(hashes so far, hashes expected)` is called about every 100 ms. A post refused
    /// for its postage (the server changed `postage_bits` since it was asked) is stamped again
    /// for the server's new figure and posted once more; a refused post stores nothing.
    pub async fn send_stamped(
        &self,
        to: impl Into<ClueKey>,
        payload: &[u8],
        progress: Option<Progress>,
    ) -> Result<Sent> {
        let draft = Draft::new(&to.into(), payload.to_vec(), Vec::new())?;
        self.send_draft(draft, progress).await
    }

    /// Stamp `draft` as the server asks and post it (see [`Client::send_stamped`]).
    pub(super) async fn send_draft(
        &self,
        mut draft: Draft,
        progress: Option<Progress>,
    ) -> Result<Sent> {
        let mut bits = self.postage_bits().await?;
        let mut asked_again = false;
        loop {
            let stamp = self
                .solve_postage(draft.postage(), bits, progress.clone())
                .await?;
            draft.set_nonce(stamp);
            match self.post_draft(&draft).await {
                Ok(index) => return Ok(Sent { index, stamp }),
                Err(e) if !asked_again && is_postage_refusal(&e) => {
                    asked_again = true;
                    let now = self.params().await?.postage_bits;
                    if now == bits {
                        return Err(e);
                    }
                    bits = now;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Stamp `message` with the smallest nonce whose stamp hash has `bits` leading zero bits (0:
    /// remove any stamp), on [`super::ClientOptions::postage_threads`] threads of a rayon pool,
    /// never on the async runtime. `progress(hashes so far, hashes expected)` is called about
    /// every 100 ms. Dropping the future stops the search.
    pub async fn stamp(
        &self,
        message: &mut Message,
        bits: u32,
        progress: Option<Progress>,
    ) -> Result<Option<Stamp>> {
        let stamp = self
            .solve_postage(message.postage(), bits, progress)
            .await?;
        message.nonce = stamp.map(|s| s.nonce);
        Ok(stamp)
    }

    /// The stamp of `postage` for `bits` (none for 0), searched as [`Client::stamp`] says.
    pub(super) async fn solve_postage(
        &self,
        postage: Postage,
        bits: u32,
        progress: Option<Progress>,
    ) -> Result<Option<Stamp>> {
        if bits == 0 {
            return Ok(None);
        }
        if bits > MAX_POSTAGE_BITS {
            return Err(SolveError::TooManyBits(bits).into());
        }
        let threads = self.options.postage_threads;
        let hashes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let _stop = StopOnDrop(stop.clone());
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        {
            let hashes = hashes.clone();
            rayon::spawn(move || {
                let _ = tx.send(solve(&postage, bits, threads, &hashes, &stop));
            });
        }
        let expected = 1u64 << bits;
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        let solved = loop {
            tokio::select! {
                r = &mut rx => break r.unwrap_or(Err(SolveError::Stopped)),
                _ = tick.tick() => {
                    if let Some(p) = &progress {
                        p(hashes.load(Ordering::Relaxed), expected);
                    }
                }
            }
        };
        Ok(Some(solved?))
    }

    /// Post a draft: a TFHE message in its binary encoding, an omr-light-v1 one as JSON (the
    /// binary encoding is omr-core's), retried as [`Client::post`] says. A message already on
    /// the board answers the index it has.
    async fn post_draft(&self, draft: &Draft) -> Result<u64> {
        already_posted(self.post_draft_once(draft).await)
    }

    /// [`Client::post_draft`], a message already on the board reported as
    /// [`Error::AlreadyPosted`].
    pub(super) async fn post_draft_once(&self, draft: &Draft) -> Result<Posted> {
        let body = match draft {
            Draft::Tfhe(message) => return self.post_once(message).await,
            Draft::Light { .. } => draft.json(),
        };
        self.retrying_unsent(|| async {
            let req = self.http.post(self.url("/v1/messages")).json(&body);
            self.http_json::<Posted>(self.http_send(req).await?).await
        })
        .await
    }

    /// Post one message as it is (stamp it first with [`Client::stamp`] when the server asks for
    /// postage); returns its board index. Retried only when no connection could be made or the
    /// server refused it for now (a rate limit, a full server: nothing was stored, and it says
    /// when to retry); a request the server may have acted on is never sent twice. Posting a
    /// message that is already on the board (a retry after a lost answer) answers the index it
    /// has: the server appends it once.
    pub async fn post(&self, message: &Message) -> Result<u64> {
        already_posted(self.post_once(message).await)
    }

    /// [`Client::post`], a message already on the board reported as [`Error::AlreadyPosted`].
    async fn post_once(&self, message: &Message) -> Result<Posted> {
        let body = message.to_bytes();
        self.retrying_unsent(|| async {
            let req = self
                .http
                .post(self.url("/v1/messages"))
                .header("content-type", "application/octet-stream")
                .body(body.clone());
            let r = self.http_send(req).await?;
            self.http_json(r).await
        })
        .await
    }

    /// Post messages in one atomic batch, each as it is (stamped or not); returns their board
    /// indices, in order. One refused message refuses the batch.
    pub async fn post_batch(&self, messages: &[Message]) -> Result<std::ops::Range<u64>> {
        let body = BatchIn {
            messages: messages
                .iter()
                .map(|m| message_in(&m.clue.to_bytes(), &m.payload, &m.attachment, m.nonce))
                .collect(),
        };
        self.post_batch_in(&body).await
    }

    /// Make a clue for each `(recipient, payload)` (either scheme), stamp each when the server
    /// asks for postage, and post them in one atomic batch (as [`Client::post_batch`]).
    pub async fn send_batch(
        &self,
        messages: &[(ClueKey, Vec<u8>)],
    ) -> Result<std::ops::Range<u64>> {
        let bits = self.postage_bits().await?;
        let mut body = BatchIn {
            messages: Vec::with_capacity(messages.len()),
        };
        for (to, payload) in messages {
            let mut draft = Draft::new(to, payload.clone(), Vec::new())?;
            let stamp = self.solve_postage(draft.postage(), bits, None).await?;
            draft.set_nonce(stamp);
            body.messages.push(draft.json());
        }
        self.post_batch_in(&body).await
    }

    async fn post_batch_in(&self, body: &BatchIn) -> Result<std::ops::Range<u64>> {
        let posted: BatchPosted = self
            .retrying_unsent(|| async {
                let r = self
                    .http_send(self.http.post(self.url("/v1/messages/batch")).json(body))
                    .await?;
                self.http_json(r).await
            })
            .await?;
        Ok(posted.first_index..posted.first_index + posted.count)
    }
}

/// `plaintext` sealed to `to`, with a fresh clue; refused when it does not fit the parameter
/// set's payload with the seal's 50 bytes.
pub(super) fn sealed_draft(to: &Address, plaintext: &[u8]) -> Result<Draft> {
    let max = to.clue_key.payload_bytes().saturating_sub(SEAL_OVERHEAD);
    if plaintext.len() > max {
        return Err(Error::SealedPayloadTooLarge {
            bytes: plaintext.len(),
            max,
        });
    }
    Draft::new(&to.clue_key, to.seal.seal(plaintext), Vec::new())
}

/// A message of either scheme, ready to stamp and post.
#[derive(Debug, Clone)]
pub(super) enum Draft {
    /// omr-core's message, posted in its binary encoding.
    Tfhe(Message),
    /// An omr-light-v1 message (its clue's encoding; an empty attachment is none), posted as
    /// JSON: the binary message encoding is omr-core's.
    Light {
        set: &'static str,
        clue: Vec<u8>,
        payload: Vec<u8>,
        attachment: Vec<u8>,
        nonce: Option<u64>,
    },
}

impl Draft {
    /// A fresh clue for `to`, with `payload` and `attachment`, each checked as its parameter
    /// set asks.
    pub(super) fn new(to: &ClueKey, payload: Vec<u8>, attachment: Vec<u8>) -> Result<Draft> {
        match to {
            ClueKey::Tfhe(k) => Ok(Draft::Tfhe(
                Message::new(k.make_clue(), payload)?.with_attachment(attachment)?,
            )),
            ClueKey::Light(a) => {
                to.validate_payload(&payload)?;
                omr_core::message::validate_attachment(&attachment)?;
                Ok(Draft::Light {
                    set: a.params().name,
                    clue: a.clue().to_bytes(),
                    payload,
                    attachment,
                    nonce: None,
                })
            }
        }
    }

    /// Its stamp hash before the nonce (the same for both schemes, named by the set).
    pub(super) fn postage(&self) -> Postage {
        match self {
            Draft::Tfhe(m) => m.postage(),
            Draft::Light {
                set,
                clue,
                payload,
                attachment,
                ..
            } => Postage::named(set, clue, payload).with_attachment(attachment),
        }
    }

    pub(super) fn set_nonce(&mut self, stamp: Option<Stamp>) {
        let nonce = stamp.map(|s| s.nonce);
        match self {
            Draft::Tfhe(m) => m.nonce = nonce,
            Draft::Light { nonce: n, .. } => *n = nonce,
        }
    }

    fn json(&self) -> MessageIn {
        match self {
            Draft::Tfhe(m) => message_in(&m.clue.to_bytes(), &m.payload, &m.attachment, m.nonce),
            Draft::Light {
                clue,
                payload,
                attachment,
                nonce,
                ..
            } => message_in(clue, payload, attachment, *nonce),
        }
    }
}

/// A message as the board's JSON takes it (an empty attachment is none).
fn message_in(clue: &[u8], payload: &[u8], attachment: &[u8], nonce: Option<u64>) -> MessageIn {
    MessageIn {
        clue: b64(clue),
        payload: b64(payload),
        nonce,
        attachment: (!attachment.is_empty()).then(|| b64(attachment)),
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A post's index; a message already on the board answers the index it has.
fn already_posted(posted: Result<Posted>) -> Result<u64> {
    match posted {
        Ok(p) => Ok(p.index),
        Err(Error::AlreadyPosted { index }) => Ok(index),
        Err(e) => Err(e),
    }
}

/// Whether `e` is the server refusing a message's postage.
fn is_postage_refusal(e: &Error) -> bool {
    matches!(e, Error::Rejected { code, .. }
        if [ErrorCode::PostageRequired, ErrorCode::PostageInvalid]
            .iter()
            .any(|c| c.as_str() == code))
}

/// Sets the search's stop flag when the future that waits for it is dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
