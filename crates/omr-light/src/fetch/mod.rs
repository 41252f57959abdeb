//! The batch payload fetch of docs/light/STUDY.md §7: a recipient fetches up to
//! [`RECORDS_PER_FETCH`] records (payloads) among every record of the served epochs in one
//! round, and the server learns nothing of which.
//!
//! - **Buckets.** Every record sits in its three candidate buckets (public hashes of its board
//!   index, [`layout::candidate_buckets`]); a client places its wanted records in distinct
//!   buckets by cuckoo hashing ([`layout::assign`]) and asks every bucket for one record (a
//!   dummy where it wants none), so each round looks the same.
//! - **One query.** The values of every bucket (a one-hot selector over the grid rows, and
//!   three fold bits and three rotation bits as gadget rows) travel in the coefficients of a few
//!   seeded RLWE ciphertexts, expanded by the server (`expand`).
//! - **Per bucket.** The selectors pick a grid row (the first dimension, a sum of plaintext
//!   products); seven CMux (`cmux`) fold its 8 plaintexts into the wanted one by three bits;
//!   three more rotate the wanted record's residue class to 0; a trace (three automorphisms)
//!   zeroes the other seven.
//! - **Answers.** Eight buckets' records share one ciphertext (bucket β's in class β), switched
//!   to 14 + 18 bits per coefficient: 16 KiB per 8 records.
//!
//! The client's one-time [`FetchKey`] (12 expansion keys and the key switching key from S² to
//! S) is uploaded like the detection key. Its secret is the recipient's, derived from its seed.

pub mod client;
pub mod layout;
pub mod server;
pub mod wire;

use crate::cmux::SquareKey;
use crate::expand::ExpansionKeys;

pub use client::FetchSecret;
pub use layout::Geometry;
pub use server::FetchDb;

/// Records one round fetches at most.
pub const RECORDS_PER_FETCH: usize = 50;
/// Buckets of a round: 1.5 × [`RECORDS_PER_FETCH`].
pub const BUCKETS: usize = 75;
/// Buckets whose records share one answer ciphertext.
pub const BUCKETS_PER_ANSWER: usize = 8;
/// Bits of an answer's c0 after the modulus switch.
pub const ANSWER_C0_BITS: u32 = 14;
/// Bits of an answer's c1 after the modulus switch.
pub const ANSWER_C1_BITS: u32 = 18;

/// What a recipient uploads once so that the server can answer its fetches.
#[derive(Debug)]
pub struct FetchKey {
    pub(crate) expansion: ExpansionKeys,
    pub(crate) square: SquareKey,
}

/// One round's query: the snapshot it is for (its board range, rows and buckets) and seeded
/// ciphertexts, each with the levels it is expanded by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchQuery {
    pub range: (u64, u64),
    pub rows: usize,
    pub buckets: usize,
    pub(crate) parts: Vec<QueryPart>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueryPart {
    pub(crate) levels: u32,
    pub(crate) seed: [u8; 32],
    pub(crate) c0: Vec<u64>,
}

/// The answer for 8 buckets, after the modulus switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchAnswer {
    pub(crate) c0: Vec<u16>,
    pub(crate) c1: Vec<u32>,
}

/// The fewest levels a query part is expanded by (a smaller remainder is padded).
pub const MIN_PART_LEVELS: u32 = 8;

/// The parts (as expansion levels) the `values` of one query travel in: full parts of 4,096,
/// then the rest in one part of the next power of two (at least 2^[`MIN_PART_LEVELS`]), whose
/// unused tail the server prunes. Few parts keep the upload small, and every part ends with two
/// coarse levels, which do most of its switches.
pub(crate) fn chunk_levels(values: usize) -> Vec<u32> {
    let full = 1usize << crate::expand::MAX_LEVELS;
    let mut out = vec![crate::expand::MAX_LEVELS; values / full];
    let rest = values % full;
    if rest > 0 {
        out.push(
            rest.next_power_of_two()
                .trailing_zeros()
                .max(MIN_PART_LEVELS),
        );
    }
    out
}

#[cfg(test)]
mod tests;
