//! The sender's side: a clue is ℓ encryptions of zero under the recipient's clue key, made with
//! the compact public key (`omr-v1`: one shared mask polynomial, ℓ bodies) or the module key
//! (`omr-v2`: one shared mask of r polynomials, ℓ bodies; `crate::mlwe`), modulus-switched to
//! 2·N1 and bit-packed.

use tfhe::core_crypto::prelude::*;

use tfhe::core_crypto::commons::math::random::RandomGenerator;

use crate::codec::{pack_bits, write_header, Kind, Reader, HEADER_LEN};
use crate::error::OmrError;
use crate::keys::ClueKey;
use crate::mlwe;
use crate::params::ParamSet;

/// Size limit when decoding a clue.
pub const CLUE_LIMIT: usize = 4 * 1024;

/// One message's clue: the shared mask and ℓ bodies, each reduced modulo 2·N1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clue {
    pub(crate) params: &'static ParamSet,
    pub(crate) mask: Vec<u64>,
    pub(crate) bodies: Vec<u64>,
}

impl ParamSet {
    /// Wire size of a clue in bytes (header included).
    pub fn clue_bytes(&self) -> usize {
        HEADER_LEN
            + ((self.clue_dim + self.clue_count) * self.clue_modulus_log() as usize).div_ceil(8)
    }
}

/// round(x · 2^log / 2^64) mod 2^log.
#[inline]
pub(crate) fn switch_native(x: u64, log: u32) -> u64 {
    let shift = 64 - log;
    (x.wrapping_add(1u64 << (shift - 1)) >> shift) & ((1u64 << log) - 1)
}

impl ClueKey {
    /// Encrypt a fresh clue for this address (sender side; uses OS entropy).
    pub fn make_clue(&self) -> Clue {
        let p = self.params;
        let mut boxed = new_seeder();
        let seeder = boxed.as_mut();
        if p.clue_rank > 1 {
            let mut gen = RandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
            let (mask, bodies) = mlwe::encrypt_zeros(p, self.seed, &self.body(), &mut gen);
            return Clue::switched(p, &mask, &bodies);
        }
        let pk = self.public_key();
        let mut gen =
            EncryptionRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed(), seeder);
        let mut list = LweCompactCiphertextList::new(
            0u64,
            LweSize(p.clue_dim + 1),
            LweCiphertextCount(p.clue_count),
            CiphertextModulus::new_native(),
        );
        let zeros = PlaintextList::new(0u64, PlaintextCount(p.clue_count));
        let noise = DynamicDistribution::new_t_uniform(p.clue_noise_log2);
        encrypt_lwe_compact_ciphertext_list_with_compact_public_key(
            &pk,
            &mut list,
            &zeros,
            noise,
            noise,
            gen.noise_generator_mut(),
        );
        let (mask_list, body_list) = list.get_mask_and_body_list();
        Clue::switched(p, mask_list.as_ref(), body_list.as_ref())
    }
}

impl Clue {
    /// The clue of a native-modulus mask and bodies, switched to the transport modulus 2·N1.
    fn switched(p: &'static ParamSet, mask: &[u64], bodies: &[u64]) -> Clue {
        let log = p.clue_modulus_log();
        Clue {
            params: p,
            mask: mask.iter().map(|&a| switch_native(a, log)).collect(),
            bodies: bodies.iter().map(|&b| switch_native(b, log)).collect(),
        }
    }

    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.params.clue_bytes());
        write_header(&mut out, Kind::Clue, self.params);
        self.write_body(&mut out);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::Clue, CLUE_LIMIT)?;
        let clue = Self::read_body(&mut r, p)?;
        r.finish()?;
        Ok(clue)
    }

    /// The packed mask and bodies, without a header.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        let log = self.params.clue_modulus_log();
        pack_bits(out, self.mask.iter().chain(&self.bodies).copied(), log);
    }

    pub(crate) fn read_body(r: &mut Reader<'_>, p: &'static ParamSet) -> Result<Self, OmrError> {
        let mut values = r.packed(p.clue_dim + p.clue_count, p.clue_modulus_log())?;
        let bodies = values.split_off(p.clue_dim);
        Ok(Clue {
            params: p,
            mask: values,
            bodies,
        })
    }

    /// Mask of the j-th expanded LWE ciphertext, on values modulo 2·N1: for rank 1 the shared
    /// mask times X^j (negacyclic), as tfhe's compact-list expansion defines it; for a module
    /// key, [`mlwe::expanded_mask`].
    pub(crate) fn expanded_mask(&self, j: usize, out: &mut [usize]) {
        let n = self.mask.len();
        let q = 1u64 << self.params.clue_modulus_log();
        if self.params.clue_rank > 1 {
            return mlwe::expanded_mask(&self.mask, self.params.clue_rank, j, q - 1, out);
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = if i >= j {
                self.mask[i - j]
            } else {
                (q - self.mask[i + n - j]) % q
            } as usize;
        }
    }
}
