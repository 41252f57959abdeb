//! Attachments: sent sealed beside a sealed letter that names them ([`Client::send_with_attachment`]),
//! and fetched by PIR once their epoch has closed ([`Client::fetch_attachment`]): the server
//! answers a query for one record of the epoch's database without learning which.
//!
//! A fetch downloads the epoch's hint (about 10 MiB for 4,096 attachments of 64 KiB), uploads
//! one query per chunk of a record (about 4.5 MiB) and downloads their answer (about 136 KiB).
//! The record holds the attachment framed by its length (u32 LE); the letter's reference checks
//! its length and SHA-256 before it is opened.

use std::sync::Arc;

use omr_pir::attachment::unframe;
use omr_pir::{Hint, Shape, PIR_V1};

use super::board::Draft;
use super::{Client, Progress, Sent};
use crate::address::Address;
use crate::error::{Api, Error, Result};
use crate::seal::{AttachmentRef, SealKey, ATTACHMENT_REF_LEN, SEAL_OVERHEAD};

impl Client {
    /// Seal `attachment` to the recipient at `to`, seal `letter` with the attachment's
    /// reference, and post both as one message (stamped when the server asks for postage). The
    /// attachment is fetched by PIR once its epoch closes; the letter arrives with the digest (on
    /// omr-light-v1 both come by the same PIR fetch, see [`Client::retrieve`]).
    pub async fn send_with_attachment(
        &self,
        to: &Address,
        letter: &[u8],
        attachment: &[u8],
        progress: Option<Progress>,
    ) -> Result<Sent> {
        let draft = self.attachment_draft(to, letter, attachment).await?;
        self.send_draft(draft, progress).await
    }

    /// `letter` and `attachment` sealed to `to`, the letter naming the attachment, with a
    /// fresh clue; refused when either does not fit (the server's `max_attachment_bytes`).
    pub(super) async fn attachment_draft(
        &self,
        to: &Address,
        letter: &[u8],
        attachment: &[u8],
    ) -> Result<Draft> {
        let max_letter =
            (to.clue_key.payload_bytes()).saturating_sub(SEAL_OVERHEAD + ATTACHMENT_REF_LEN);
        if letter.len() > max_letter {
            return Err(Error::SealedPayloadTooLarge {
                bytes: letter.len(),
                max: max_letter,
            });
        }
        let max = self.params().await?.max_attachment_bytes;
        if max == 0 {
            return Err(Error::NoAttachments {
                url: self.http_url.clone(),
            });
        }
        if attachment.len() + SEAL_OVERHEAD > max {
            return Err(Error::AttachmentTooLarge {
                url: self.http_url.clone(),
                bytes: attachment.len(),
                max: max.saturating_sub(SEAL_OVERHEAD),
            });
        }
        let (sealed, reference) = to.seal.seal_attachment(attachment);
        let payload = to.seal.seal_with_attachment(letter, &reference);
        Draft::new(&to.clue_key, payload, sealed)
    }

    /// Fetch the attachment of board message `index` by PIR from its (closed) epoch, check it
    /// against `reference` (from the message's letter) and open it with `seal`. The server
    /// learns that this client fetched one attachment of the epoch, not which. `progress` sees
    /// the hint's download.
    ///
    /// An epoch that has not closed yet is refused by the server (`Error::Rejected` with code
    /// `epoch_open`): fetch again once the board has passed its end.
    pub async fn fetch_attachment(
        &self,
        seal: &SealKey,
        index: u64,
        reference: &AttachmentRef,
        progress: Option<Progress>,
    ) -> Result<Vec<u8>> {
        let params = self.params().await?;
        if params.max_attachment_bytes == 0 || params.epoch_len == 0 {
            return Err(Error::NoAttachments {
                url: self.http_url.clone(),
            });
        }
        let epoch = index / params.epoch_len;
        let shape = Shape::for_attachments(params.epoch_len as usize, params.max_attachment_bytes)
            .map_err(|e| self.protocol(Api::Http, format!("its attachment settings: {e}")))?;
        let hint = Arc::new(self.pir_hint(epoch, shape, progress).await?);
        let record = (index % params.epoch_len) as usize;
        let h = hint.clone();
        let (query, fetch) =
            tokio::task::spawn_blocking(move || h.query(record, &mut rand::rngs::OsRng))
                .await
                .map_err(|e| self.protocol(Api::Http, format!("making the PIR query: {e}")))?
                .map_err(|e| self.protocol(Api::Http, format!("making the PIR query: {e}")))?;
        let answer = self.pir_answer(epoch, shape, &query).await?;
        let record = tokio::task::spawn_blocking(move || hint.decode(&fetch, &answer))
            .await
            .map_err(|e| self.protocol(Api::Http, format!("decoding the PIR answer: {e}")))?
            .map_err(|e| self.protocol(Api::Http, format!("the PIR answer: {e}")))?;
        let bad = |reason: String| Error::Attachment { index, reason };
        let sealed = unframe(&record).ok_or_else(|| {
            bad("its record's length runs past the record (the fetch decoded wrong)".into())
        })?;
        seal.open_attachment(sealed, reference)
            .map_err(|e| bad(e.to_string()))
    }

    /// The hint of `epoch`, checked to be for `shape`.
    pub(super) async fn pir_hint(
        &self,
        epoch: u64,
        shape: Shape,
        progress: Option<Progress>,
    ) -> Result<Hint> {
        let url = self.url(&format!("/v1/pir/{epoch}/hint"));
        let max = shape.hint_bytes(&PIR_V1) as u64;
        let bytes = self
            .retrying(|| async {
                let r = self
                    .http_check(self.http_send(self.http.get(&url)).await?, "")
                    .await?;
                self.read_capped(r, max, progress.as_ref()).await
            })
            .await?;
        let hint = Hint::from_bytes(&bytes)
            .map_err(|e| self.protocol(Api::Http, format!("the epoch's PIR hint: {e}")))?;
        if hint.shape() != shape || hint.params() != &PIR_V1 {
            return Err(self.protocol(
                Api::Http,
                format!(
                    "the epoch's PIR hint is for {:?}, not {shape:?}",
                    hint.shape()
                ),
            ));
        }
        Ok(hint)
    }
}
