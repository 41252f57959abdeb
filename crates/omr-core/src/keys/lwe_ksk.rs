//! The LWE keyswitching key from the extracted level-1 LWE (dimension N1) to the level-2 LWE key:
//! at the native modulus 2^64 (`omr-v1`), or at 2^32 (`omr-v2`, `ksk_modulus_log = 32`: tfhe-rs's
//! KS32 pattern, half the memory and half the bandwidth; the input is rounded to 32 bits first,
//! the output shifted back to 2^64 so that everything after it is unchanged).
//!
//! On the wire both are a [`SeededNative`]: 32-bit bodies travel in the top half of a 64-bit word,
//! so the rounding of bodies to their top bits and the encoding are the same code.

use tfhe::core_crypto::algorithms::slice_algorithms::slice_wrapping_sub_scalar_mul_assign;
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

    /// Keyswitch every input (dimension N1, modulus 2^64) to an LWE of the key's output
    /// dimension n2, modulus 2^64. The key is read once for the whole batch: row by row, each row applied to every
    /// input before the next. At 38 MB (omr-v2) the key does not stay in cache, so a keyswitch
    /// per input streamed it from memory once per input. Each output gets tfhe-rs's operations
    /// in tfhe-rs's order (`keyswitch_lwe_ciphertext`), so the result is the same to the bit.
    pub(crate) fn keyswitch_batch(
        &self,
        inputs: &[LweCiphertextOwned<u64>],
    ) -> Vec<LweCiphertextOwned<u64>> {
        match self {
            LweKsk::Native(k) => {
                let inputs: Vec<&[u64]> = inputs.iter().map(|c| c.as_ref()).collect();
                keyswitch_rows(k, &inputs)
                    .into_iter()
                    .map(|out| LweCiphertext::from_container(out, native()))
                    .collect()
            }
            LweKsk::Half(k) => {
                let narrow: Vec<Vec<u32>> = inputs
                    .iter()
                    .map(|c| c.as_ref().iter().map(|&x| round_to_32(x)).collect())
                    .collect();
                let narrow: Vec<&[u32]> = narrow.iter().map(Vec::as_slice).collect();
                keyswitch_rows(k, &narrow)
                    .into_iter()
                    .map(|out| {
                        let wide = out.iter().map(|&x| (x as u64) << 32).collect();
                        LweCiphertext::from_container(wide, native())
                    })
                    .collect()
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

/// tfhe-rs's native-modulus keyswitch (`keyswitch_lwe_ciphertext_native_mod_compatible`) of
/// every input, with the loops turned: key row outside, input inside. `inputs` are whole LWE
/// ciphertexts (mask, then body) of the key's input dimension.
fn keyswitch_rows<S: UnsignedInteger>(
    ksk: &LweKeyswitchKeyOwned<S>,
    inputs: &[&[S]],
) -> Vec<Vec<S>> {
    let size = ksk.output_lwe_size();
    let n_in = ksk.input_key_lwe_dimension().0;
    let mut outs: Vec<Vec<S>> = inputs
        .iter()
        .map(|input| {
            assert_eq!(input.len(), n_in + 1, "input dimension");
            let mut out = vec![S::ZERO; size.0];
            out[size.0 - 1] = input[n_in];
            out
        })
        .collect();
    let decomposer = SignedDecomposer::new(
        ksk.decomposition_base_log(),
        ksk.decomposition_level_count(),
    );
    for (i, block) in ksk.iter().enumerate() {
        for (out, input) in outs.iter_mut().zip(inputs) {
            for (row, digit) in block.iter().zip(decomposer.decompose(input[i])) {
                slice_wrapping_sub_scalar_mul_assign(out, row.as_ref(), digit.value());
            }
        }
    }
    outs
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

    /// A keyswitching key between random binary keys of dimension 64 → 24 and `count` random
    /// inputs of dimension 64.
    fn setup<S: UnsignedTorus + CastFrom<u64>>(
        count: usize,
    ) -> (LweKeyswitchKeyOwned<S>, Vec<Vec<S>>) {
        let mut seeder = new_seeder();
        let seeder = seeder.as_mut();
        let mut secret = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
        let mut enc =
            EncryptionRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed(), seeder);
        let from: LweSecretKeyOwned<S> =
            allocate_and_generate_new_binary_lwe_secret_key(LweDimension(64), &mut secret);
        let to: LweSecretKeyOwned<S> =
            allocate_and_generate_new_binary_lwe_secret_key(LweDimension(24), &mut secret);
        let ksk = allocate_and_generate_new_lwe_keyswitch_key(
            &from,
            &to,
            DecompositionBaseLog(S::BITS / 8),
            DecompositionLevelCount(5),
            DynamicDistribution::new_t_uniform(3),
            CiphertextModulus::new_native(),
            &mut enc,
        );
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let inputs = (0..count)
            .map(|_| {
                (0..65)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        S::cast_from(state >> (64 - S::BITS))
                    })
                    .collect()
            })
            .collect();
        (ksk, inputs)
    }

    /// tfhe-rs's keyswitch of one input.
    fn tfhe_keyswitch<S: UnsignedTorus>(ksk: &LweKeyswitchKeyOwned<S>, input: &[S]) -> Vec<S> {
        let native = CiphertextModulus::new_native();
        let input = LweCiphertext::from_container(input, native);
        let mut out = LweCiphertext::new(S::ZERO, ksk.output_lwe_size(), native);
        keyswitch_lwe_ciphertext(ksk, &input, &mut out);
        out.into_container()
    }

    #[test]
    fn the_batched_keyswitch_is_tfhe_rs_keyswitch_to_the_bit() {
        let (ksk, inputs) = setup::<u64>(5);
        let wide: Vec<LweCiphertextOwned<u64>> = inputs
            .iter()
            .map(|i| LweCiphertext::from_container(i.clone(), native()))
            .collect();
        let batch = LweKsk::Native(ksk.clone()).keyswitch_batch(&wide);
        assert_eq!(batch.len(), 5);
        for (got, input) in batch.iter().zip(&inputs) {
            assert_eq!(got.as_ref(), tfhe_keyswitch(&ksk, input).as_slice());
        }

        // 32 bits: the input rounded to its top half, the output put back there.
        let (ksk, _) = setup::<u32>(0);
        let batch = LweKsk::Half(ksk.clone()).keyswitch_batch(&wide);
        for (got, input) in batch.iter().zip(&inputs) {
            let narrow: Vec<u32> = input.iter().map(|&x| round_to_32(x)).collect();
            let want: Vec<u64> = tfhe_keyswitch(&ksk, &narrow)
                .iter()
                .map(|&x| (x as u64) << 32)
                .collect();
            assert_eq!(got.as_ref(), want.as_slice());
        }
        // An empty batch is an empty result.
        assert!(LweKsk::Half(ksk).keyswitch_batch(&[]).is_empty());
    }
}
