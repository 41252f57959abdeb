//! A board message as a sender submits it: one clue, one payload and, when the server asks for
//! postage, a stamp, in a single versioned encoding (`application/octet-stream` on the HTTP API).
//!
//! Version 1: header, payload length (u16 LE), payload, clue body. Version 2 (a stamped message):
//! header, nonce (u64 LE), then the same. Version 3 (a message with an attachment): header, a flag
//! byte (1: a nonce follows), the nonce if flagged, attachment length (u32 LE), attachment, then
//! as version 1. [`Message::to_bytes`] writes the lowest version that holds the message, so
//! messages without an attachment stay readable by servers that predate attachments, and
//! unstamped ones by servers that predate postage.

use crate::clue::Clue;
use crate::codec::{write_header, write_header_version, Kind, Reader, VERSION};
use crate::error::OmrError;
use crate::layout::validate_payload;
use crate::params::ParamSet;
use crate::postage::Postage;

/// Size limit of a message without its attachment (clue + the largest payload + header).
pub const MESSAGE_LIMIT: usize = 8 * 1024;

/// The largest attachment any message may carry (a server sets its own, smaller limit:
/// omrd's `max_attachment_bytes`).
pub const MAX_ATTACHMENT_BYTES: usize = 1 << 20;

/// The encoding version of a message that carries a postage nonce.
pub const STAMPED_VERSION: u8 = 2;

/// The encoding version of a message that carries an attachment.
pub const ATTACHMENT_VERSION: u8 = 3;

/// An attachment any message may carry: at most [`MAX_ATTACHMENT_BYTES`] (omr-light-v1's
/// messages too).
pub fn validate_attachment(attachment: &[u8]) -> Result<(), OmrError> {
    if attachment.len() > MAX_ATTACHMENT_BYTES {
        return Err(OmrError::TooLarge {
            what: "attachment",
            got: attachment.len(),
            limit: MAX_ATTACHMENT_BYTES,
        });
    }
    Ok(())
}

/// A clue, its payload, an optional attachment and an optional postage nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub clue: Clue,
    pub payload: Vec<u8>,
    /// The attachment (sealed by the sender; fetched by PIR once its epoch closes); empty:
    /// none.
    pub attachment: Vec<u8>,
    /// The postage stamp (see [`crate::postage`]), when there is one.
    pub nonce: Option<u64>,
}

impl Message {
    /// Pair a clue with a payload, checking the payload against the clue's parameter set.
    pub fn new(clue: Clue, payload: Vec<u8>) -> Result<Self, OmrError> {
        validate_payload(clue.params(), &payload)?;
        Ok(Message {
            clue,
            payload,
            attachment: Vec::new(),
            nonce: None,
        })
    }

    /// The same message with `attachment` (checked by [`validate_attachment`]).
    pub fn with_attachment(mut self, attachment: Vec<u8>) -> Result<Self, OmrError> {
        validate_attachment(&attachment)?;
        self.attachment = attachment;
        Ok(self)
    }

    pub fn params(&self) -> &'static ParamSet {
        self.clue.params()
    }

    /// The stamp hash of this message before the nonce: search it for a nonce, or check one.
    pub fn postage(&self) -> Postage {
        Postage::new(self.params(), &self.clue.to_bytes(), &self.payload)
            .with_attachment(&self.attachment)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match (self.nonce, self.attachment.is_empty()) {
            (None, true) => write_header(&mut out, Kind::Message, self.params()),
            (Some(nonce), true) => {
                write_header_version(&mut out, Kind::Message, STAMPED_VERSION, self.params());
                out.extend_from_slice(&nonce.to_le_bytes());
            }
            (nonce, false) => {
                write_header_version(&mut out, Kind::Message, ATTACHMENT_VERSION, self.params());
                out.push(u8::from(nonce.is_some()));
                if let Some(nonce) = nonce {
                    out.extend_from_slice(&nonce.to_le_bytes());
                }
                out.extend_from_slice(&(self.attachment.len() as u32).to_le_bytes());
                out.extend_from_slice(&self.attachment);
            }
        }
        out.extend_from_slice(&(self.payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.payload);
        self.clue.write_body(&mut out);
        out
    }

    /// Decode any version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p, version) = Reader::open_versions(
            bytes,
            Kind::Message,
            MESSAGE_LIMIT + MAX_ATTACHMENT_BYTES + 8,
            &[VERSION, STAMPED_VERSION, ATTACHMENT_VERSION],
        )?;
        let (nonce, attachment) = match version {
            STAMPED_VERSION => (Some(r.u64()?), Vec::new()),
            ATTACHMENT_VERSION => {
                let nonce = match r.u8()? {
                    0 => None,
                    1 => Some(r.u64()?),
                    flag => {
                        return Err(OmrError::malformed("message", format!("flag byte {flag}")))
                    }
                };
                let len = r.u32()? as usize;
                if len == 0 {
                    return Err(OmrError::malformed(
                        "message",
                        "an empty attachment (use version 1)",
                    ));
                }
                (nonce, r.take(len)?.to_vec())
            }
            _ => (None, Vec::new()),
        };
        let len = u16::from_le_bytes(r.take(2)?.try_into().expect("2 bytes")) as usize;
        // A length the input does not hold is malformed; one it holds but the set forbids is
        // too large.
        let payload = r.take(len)?.to_vec();
        if len > p.payload_bytes {
            return Err(OmrError::PayloadTooLarge {
                got: len,
                max: p.payload_bytes,
            });
        }
        let clue = Clue::read_body(&mut r, p)?;
        r.finish()?;
        if bytes.len() - attachment.len() > MESSAGE_LIMIT {
            return Err(OmrError::TooLarge {
                what: "message",
                got: bytes.len() - attachment.len(),
                limit: MESSAGE_LIMIT,
            });
        }
        Ok(Message {
            clue,
            payload,
            attachment,
            nonce,
        })
    }
}
