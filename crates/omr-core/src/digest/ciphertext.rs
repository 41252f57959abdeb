//! The digest the recipient downloads: the accumulator keyswitched to the k = 1 level-2 key and
//! switched to 2^digest_modulus_log, and its encoding.

use crate::codec::{pack_bits, write_header, write_kbar_and_range, Kind, Reader, HEADER_LEN};
use crate::error::OmrError;
use crate::layout::Layout;
use crate::params::ParamSet;

/// Limit when decoding a digest.
pub const DIGEST_LIMIT: usize = 16 * 1024 * 1024;

/// A digest as sent to the recipient: k = 1 GLWE ciphertexts under the level-2 key, switched
/// to 2^digest_modulus_log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// total_polys × (mask, body) × N values.
    pub(crate) glwes: Vec<u64>,
}

impl Digest {
    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::Digest, self.params);
        write_kbar_and_range(&mut out, self.kbar, self.start, self.end);
        pack_bits(
            &mut out,
            self.glwes.iter().copied(),
            self.params.digest_modulus_log,
        );
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::Digest, DIGEST_LIMIT)?;
        let (kbar, start, end) = r.kbar_and_range(p)?;
        let layout = Layout::new(p, kbar);
        let glwes = r.packed(layout.total_polys() * 2 * p.n2, p.digest_modulus_log)?;
        r.finish()?;
        Ok(Digest {
            params: p,
            kbar,
            start,
            end,
            glwes,
        })
    }

    /// Encoded size in bytes for a (parameter set, k̄).
    pub fn encoded_len(p: &ParamSet, kbar: usize) -> usize {
        HEADER_LEN
            + 20
            + (Layout::new(p, kbar).total_polys() * 2 * p.n2 * p.digest_modulus_log as usize)
                .div_ceil(8)
    }
}
