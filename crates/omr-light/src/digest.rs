//! Digests: per batch, the per-key half (ℓ values per message, switched to q0 = 2^27) and the
//! shared half (ℓ polynomials of D values, switched to q1 = 2^33, the same for every key), and a
//! recipient's digest of a range: one of each per batch it covers.

use omr_core::codec::{pack_bits, Reader};
use omr_core::OmrError;

use crate::codec::{open, write_header, Kind, HEADER_LEN};
use crate::params::{LightParams, OMR_LIGHT_V1};

/// The half of a batch's ciphertexts every key shares: ℓ polynomials of D values below 2^q1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedHalf {
    pub(crate) values: Vec<u64>,
}

/// One key's half for one batch: ℓ rows of `count` values below 2^q0 (row k, message i at
/// k·count + i).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchDigest {
    pub(crate) count: usize,
    pub(crate) values: Vec<u64>,
}

impl SharedHalf {
    pub(crate) fn from_values(p: &LightParams, values: Vec<u64>) -> SharedHalf {
        debug_assert_eq!(values.len(), p.ell * p.batch);
        SharedHalf { values }
    }

    pub fn encoded_len(p: &LightParams) -> usize {
        (p.ell * p.batch * p.log_q1 as usize).div_ceil(8)
    }

    pub(crate) fn write(&self, p: &LightParams, out: &mut Vec<u8>) {
        pack_bits(out, self.values.iter().copied(), p.log_q1);
    }

    pub(crate) fn read(r: &mut Reader<'_>, p: &LightParams) -> Result<SharedHalf, OmrError> {
        Ok(SharedHalf {
            values: r.packed(p.ell * p.batch, p.log_q1)?,
        })
    }
}

impl BatchDigest {
    pub(crate) fn from_values(p: &LightParams, count: usize, values: Vec<u64>) -> BatchDigest {
        debug_assert_eq!(values.len(), p.ell * count);
        BatchDigest { count, values }
    }

    /// Messages it covers.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn encoded_len(p: &LightParams, count: usize) -> usize {
        (p.ell * count * p.log_q0 as usize).div_ceil(8)
    }

    pub(crate) fn write(&self, p: &LightParams, out: &mut Vec<u8>) {
        pack_bits(out, self.values.iter().copied(), p.log_q0);
    }

    pub(crate) fn read(
        r: &mut Reader<'_>,
        p: &LightParams,
        count: usize,
    ) -> Result<BatchDigest, OmrError> {
        Ok(BatchDigest {
            count,
            values: r.packed(p.ell * count, p.log_q0)?,
        })
    }
}

/// One batch of a recipient's digest: where it starts on the board, its own half and the shared
/// one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestPart {
    /// Board index of the batch's first message.
    pub first: u64,
    pub own: BatchDigest,
    pub shared: SharedHalf,
}

/// A recipient's digest of consecutive batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    params: &'static LightParams,
    pub parts: Vec<DigestPart>,
}

/// Bytes of one batch of `count` messages in an encoded digest: its first index (u64), its count
/// (u32) and both halves.
fn part_encoded_len(p: &LightParams, count: usize) -> usize {
    12 + BatchDigest::encoded_len(p, count) + SharedHalf::encoded_len(p)
}

/// The most batches one encoded digest may hold (2^16 batches, 2^28 messages).
pub const MAX_DIGEST_BATCHES: usize = 1 << 16;

impl Digest {
    pub fn new(params: &'static LightParams, parts: Vec<DigestPart>) -> Digest {
        Digest { params, parts }
    }

    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    /// Bytes of an encoded digest whose batches hold `counts` messages.
    pub fn encoded_len(p: &LightParams, counts: &[usize]) -> usize {
        HEADER_LEN
            + 4
            + counts
                .iter()
                .map(|&c| part_encoded_len(p, c))
                .sum::<usize>()
    }

    /// Board messages it covers.
    pub fn messages(&self) -> u64 {
        self.parts.iter().map(|p| p.own.count as u64).sum()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let p = self.params;
        let mut out = Vec::new();
        write_header(&mut out, Kind::Digest, p);
        out.extend_from_slice(&(self.parts.len() as u32).to_le_bytes());
        for part in &self.parts {
            out.extend_from_slice(&part.first.to_le_bytes());
            out.extend_from_slice(&(part.own.count as u32).to_le_bytes());
            part.own.write(p, &mut out);
            part.shared.write(p, &mut out);
        }
        out
    }

    /// Decode a digest; every declared count is checked against the bytes that remain before
    /// anything is allocated for it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Digest, OmrError> {
        let p = &OMR_LIGHT_V1;
        let per_batch = part_encoded_len(p, p.batch);
        let limit = HEADER_LEN + 4 + MAX_DIGEST_BATCHES * per_batch;
        let (mut r, p) = open(bytes, Kind::Digest, limit)?;
        let batches = r.u32()? as usize;
        if batches > MAX_DIGEST_BATCHES {
            return Err(r.err(format!("{batches} batches, at most {MAX_DIGEST_BATCHES}")));
        }
        let mut parts = Vec::with_capacity(batches.min(bytes.len() / per_batch.max(1) + 1));
        let mut next_first: Option<u64> = None;
        for _ in 0..batches {
            let first = r.u64()?;
            let count = r.u32()? as usize;
            if count == 0 || count > p.batch {
                return Err(r.err(format!("a batch of {count} messages (1..={})", p.batch)));
            }
            if first % p.batch as u64 != 0 || next_first.is_some_and(|f| first < f) {
                return Err(r.err(format!("batch at {first} out of order or not aligned")));
            }
            next_first = Some(
                first
                    .checked_add(p.batch as u64)
                    .ok_or_else(|| r.err(format!("batch at {first} runs past the board")))?,
            );
            let own = BatchDigest::read(&mut r, p, count)?;
            let shared = SharedHalf::read(&mut r, p)?;
            parts.push(DigestPart { first, own, shared });
        }
        r.finish()?;
        Ok(Digest { params: p, parts })
    }
}
