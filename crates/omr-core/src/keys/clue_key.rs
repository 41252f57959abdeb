//! The public clue key (the recipient's address): a seeded compact public key (or, for a
//! module-rank set, a seeded module key: `crate::mlwe`) whose body is rounded to its top bits;
//! its encoding.

use tfhe::core_crypto::commons::math::random::{CompressionSeed, Seed};
use tfhe::core_crypto::prelude::*;

use super::seeded::{native, round_drop};
use crate::codec::{pack_bits, write_header, Kind, Reader};
use crate::error::OmrError;
use crate::params::ParamSet;

/// Size limit when decoding a clue key (a little above the production size).
pub const CLUE_KEY_LIMIT: usize = 8 * 1024;

/// The public clue key (the recipient's address): a seeded compact public key whose body is
/// rounded to its top bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClueKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) seed: u128,
    /// Body coefficients, each the top `64 - clue_key_dropped_bits` bits.
    pub(crate) body_hi: Vec<u64>,
}

impl ClueKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    /// The transport form of a seeded compact public key: its body rounded to the top bits.
    pub(crate) fn from_seeded(params: &'static ParamSet, seed: u128, body: &[u64]) -> Self {
        let dropped = params.clue_key_dropped_bits();
        let body_hi = body.iter().map(|&b| round_drop(b, dropped)).collect();
        ClueKey {
            params,
            seed,
            body_hi,
        }
    }

    /// The key body at q = 2^64 (its dropped low bits zero).
    pub(crate) fn body(&self) -> Vec<u64> {
        let dropped = self.params.clue_key_dropped_bits();
        self.body_hi.iter().map(|&b| b << dropped).collect()
    }

    /// tfhe-rs's compact public key (rank-1 sets only).
    pub(crate) fn public_key(&self) -> LweCompactPublicKeyOwned<u64> {
        SeededLweCompactPublicKey::from_container(
            self.body(),
            CompressionSeed::from(Seed(self.seed)),
            native(),
        )
        .decompress_into_lwe_compact_public_key()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::ClueKey, self.params);
        out.extend_from_slice(&self.seed.to_le_bytes());
        pack_bits(
            &mut out,
            self.body_hi.iter().copied(),
            64 - self.params.clue_key_dropped_bits(),
        );
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, params) = Reader::open(bytes, Kind::ClueKey, CLUE_KEY_LIMIT)?;
        let seed = r.u128()?;
        let body_hi = r.packed(params.clue_dim, 64 - params.clue_key_dropped_bits())?;
        r.finish()?;
        Ok(ClueKey {
            params,
            seed,
            body_hi,
        })
    }
}
