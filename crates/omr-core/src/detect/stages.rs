//! The four stages of a detection, each a method of the detection key over a batch: level 1
//! (ℓ blind rotations per clue, summed and extracted), the keyswitch to the level-2 key, level 2
//! (one blind rotation per clue), and the prime stage (switch to p, up-keyswitch, trace, NTT).
//! [`DetectionKey::detect`] runs them in order; they are public, hidden, for the per-stage
//! criterion benchmark (`benches/stages.rs`).

use tfhe::core_crypto::algorithms::glwe_sample_extraction::extract_lwe_sample_from_glwe_ciphertext;
use tfhe::core_crypto::prelude::*;

use super::rotate::{batch_rotate, one_level, whole_key, SwitchedLwe};
use super::{box_lut, level1_delta, level2_value, Pertinency};
use crate::clue::{switch_native, Clue};
use crate::error::OmrError;
use crate::keys::DetectionKey;
use crate::prime::{self, KsScratch};

/// Level 1's output: per clue, the extracted LWE (dimension N1) of the sum of its ℓ rotations,
/// offset so that it encrypts (s − ℓ)·2^64/D.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Level1Out(pub(crate) Vec<LweCiphertextOwned<u64>>);

/// The keyswitch's output: per clue, the LWE under the level-2 key (native modulus).
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct KeyswitchOut(pub(crate) Vec<LweCiphertextOwned<u64>>);

/// Level 2's output: per clue, the GLWE (k = 1, N2) encrypting b·⌊p/t⌋ in its constant term.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Level2Out(pub(crate) Vec<GlweCiphertextOwned<u64>>);

fn native() -> CiphertextModulus<u64> {
    CiphertextModulus::new_native()
}

impl DetectionKey {
    /// Stage 1: every clue body of the batch blind-rotated with the box LUT, the ℓ results of
    /// each clue summed and extracted.
    #[doc(hidden)]
    pub fn stage_level1(&self, clues: &[&Clue]) -> Result<Level1Out, OmrError> {
        let p = self.params;
        if let Some(bad) = clues.iter().find(|c| c.params != p) {
            return Err(OmrError::ParamMismatch {
                what: "clue",
                got: bad.params.name,
                expected: p.name,
            });
        }
        let ell = p.clue_count;
        let delta1 = level1_delta(p);
        let tv1 = box_lut(p.n1, p.box_half_width, delta1);
        let log1 = CiphertextModulusLog(p.clue_modulus_log() as usize);
        let mut masks = vec![vec![0usize; p.clue_dim]; clues.len() * ell];
        let mut bodies = Vec::with_capacity(clues.len() * ell);
        for (c, clue) in clues.iter().enumerate() {
            for (j, &body) in clue.bodies.iter().enumerate() {
                clue.expanded_mask(j, &mut masks[c * ell + j]);
                bodies.push(body as usize);
            }
        }
        let inputs: Vec<SwitchedLwe<'_>> = masks
            .iter()
            .zip(&bodies)
            .map(|(m, &b)| SwitchedLwe {
                mask: m,
                body: b,
                log: log1,
            })
            .collect();
        let accs = if p.level1_uses_level2_key {
            batch_rotate(&self.bsk2, one_level(2, p.bsk1_base_log), &tv1, &inputs)
        } else {
            batch_rotate(&self.bsk1, whole_key(&self.bsk1), &tv1, &inputs)
        };
        let offset = delta1.wrapping_mul(ell as u64);
        let mut sum = GlweCiphertext::new(0u64, GlweSize(2), PolynomialSize(p.n1), native());
        let mut out = Vec::with_capacity(clues.len());
        for group in accs.chunks_exact(ell) {
            sum.as_mut().fill(0);
            for acc in group {
                glwe_ciphertext_add_assign(&mut sum, acc);
            }
            let mut big = LweCiphertext::new(0u64, LweSize(p.n1 + 1), native());
            extract_lwe_sample_from_glwe_ciphertext(&sum, &mut big, MonomialDegree(0));
            *big.get_mut_body().data = big.get_body().data.wrapping_sub(offset);
            out.push(big);
        }
        Ok(Level1Out(out))
    }

    /// Stage 2: keyswitch each level-1 output to the level-2 key.
    #[doc(hidden)]
    pub fn stage_keyswitch(&self, level1: &Level1Out) -> KeyswitchOut {
        KeyswitchOut(self.ksk.keyswitch_batch(&level1.0))
    }

    /// Stage 3: switch to 2·N2 and blind-rotate with the window LUT (⌊p/t⌋ when every clue
    /// matched).
    #[doc(hidden)]
    pub fn stage_level2(&self, switched: &KeyswitchOut) -> Level2Out {
        let p = self.params;
        let log2n2 = (2 * p.n2).ilog2();
        let masks: Vec<Vec<usize>> = switched
            .0
            .iter()
            .map(|small| {
                small
                    .get_mask()
                    .as_ref()
                    .iter()
                    .map(|&a| switch_native(a, log2n2) as usize)
                    .collect()
            })
            .collect();
        let inputs: Vec<SwitchedLwe<'_>> = masks
            .iter()
            .zip(&switched.0)
            .map(|(m, small)| SwitchedLwe {
                mask: m,
                body: switch_native(*small.get_body().data, log2n2) as usize,
                log: CiphertextModulusLog(log2n2 as usize),
            })
            .collect();
        let h2 = p.n2 / p.level1_divisor() as usize;
        let tv2 = box_lut(p.n2, h2, level2_value(p));
        Level2Out(batch_rotate(
            &self.bsk2,
            whole_key(&self.bsk2),
            &tv2,
            &inputs,
        ))
    }

    /// Stage 4: each level-2 GLWE switched to p, up-keyswitched to k3, multiplied by N^-1 and
    /// traced, in the coefficient domain (see [`Self::stage_ntt`]).
    #[doc(hidden)]
    pub fn stage_prime(&self, level2: &Level2Out) -> Vec<Vec<u64>> {
        let p = self.params;
        let n = p.n2;
        let n_inv = prime::inverse(n as u64);
        let mut scratch = KsScratch::default();
        level2
            .0
            .iter()
            .map(|acc2| {
                let glwe_p: Vec<u64> = acc2
                    .as_ref()
                    .iter()
                    .map(|&c| prime::from_native(c))
                    .collect();
                let mut ct = vec![0u64; (p.k3 + 1) * n];
                self.up.keyswitch(&self.ntt, &glwe_p, &mut ct, &mut scratch);
                ct.iter_mut().for_each(|c| *c = prime::mul(*c, n_inv));
                prime::trace(&self.ntt, &self.trace, &mut ct, &mut scratch);
                ct
            })
            .collect()
    }

    /// The traced ciphertext in the NTT domain, ready for folding.
    pub(crate) fn stage_ntt(&self, mut ct: Vec<u64>) -> Pertinency {
        for poly in ct.chunks_exact_mut(self.params.n2) {
            self.ntt.fwd(poly);
        }
        Pertinency { ntt: ct }
    }
}
