//! Seeded native-modulus keys on the wire: tfhe's seed and the key bodies rounded to their top
//! bits (the dropped bits are below the key's own noise), and their encoding.

use tfhe::core_crypto::prelude::CiphertextModulus;

use crate::codec::{pack_bits, Reader};
use crate::error::OmrError;

/// The native modulus 2^64 of every tfhe-rs key and ciphertext.
pub(crate) fn native() -> CiphertextModulus<u64> {
    CiphertextModulus::new_native()
}

/// A seeded native-modulus key on the wire: tfhe's seed and its bodies rounded to their top bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeededNative {
    pub(crate) seed: u128,
    pub(crate) dropped_bits: u32,
    pub(crate) bodies_hi: Vec<u64>,
}

impl SeededNative {
    pub(crate) fn compress(seed: u128, bodies: &[u64], dropped_bits: u32) -> Self {
        let bodies_hi = bodies
            .iter()
            .map(|&b| round_drop(b, dropped_bits))
            .collect();
        SeededNative {
            seed,
            dropped_bits,
            bodies_hi,
        }
    }

    pub(crate) fn bodies(&self) -> Vec<u64> {
        self.bodies_hi
            .iter()
            .map(|&b| b << self.dropped_bits)
            .collect()
    }

    pub(crate) fn bits(&self) -> u32 {
        64 - self.dropped_bits
    }

    /// Append the seed, the body width and the packed bodies, as [`read_from`](Self::read_from)
    /// reads them.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seed.to_le_bytes());
        out.push(self.dropped_bits as u8);
        pack_bits(out, self.bodies_hi.iter().copied(), self.bits());
    }

    /// Read `count` bodies; the encoded width must be the one the parameter set implies.
    pub(crate) fn read_from(
        r: &mut Reader<'_>,
        count: usize,
        dropped_bits: u32,
    ) -> Result<Self, OmrError> {
        let seed = r.u128()?;
        let got = r.u8()? as u32;
        if got != dropped_bits {
            return Err(r.err(format!(
                "key body width {got} does not match the parameter set"
            )));
        }
        let bodies_hi = r.packed(count, 64 - dropped_bits)?;
        Ok(SeededNative {
            seed,
            dropped_bits,
            bodies_hi,
        })
    }
}

/// Round `x` to its top `64 - bits` bits (round half up, wrapping).
pub(crate) fn round_drop(x: u64, bits: u32) -> u64 {
    if bits == 0 {
        return x;
    }
    let keep = 64 - bits;
    let r = x.wrapping_add(1u64 << (bits - 1)) >> bits;
    if keep == 64 {
        r
    } else {
        r & ((1u64 << keep) - 1)
    }
}
