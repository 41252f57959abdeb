//! Blind rotation of a batch of modulus-switched LWE ciphertexts: with a whole tfhe-rs key, or
//! with one decomposition level of a key (level 1 of a set whose level 1 uses the level-2 key).

use tfhe::core_crypto::algorithms::polynomial_algorithms::polynomial_wrapping_monic_monomial_div;
use tfhe::core_crypto::prelude::*;

use super::cmux::{cmux_group, CmuxScratch, GROUP};
use super::decompose::Gadget;

/// A modulus-switched LWE ciphertext as tfhe-rs's blind rotation reads it.
pub(crate) struct SwitchedLwe<'a> {
    pub(crate) mask: &'a [usize],
    pub(crate) body: usize,
    pub(crate) log: CiphertextModulusLog,
}

impl ModulusSwitchedLweCiphertext<usize> for SwitchedLwe<'_> {
    fn log_modulus(&self) -> CiphertextModulusLog {
        self.log
    }
    fn lwe_dimension(&self) -> LweDimension {
        LweDimension(self.mask.len())
    }
    fn body(&self) -> usize {
        self.body
    }
    fn mask(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.mask.iter().copied()
    }
}

/// Blind-rotate every input with the same test vector, reading the key as `gadget` says (all
/// its levels, or one level as a one-level key of a larger base). Each GGSW is loaded once for
/// the whole batch: the loop runs key bit by key bit, the CMUXes of the inputs in groups
/// ([`cmux_group`]).
pub(crate) fn batch_rotate(
    bsk: &FourierLweBootstrapKeyOwned,
    gadget: Gadget,
    tv: &[u64],
    inputs: &[SwitchedLwe<'_>],
) -> Vec<GlweCiphertextOwned<u64>> {
    let n = PolynomialSize(tv.len());
    let glwe = bsk.glwe_size();
    let native = CiphertextModulus::<u64>::new_native();
    let mut accs: Vec<GlweCiphertextOwned<u64>> = inputs
        .iter()
        .map(|input| {
            let mut acc = GlweCiphertext::new(0u64, glwe, n, native);
            let mut body = acc.get_mut_body();
            let mut poly = body.as_mut_polynomial();
            polynomial_wrapping_monic_monomial_div(
                &mut poly,
                &Polynomial::from_container(tv),
                MonomialDegree(input.body),
            );
            acc
        })
        .collect();
    let fft = Fft::new(n);
    let fft = fft.as_view();
    let mut scratch = CmuxScratch::new(glwe.0, n.0, gadget.levels, fft);
    // Grouping saves key loads at the price of a larger working set (each input's transforms
    // and products at once). With one key row per output polynomial (one level, as omr-v2's
    // level 1) the loads saved are few and the group is slightly slower; with 3 levels (omr-v2's
    // level 2) it pays, as long as the scratch's polynomials are padded apart (`cmux::PAD`:
    // unpadded, they evict each other and the group is slower than one input at a time).
    let size = if gadget.levels > 1 { GROUP } else { 1 };
    for (i, ggsw) in bsk.as_view().into_ggsw_iter().enumerate() {
        // The inputs whose mask coefficient i is not zero, in groups of `size`.
        let mut group: Vec<&mut [u64]> = Vec::with_capacity(size);
        let mut shifts = [0usize; GROUP];
        for (acc, input) in accs.iter_mut().zip(inputs) {
            let a = input.mask[i];
            if a == 0 {
                continue;
            }
            shifts[group.len()] = a;
            group.push(acc.as_mut());
            if group.len() == size {
                cmux_group(&mut group, &shifts[..size], ggsw, gadget, fft, &mut scratch);
                group.clear();
            }
        }
        if !group.is_empty() {
            let len = group.len();
            cmux_group(&mut group, &shifts[..len], ggsw, gadget, fft, &mut scratch);
        }
    }
    accs
}

/// The whole key, as it was made.
pub(crate) fn whole_key(bsk: &FourierLweBootstrapKeyOwned) -> Gadget {
    Gadget {
        base_log: bsk.decomposition_base_log().0,
        levels: bsk.decomposition_level_count().0,
        key_level: None,
    }
}

/// The key's rows of level `level` (those at q/B^level) as a one-level key of base
/// 2^`base_log` = B^level.
pub(crate) fn one_level(level: usize, base_log: usize) -> Gadget {
    Gadget {
        base_log,
        levels: 1,
        key_level: Some(level),
    }
}

#[cfg(test)]
mod tests {
    use super::{batch_rotate, one_level, whole_key, SwitchedLwe};
    use tfhe::core_crypto::fft_impl::fft64::crypto::bootstrap::batch_blind_rotate_assign_scratch;
    use tfhe::core_crypto::prelude::*;

    const N: usize = 512;
    const SMALL_N: usize = 32;

    /// tfhe-rs's own batched blind rotation, the oracle.
    fn tfhe_rotate(
        bsk: &FourierLweBootstrapKeyOwned,
        tv: &[u64],
        inputs: &[SwitchedLwe<'_>],
    ) -> Vec<GlweCiphertextOwned<u64>> {
        let n = PolynomialSize(tv.len());
        let native = CiphertextModulus::<u64>::new_native();
        let count = GlweCiphertextCount(inputs.len());
        let mut luts = GlweCiphertextList::new(0u64, GlweSize(2), n, count, native);
        for mut lut in luts.iter_mut() {
            lut.get_mut_body().as_mut().copy_from_slice(tv);
        }
        let fft = Fft::new(n);
        let fft = fft.as_view();
        let mut buffers = ComputationBuffers::new();
        let batch = CiphertextCount(inputs.len());
        buffers.resize(
            batch_blind_rotate_assign_scratch::<u64>(GlweSize(2), n, batch, fft)
                .unaligned_bytes_required(),
        );
        bsk.as_view()
            .batch_blind_rotate_assign(luts.as_mut_view(), inputs, fft, buffers.stack());
        luts.iter()
            .map(|g| GlweCiphertext::from_container(g.as_ref().to_vec(), n, native))
            .collect()
    }

    /// The decrypted coefficients of `glwe` under `key`.
    fn phases(glwe: &GlweCiphertextOwned<u64>, key: &GlweSecretKeyOwned<u64>) -> Vec<u64> {
        let mut out = PlaintextList::new(0u64, PlaintextCount(N));
        decrypt_glwe_ciphertext(key, glwe, &mut out);
        out.into_container()
    }

    fn distance(x: u64, y: u64) -> u64 {
        x.wrapping_sub(y).min(y.wrapping_sub(x))
    }

    /// X^−φ·tv, coefficient j: tv[φ + j] with the negacyclic sign.
    fn expected(tv: &[u64], phase: usize, j: usize) -> u64 {
        let m = (phase + j) % (2 * N);
        if m < N {
            tv[m]
        } else {
            tv[m - N].wrapping_neg()
        }
    }

    #[test]
    fn rotation_matches_tfhe_rs_and_the_lut_for_whole_and_one_level_keys() {
        let mut seeder = new_seeder();
        let seeder = seeder.as_mut();
        let mut secret = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
        let mut enc =
            EncryptionRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed(), seeder);
        let lwe_key: LweSecretKeyOwned<u64> =
            allocate_and_generate_new_binary_lwe_secret_key(LweDimension(SMALL_N), &mut secret);
        let glwe_key: GlweSecretKeyOwned<u64> = allocate_and_generate_new_binary_glwe_secret_key(
            GlweDimension(1),
            PolynomialSize(N),
            &mut secret,
        );
        let native = CiphertextModulus::<u64>::new_native();
        let bsk = allocate_and_generate_new_lwe_bootstrap_key(
            &lwe_key,
            &glwe_key,
            DecompositionBaseLog(8),
            DecompositionLevelCount(3),
            DynamicDistribution::new_t_uniform(20),
            native,
            &mut enc,
        );
        let mut fourier = FourierLweBootstrapKey::new(
            bsk.input_lwe_dimension(),
            bsk.glwe_size(),
            bsk.polynomial_size(),
            bsk.decomposition_base_log(),
            bsk.decomposition_level_count(),
        );
        convert_standard_lwe_bootstrap_key_to_fourier(&bsk, &mut fourier);

        // Values 2^58 apart: far above every gadget's noise here.
        let tv: Vec<u64> = (0..N as u64).map(|j| ((j * 7) % 32) << 58).collect();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        let masks: Vec<Vec<usize>> = (0..8)
            .map(|i| {
                // One input with zeros in its mask (those CMUXes are skipped).
                (0..SMALL_N)
                    .map(|k| if i == 0 && k % 3 == 0 { 0 } else { next(2 * N) })
                    .collect()
            })
            .collect();
        let bodies: Vec<usize> = (0..8).map(|_| next(2 * N)).collect();
        let inputs: Vec<SwitchedLwe<'_>> = masks
            .iter()
            .zip(&bodies)
            .map(|(m, &b)| SwitchedLwe {
                mask: m,
                body: b,
                log: CiphertextModulusLog((2 * N).ilog2() as usize),
            })
            .collect();
        let key_bits = lwe_key.as_ref();
        let oracle = tfhe_rotate(&fourier, &tv, &inputs);
        for gadget in [whole_key(&fourier), one_level(2, 16), one_level(3, 24)] {
            let ours = batch_rotate(&fourier, gadget, &tv, &inputs);
            for ((input, got), want) in inputs.iter().zip(&ours).zip(&oracle) {
                let sum: usize = input
                    .mask
                    .iter()
                    .zip(key_bits)
                    .map(|(&a, &s)| a * s as usize)
                    .sum();
                let phase = (input.body + 2 * N * SMALL_N - sum % (2 * N)) % (2 * N);
                let (got, want) = (phases(got, &glwe_key), phases(want, &glwe_key));
                for j in 0..N {
                    let lut = expected(&tv, phase, j);
                    assert!(
                        distance(got[j], lut) < 1 << 56,
                        "{gadget:?}, coefficient {j}"
                    );
                    assert!(distance(want[j], lut) < 1 << 56, "tfhe-rs, coefficient {j}");
                }
            }
        }
    }
}
