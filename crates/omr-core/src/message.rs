//! A board message as a sender submits it: one clue, one payload and, when the server asks for
//! postage, a stamp, in a single versioned encoding (`application/octet-stream` on the HTTP API).
//!
//! Version 1: header, payload length (u16 LE), payload, clue body. Version 2 (a stamped message):
//! header, nonce (u64 LE), then the same. [`Message::to_bytes`] writes version 1 when the message
//! carries no nonce, so unstamped messages stay readable by servers that predate postage.

use crate::clue::Clue;
use crate::codec::{write_header, write_header_version, Kind, Reader, VERSION};
use crate::error::OmrError;
use crate::layout::validate_payload;
use crate::params::ParamSet;
use crate::postage::Postage;

/// Size limit when decoding a message (clue + the largest payload + header).
pub const MESSAGE_LIMIT: usize = 8 * 1024;

/// The encoding version of a message that carries a postage nonce.
pub const STAMPED_VERSION: u8 = 2;

/// A clue, its payload and an optional postage nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub clue: Clue,
    pub payload: Vec<u8>,
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
            nonce: None,
        })
    }

    pub fn params(&self) -> &'static ParamSet {
        self.clue.params()
    }

    /// The stamp hash of this message before the nonce: search it for a nonce, or check one.
    pub fn postage(&self) -> Postage {
        Postage::new(self.params(), &self.clue.to_bytes(), &self.payload)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self.nonce {
            None => write_header(&mut out, Kind::Message, self.params()),
            Some(nonce) => {
                write_header_version(&mut out, Kind::Message, STAMPED_VERSION, self.params());
                out.extend_from_slice(&nonce.to_le_bytes());
            }
        }
        out.extend_from_slice(&(self.payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.payload);
        self.clue.write_body(&mut out);
        out
    }

    /// Decode either version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p, version) = Reader::open_versions(
            bytes,
            Kind::Message,
            MESSAGE_LIMIT,
            &[VERSION, STAMPED_VERSION],
        )?;
        let nonce = if version == STAMPED_VERSION {
            Some(r.u64()?)
        } else {
            None
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
        Ok(Message {
            clue,
            payload,
            nonce,
        })
    }
}
