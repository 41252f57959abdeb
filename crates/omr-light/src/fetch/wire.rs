//! The fetch's encodings (the light header, kinds 21–23): the one-time key, a round's query and
//! its answers. Decoders check every length, count and residue before anything is kept, so a
//! server refuses a malformed upload or query before it does any work.

use omr_core::codec::pack_bits;
use omr_core::OmrError;

use super::layout::values_per_bucket;
use super::{chunk_levels, FetchAnswer, FetchKey, FetchQuery, QueryPart};
use super::{ANSWER_C0_BITS, ANSWER_C1_BITS, MIN_PART_LEVELS};
use crate::cmux::SquareKey;
use crate::codec::{open, write_header, Kind, HEADER_LEN};
use crate::expand::{ExpansionKeys, MAX_LEVELS};
use crate::params::{LightParams, PRIME_Q as Q};
use crate::rlwe::D;
use crate::switch::{SwitchKey, COARSE, ROW_BYTES};

/// The most rows a query's geometry may have (a bucket of 2^20 records).
const MAX_ROWS: u32 = 1 << 14;
/// The most buckets.
const MAX_BUCKETS: u32 = 1 << 10;

impl FetchKey {
    /// The encoding: the header, then every key's rows (`SwitchKey::write`) in a fixed order
    /// (fine keys of levels 0..9, coarse keys of levels 5..12, the S²→S key).
    pub fn to_bytes(&self, p: &LightParams) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::encoded_len());
        write_header(&mut out, Kind::FetchKey, p);
        for key in self.expansion.keys() {
            key.key().write(&mut out);
        }
        self.square.0.write(&mut out);
        out
    }

    /// Bytes of the encoding.
    pub fn encoded_len() -> usize {
        HEADER_LEN
            + ExpansionKeys::rows_for(MIN_PART_LEVELS) * ROW_BYTES
            + COARSE.digits * ROW_BYTES
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<(FetchKey, &'static LightParams), OmrError> {
        let (mut r, p) = open(bytes, Kind::FetchKey, Self::encoded_len())?;
        let expansion = ExpansionKeys::read(&mut r, MIN_PART_LEVELS)?;
        let square = SquareKey(SwitchKey::read(&mut r, COARSE)?);
        r.finish()?;
        Ok((FetchKey { expansion, square }, p))
    }
}

impl FetchQuery {
    /// The encoding: the header, the snapshot's range, its rows and buckets, then every part
    /// (levels, seed, c0 at 62 bits).
    pub fn to_bytes(&self, p: &LightParams) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::FetchQuery, p);
        out.extend_from_slice(&self.range.0.to_le_bytes());
        out.extend_from_slice(&self.range.1.to_le_bytes());
        out.extend_from_slice(&(self.rows as u32).to_le_bytes());
        out.extend_from_slice(&(self.buckets as u32).to_le_bytes());
        out.push(self.parts.len() as u8);
        for part in &self.parts {
            out.push(part.levels as u8);
            out.extend_from_slice(&part.seed);
            pack_bits(&mut out, part.c0.iter().copied(), 62);
        }
        out
    }

    /// The most bytes a query takes for `buckets` buckets of `rows` rows.
    pub fn max_encoded_len(rows: usize, buckets: usize) -> usize {
        let values = buckets * values_per_bucket(rows);
        HEADER_LEN + 8 + 8 + 4 + 4 + 1 + chunk_levels(values).len() * (1 + ROW_BYTES)
    }

    /// A query; its parts must be the ones its rows and buckets make.
    pub fn from_bytes(
        bytes: &[u8],
        limit: usize,
    ) -> Result<(FetchQuery, &'static LightParams), OmrError> {
        let (mut r, p) = open(bytes, Kind::FetchQuery, limit)?;
        let range = (r.u64()?, r.u64()?);
        let (rows, buckets) = (r.u32()?, r.u32()?);
        if range.0 > range.1
            || rows == 0
            || rows > MAX_ROWS
            || buckets == 0
            || buckets > MAX_BUCKETS
        {
            return Err(r.err(format!(
                "range {}..{}, {rows} rows and {buckets} buckets are not a fetch's",
                range.0, range.1
            )));
        }
        let (rows, buckets) = (rows as usize, buckets as usize);
        let want = chunk_levels(buckets * values_per_bucket(rows));
        let count = r.u8()? as usize;
        if count != want.len() {
            return Err(r.err(format!("{count} parts, the geometry makes {}", want.len())));
        }
        let mut parts = Vec::with_capacity(count);
        for &levels in &want {
            let got = u32::from(r.u8()?);
            if got != levels {
                return Err(r.err(format!(
                    "a part of {got} levels where the geometry makes {levels}"
                )));
            }
            let seed = r.array32()?;
            let c0 = r.packed(D, 62)?;
            if c0.iter().any(|&x| x >= Q) {
                return Err(r.err("a coefficient not below Q"));
            }
            parts.push(QueryPart { levels, seed, c0 });
        }
        r.finish()?;
        Ok((
            FetchQuery {
                range,
                rows,
                buckets,
                parts,
            },
            p,
        ))
    }
}

/// Bytes of one answer's two polynomials.
const ANSWER_BYTES: usize = D * (ANSWER_C0_BITS + ANSWER_C1_BITS) as usize / 8;

/// The encoding of a round's answers: the header, their count, then each (c0 at 14 bits, c1 at
/// 18).
pub fn answers_to_bytes(p: &LightParams, answers: &[FetchAnswer]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 1 + answers.len() * ANSWER_BYTES);
    write_header(&mut out, Kind::FetchAnswers, p);
    out.push(answers.len() as u8);
    for a in answers {
        pack_bits(&mut out, a.c0.iter().map(|&v| u64::from(v)), ANSWER_C0_BITS);
        pack_bits(&mut out, a.c1.iter().map(|&v| u64::from(v)), ANSWER_C1_BITS);
    }
    out
}

/// Bytes of the answers to a round of `buckets` buckets.
pub fn answers_len(buckets: usize) -> usize {
    HEADER_LEN + 1 + buckets.div_ceil(super::BUCKETS_PER_ANSWER) * ANSWER_BYTES
}

/// The answers of [`answers_to_bytes`], `expected` of them.
pub fn answers_from_bytes(bytes: &[u8], expected: usize) -> Result<Vec<FetchAnswer>, OmrError> {
    let limit = HEADER_LEN + 1 + expected * ANSWER_BYTES;
    let (mut r, _) = open(bytes, Kind::FetchAnswers, limit)?;
    let count = r.u8()? as usize;
    if count != expected {
        return Err(r.err(format!("{count} answers, a round has {expected}")));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let c0 = r
            .packed(D, ANSWER_C0_BITS)?
            .into_iter()
            .map(|v| v as u16)
            .collect();
        let c1 = r
            .packed(D, ANSWER_C1_BITS)?
            .into_iter()
            .map(|v| v as u32)
            .collect();
        out.push(FetchAnswer { c0, c1 });
    }
    r.finish()?;
    Ok(out)
}

impl ExpansionKeys {
    /// Rows of the keys for expansions of at least `min_levels` levels.
    pub fn rows_for(min_levels: u32) -> usize {
        let coarse_from = min_levels.saturating_sub(crate::expand::COARSE_LEVELS);
        let fine = (MAX_LEVELS - crate::expand::COARSE_LEVELS) as usize;
        fine * crate::switch::FINE.digits + (MAX_LEVELS - coarse_from) as usize * COARSE.digits
    }
}
