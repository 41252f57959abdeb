//! The encodings' header, as omr-core's: `b"OMR"`, a kind byte, a version byte and the parameter
//! set id. Light kinds are numbered from 16, so omr-core's decoders refuse a light encoding by its
//! kind (and its set id, 3, which they do not know), and these decoders refuse a TFHE one.

use omr_core::codec::{Reader, MAGIC};
use omr_core::{OmrError, ParamSet};

use crate::params::LightParams;

pub use omr_core::codec::HEADER_LEN;
pub(crate) const VERSION: u8 = 1;

/// What an encoding holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Clue = 16,
    Address = 17,
    DetectionKey = 18,
    SecretKey = 19,
    Digest = 20,
    FetchKey = 21,
    FetchQuery = 22,
    FetchAnswers = 23,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Clue => "light clue",
            Kind::Address => "light address",
            Kind::DetectionKey => "light detection key",
            Kind::SecretKey => "light secret key",
            Kind::Digest => "light digest",
            Kind::FetchKey => "light fetch key",
            Kind::FetchQuery => "light fetch query",
            Kind::FetchAnswers => "light fetch answers",
        }
    }
}

pub(crate) fn write_header(out: &mut Vec<u8>, kind: Kind, p: &LightParams) {
    out.extend_from_slice(MAGIC);
    out.push(kind as u8);
    out.push(VERSION);
    out.push(p.id);
}

/// Check the size limit and the header of `buf`; return a reader after the header and the set.
pub(crate) fn open(
    buf: &[u8],
    kind: Kind,
    limit: usize,
) -> Result<(Reader<'_>, &'static LightParams), OmrError> {
    let what = kind.name();
    let (reader, _, id) = Reader::open_header(buf, kind as u8, what, limit, &[VERSION])?;
    let params = match LightParams::by_id(id) {
        Some(p) => p,
        None => match ParamSet::by_id(id) {
            // A TFHE set's id: name both sets.
            Ok(tfhe) => {
                return Err(OmrError::ParamMismatch {
                    what,
                    got: tfhe.name,
                    expected: crate::params::OMR_LIGHT_V1.name,
                })
            }
            Err(e) => return Err(e),
        },
    };
    Ok((reader, params))
}
