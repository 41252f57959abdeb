//! The LWE keyswitching key from the extracted level-1 LWE (dimension N1) to the level-2 LWE key:
//! at the native modulus 2^64 (`omr-v1`), or at 2^32 (`omr-v2`, `ksk_modulus_log = 32`: tfhe-rs's
//! KS32 pattern, half the memory and half the bandwidth; the input is rounded to 32 bits first,
//! the output shifted back to 2^64 so that everything after it is unchanged).
//!
//! On the wire both are a [`SeededNative`]: 32-bit bodies travel in the top half of a 64-bit word,
//! so the rounding of bodies to their top bits and the encoding are the same code.

use tfhe::core_crypto::commons::math::random::{CompressionSeed, Seed};
use tfhe::core_crypto::prelude::*;

use super::secret::SecretKey;
use super::seeded::{native, SeededNative};
use crate::params::ParamSet;

/// An expanded LWE keyswitching key, 64- or 32-bit.
pub(crate) enum LweKsk {
    Native(LweKeyswitchKeyOwned<u64>),
    Half(LweKeyswitchKeyOwned<u32>),
}

impl ParamSet {
    /// Bits dropped from each LWE keyswitching key body on the wire, counted in the 64-bit word
    /// that carries it.
    pub(crate) fn ksk_dropped_bits(&self) -> u32 {
        ParamSet::dropped_bits_for_noise(self.lwe2_noise_log2) + (64 - self.ksk_modulus_log)
    }
}

/// tfhe-rs's native 32-bit modulus.
fn native32() -> CiphertextModulus<u32> {
    CiphertextModulus::new_native()
}

/// A binary 64-bit secret key as the same bits in 32-bit words.
fn narrow_key(key: &[u64]) -> LweSecretKeyOwned<u32> {
    LweSecretKey::from_container(key.iter().map(|&b| b as u32).collect())
}

/// Round a native-modulus value to 32 bits (to the nearest multiple of 2^32).
fn round_to_32(x: u64) -> u32 {
    (x.wrapping_add(1 << 31) >> 32) as u32
}

impl LweKsk {
    /// The zero key of `p`'s shape (what a decoder fills).
    pub(crate) fn zeroed(p: &ParamSet) -> Self {
        let (base, levels) = (
            DecompositionBaseLog(p.ksk_base_log),
            DecompositionLevelCount(p.ksk_levels),
        );
        let (n_in, n_out) = (LweDimension(p.n1), LweDimension(p.lwe2_dim));
        if p.ksk_modulus_log == 32 {
            LweKsk::Half(LweKeyswitchKey::new(
                0u32,
                base,
                levels,
                n_in,
                n_out,
                native32(),
            ))
        } else {
            LweKsk::Native(LweKeyswitchKey::new(
                0u64,
                base,
                levels,
                n_in,
                n_out,
                native(),
            ))
        }
    }

    /// Expand the seeded key (regenerate its masks).
    pub(crate) fn expand(p: &ParamSet, seeded: &SeededNative) -> Self {
        let (base, levels) = (
            DecompositionBaseLog(p.ksk_base_log),
            DecompositionLevelCount(p.ksk_levels),
        );
        let seed = CompressionSeed::from(Seed(seeded.seed));
        let size = LweSize(p.lwe2_dim + 1);
        if p.ksk_modulus_log == 32 {
            let bodies: Vec<u32> = seeded.bodies().iter().map(|&b| (b >> 32) as u32).collect();
            LweKsk::Half(
                SeededLweKeyswitchKey::from_container(bodies, base, levels, size, seed, native32())
                    .par_decompress_into_lwe_keyswitch_key(),
            )
        } else {
            LweKsk::Native(
                SeededLweKeyswitchKey::from_container(
                    seeded.bodies(),
                    base,
                    levels,
                    size,
                    seed,
                    native(),
                )
                .par_decompress_into_lwe_keyswitch_key(),
            )
        }
    }

    /// Keyswitch `input` (dimension N1, modulus 2^64) to `output` (dimension n2, modulus 2^64).
    pub(crate) fn keyswitch(
        &self,
        input: &LweCiphertextOwned<u64>,
        output: &mut LweCiphertextOwned<u64>,
    ) {
        match self {
            LweKsk::Native(k) => keyswitch_lwe_ciphertext(k, input, output),
            LweKsk::Half(k) => {
                let narrow: Vec<u32> = input.as_ref().iter().map(|&x| round_to_32(x)).collect();
                let narrow = LweCiphertext::from_container(narrow, native32());
                let mut out = LweCiphertext::new(0u32, output.lwe_size(), native32());
                keyswitch_lwe_ciphertext(k, &narrow, &mut out);
                for (o, &x) in output.as_mut().iter_mut().zip(out.as_ref()) {
                    *o = (x as u64) << 32;
                }
            }
        }
    }

    /// Bytes of server memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        match self {
            LweKsk::Native(k) => k.as_ref().len() * 8,
            LweKsk::Half(k) => k.as_ref().len() * 4,
        }
    }

    /// Element count (the same for both widths).
    pub(crate) fn len(&self) -> usize {
        match self {
            LweKsk::Native(k) => k.as_ref().len(),
            LweKsk::Half(k) => k.as_ref().len(),
        }
    }
}

/// Generate the seeded keyswitching key of `sk` with a public `seed`.
pub(crate) fn generate_seeded(sk: &SecretKey, seed: u128, seeder: &mut dyn Seeder) -> SeededNative {
    let p = sk.params;
    let (base, levels) = (
        DecompositionBaseLog(p.ksk_base_log),
        DecompositionLevelCount(p.ksk_levels),
    );
    let (n_in, n_out) = (LweDimension(p.n1), LweDimension(p.lwe2_dim));
    let compression = CompressionSeed::from(Seed(seed));
    let bodies: Vec<u64> = if p.ksk_modulus_log == 32 {
        let mut ksk =
            SeededLweKeyswitchKey::new(0u32, base, levels, n_in, n_out, compression, native32());
        generate_seeded_lwe_keyswitch_key(
            &narrow_key(sk.glwe1.as_ref()),
            &narrow_key(sk.lwe2.as_ref()),
            &mut ksk,
            DynamicDistribution::<u32>::new_t_uniform(p.lwe2_noise_log2),
            seeder,
        );
        ksk.into_container()
            .iter()
            .map(|&b| (b as u64) << 32)
            .collect()
    } else {
        let mut ksk =
            SeededLweKeyswitchKey::new(0u64, base, levels, n_in, n_out, compression, native());
        generate_seeded_lwe_keyswitch_key(
            &sk.glwe1.as_lwe_secret_key(),
            &sk.lwe2,
            &mut ksk,
            DynamicDistribution::<u64>::new_t_uniform(p.lwe2_noise_log2),
            seeder,
        );
        ksk.into_container()
    };
    SeededNative::compress(seed, &bodies, p.ksk_dropped_bits())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_32_bits_is_to_the_nearest() {
        assert_eq!(round_to_32(0), 0);
        assert_eq!(round_to_32((1 << 31) - 1), 0);
        assert_eq!(round_to_32(1 << 31), 1);
        assert_eq!(round_to_32(u64::MAX), 0);
        assert_eq!(round_to_32(5 << 32), 5);
    }
}
