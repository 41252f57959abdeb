//! A board message as a sender submits it: one clue and one payload in a single versioned
//! encoding (`application/octet-stream` on the HTTP API).

use crate::clue::Clue;
use crate::codec::{write_header, Kind, Reader};
use crate::error::OmrError;
use crate::layout::validate_payload;
use crate::params::ParamSet;

/// Size limit when decoding a message (clue + the largest payload + header).
pub const MESSAGE_LIMIT: usize = 8 * 1024;

/// A clue and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub clue: Clue,
    pub payload: Vec<u8>,
}

impl Message {
    /// Pair a clue with a payload, checking the payload against the clue's parameter set.
    pub fn new(clue: Clue, payload: Vec<u8>) -> Result<Self, OmrError> {
        validate_payload(clue.params(), &payload)?;
        Ok(Message { clue, payload })
    }

    pub fn params(&self) -> &'static ParamSet {
        self.clue.params()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::Message, self.params());
        out.extend_from_slice(&(self.payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.payload);
        self.clue.write_body(&mut out);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::Message, MESSAGE_LIMIT)?;
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
        Ok(Message { clue, payload })
    }
}
