//! The detector: one clue and one detection key in, the pertinency ciphertext out.
//!
//! Level 1 blind-rotates each of the ℓ clue ciphertexts with a box LUT (+1 on the box of 0, -1 on
//! its negacyclic twin) and sums them; the sum is keyswitched to the level-2 key and
//! modulus-switched; level 2 blind-rotates with a LUT that is Δ only when all ℓ clues matched;
//! the GLWE is switched to the prime p, keyswitched to a k = 2 key, multiplied by N^-1 and traced
//! so that it encrypts the constant b·Δ. Pure function of its inputs: callable from any thread.

use std::time::{Duration, Instant};

use tfhe::core_crypto::algorithms::glwe_sample_extraction::extract_lwe_sample_from_glwe_ciphertext;
use tfhe::core_crypto::algorithms::polynomial_algorithms::{
    polynomial_wrapping_monic_monomial_div, polynomial_wrapping_monic_monomial_mul,
    polynomial_wrapping_sub_assign,
};
use tfhe::core_crypto::fft_impl::fft64::crypto::bootstrap::batch_blind_rotate_assign_scratch;
use tfhe::core_crypto::fft_impl::fft64::crypto::ggsw::{
    add_external_product_assign, add_external_product_assign_scratch, FourierGgswCiphertext,
};
use tfhe::core_crypto::prelude::*;

use crate::clue::{switch_native, Clue};
use crate::error::OmrError;
use crate::keys::DetectionKey;
use crate::params::{ParamSet, PRIME_P};
use crate::prime::{self, KsScratch};

/// The pertinency ciphertext PV: a GLWE (k3, N2) modulo p encrypting the constant b·⌊p/t⌋,
/// held in the NTT domain ready for folding.
#[derive(Debug, Clone)]
pub struct Pertinency {
    pub(crate) ntt: Vec<u64>,
}

/// Wall time of each detection stage, for `omr bench`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimes {
    pub level1: Duration,
    pub keyswitch: Duration,
    pub level2: Duration,
    pub trace: Duration,
}

impl std::ops::AddAssign for StageTimes {
    fn add_assign(&mut self, o: Self) {
        self.level1 += o.level1;
        self.keyswitch += o.keyswitch;
        self.level2 += o.level2;
        self.trace += o.trace;
    }
}

/// Intermediate ciphertexts of one detection, for noise measurement with the secret key.
#[derive(Debug, Clone)]
pub struct DetectTrace {
    /// Level-1 sum after the offset (dimension N1, native modulus): encrypts (s - ℓ)·2^64/D.
    pub level1: Vec<u64>,
    /// After the keyswitch to the level-2 key (dimension n2 + 1).
    pub keyswitched: Vec<u64>,
    /// The level-2 accumulator (k = 1, N2, native modulus).
    pub level2: Vec<u64>,
    /// After the trace (k3, N2, mod p, coefficient domain).
    pub traced: Vec<u64>,
}

struct SwitchedLwe<'a> {
    mask: &'a [usize],
    body: usize,
    log: CiphertextModulusLog,
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

/// A box test vector: +v on coefficients [0, h], -v on [N-h, N-1], 0 elsewhere.
pub(crate) fn box_lut(n: usize, h: usize, v: u64) -> Vec<u64> {
    let mut tv = vec![0u64; n];
    for c in tv.iter_mut().take(h + 1) {
        *c = v;
    }
    for c in tv.iter_mut().skip(n - h) {
        *c = v.wrapping_neg();
    }
    tv
}

/// Level-1 output scale 2^64 / D.
pub(crate) fn level1_delta(p: &ParamSet) -> u64 {
    let d = p.level1_divisor() as u128;
    (((1u128 << 64) + d / 2) / d) as u64
}

/// Digest plaintext scale ⌊p/t⌋.
pub(crate) fn digest_delta(p: &ParamSet) -> u64 {
    PRIME_P / p.plain_modulus
}

/// Level-2 LUT value at 2^64 that becomes ⌊p/t⌋ after switching to p.
fn level2_value(p: &ParamSet) -> u64 {
    (((digest_delta(p) as u128) << 64) / PRIME_P as u128) as u64
}

impl DetectionKey {
    /// Detect one message: the pertinency ciphertext of `clue` for this key.
    pub fn detect(&self, clue: &Clue) -> Result<Pertinency, OmrError> {
        Ok(self.detect_inner(&[clue], None, None)?.remove(0))
    }

    /// Detect several messages at once. Same results as [`detect`](Self::detect) on each, but
    /// the blind rotations of the whole batch share each bootstrapping-key load, which is what
    /// limits throughput once several threads compete for memory bandwidth.
    pub fn detect_batch(&self, clues: &[&Clue]) -> Result<Vec<Pertinency>, OmrError> {
        if clues.is_empty() {
            return Ok(Vec::new());
        }
        self.detect_inner(clues, None, None)
    }

    /// As [`detect_batch`](Self::detect_batch), also returning the time spent in each stage
    /// (summed over the batch).
    pub fn detect_timed(&self, clues: &[&Clue]) -> Result<(Vec<Pertinency>, StageTimes), OmrError> {
        let mut t = StageTimes::default();
        let pv = self.detect_inner(clues, Some(&mut t), None)?;
        Ok((pv, t))
    }

    /// As [`detect`](Self::detect), also returning every intermediate ciphertext.
    #[doc(hidden)]
    pub fn detect_traced(&self, clue: &Clue) -> Result<(Pertinency, DetectTrace), OmrError> {
        let mut traces = Vec::new();
        let pv = self
            .detect_inner(&[clue], None, Some(&mut traces))?
            .remove(0);
        Ok((pv, traces.remove(0)))
    }

    fn detect_inner(
        &self,
        clues: &[&Clue],
        mut times: Option<&mut StageTimes>,
        mut traces: Option<&mut Vec<DetectTrace>>,
    ) -> Result<Vec<Pertinency>, OmrError> {
        let p = self.params;
        if let Some(bad) = clues.iter().find(|c| c.params != p) {
            return Err(OmrError::ParamMismatch {
                what: "clue",
                got: bad.params.name,
                expected: p.name,
            });
        }
        let native = CiphertextModulus::<u64>::new_native();
        let mut clock = Instant::now();
        let mut lap = |slot: &mut Duration| {
            let now = Instant::now();
            *slot += now - clock;
            clock = now;
        };
        let ell = p.clue_count;
        let batch = clues.len();

        // Level 1: every clue ciphertext of the batch in one batched blind rotation.
        let delta1 = level1_delta(p);
        let tv1 = box_lut(p.n1, p.box_half_width, delta1);
        let log1 = CiphertextModulusLog(p.clue_modulus_log() as usize);
        let mut masks = vec![vec![0usize; p.clue_dim]; batch * ell];
        let mut bodies = Vec::with_capacity(batch * ell);
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
            batch_rotate_one_level(&self.bsk2, 2, p.bsk1_base_log, &tv1, &inputs)
        } else {
            batch_rotate(&self.bsk1, &tv1, &inputs)
        };
        let offset = delta1.wrapping_mul(ell as u64);
        let mut sum = GlweCiphertext::new(0u64, GlweSize(2), PolynomialSize(p.n1), native);
        let mut bigs = Vec::with_capacity(batch);
        for group in accs.chunks_exact(ell) {
            sum.as_mut().fill(0);
            for acc in group {
                glwe_ciphertext_add_assign(&mut sum, acc);
            }
            let mut big = LweCiphertext::new(0u64, LweSize(p.n1 + 1), native);
            extract_lwe_sample_from_glwe_ciphertext(&sum, &mut big, MonomialDegree(0));
            *big.get_mut_body().data = big.get_body().data.wrapping_sub(offset);
            bigs.push(big);
        }
        if let Some(t) = times.as_deref_mut() {
            lap(&mut t.level1);
        }

        // Keyswitch to the level-2 key, then switch to 2·N2.
        let log2n2 = (2 * p.n2).ilog2();
        let mut smalls = Vec::with_capacity(batch);
        let mut switched_masks = Vec::with_capacity(batch);
        let mut switched_bodies = Vec::with_capacity(batch);
        for big in &bigs {
            let mut small = LweCiphertext::new(0u64, LweSize(p.lwe2_dim + 1), native);
            self.ksk.keyswitch(big, &mut small);
            switched_masks.push(
                small
                    .get_mask()
                    .as_ref()
                    .iter()
                    .map(|&a| switch_native(a, log2n2) as usize)
                    .collect::<Vec<_>>(),
            );
            switched_bodies.push(switch_native(*small.get_body().data, log2n2) as usize);
            smalls.push(small);
        }
        if let Some(t) = times.as_deref_mut() {
            lap(&mut t.keyswitch);
        }

        // Level 2, batched.
        let h2 = p.n2 / p.level1_divisor() as usize;
        let tv2 = box_lut(p.n2, h2, level2_value(p));
        let inputs: Vec<SwitchedLwe<'_>> = switched_masks
            .iter()
            .zip(&switched_bodies)
            .map(|(m, &b)| SwitchedLwe {
                mask: m,
                body: b,
                log: CiphertextModulusLog(log2n2 as usize),
            })
            .collect();
        let level2 = batch_rotate(&self.bsk2, &tv2, &inputs);
        if let Some(t) = times.as_deref_mut() {
            lap(&mut t.level2);
        }

        // Prime stage: switch to p, up-keyswitch to k3, multiply by N^-1, trace.
        let n = p.n2;
        let ntt = &self.ntt;
        let n_inv = prime::inverse(n as u64);
        let mut scratch = KsScratch::default();
        let mut out = Vec::with_capacity(batch);
        for (k, acc2) in level2.iter().enumerate() {
            let glwe_p: Vec<u64> = acc2
                .as_ref()
                .iter()
                .map(|&c| prime::from_native(c))
                .collect();
            let mut ct = vec![0u64; (p.k3 + 1) * n];
            self.up.keyswitch(ntt, &glwe_p, &mut ct, &mut scratch);
            ct.iter_mut().for_each(|c| *c = prime::mul(*c, n_inv));
            prime::trace(ntt, &self.trace, &mut ct, &mut scratch);
            if let Some(tr) = traces.as_deref_mut() {
                tr.push(DetectTrace {
                    level1: bigs[k].as_ref().to_vec(),
                    keyswitched: smalls[k].as_ref().to_vec(),
                    level2: acc2.as_ref().to_vec(),
                    traced: ct.clone(),
                });
            }
            for poly in ct.chunks_exact_mut(n) {
                ntt.fwd(poly);
            }
            out.push(Pertinency { ntt: ct });
        }
        if let Some(t) = times {
            lap(&mut t.trace);
        }
        Ok(out)
    }
}

/// Blind-rotate every input with one decomposition level of `bsk`: the rows of level `level`
/// (those at q/B^level) of a key of base B form a one-level key of base B^level, here
/// `base_log`. tfhe-rs's batched rotation takes whole keys only, so this is its loop (a CMUX
/// per key bit and input: ct1 = X^a·ct0 − ct0, then ct0 += GGSW ⊡ ct1) on views of that level.
fn batch_rotate_one_level(
    bsk: &FourierLweBootstrapKeyOwned,
    level: usize,
    base_log: usize,
    tv: &[u64],
    inputs: &[SwitchedLwe<'_>],
) -> Vec<GlweCiphertextOwned<u64>> {
    let n = PolynomialSize(tv.len());
    let glwe = GlweSize(2);
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
    let mut diff = GlweCiphertext::new(0u64, glwe, n, native);
    let fft = Fft::new(n);
    let fft = fft.as_view();
    let mut buffers = ComputationBuffers::new();
    buffers.resize(
        add_external_product_assign_scratch::<u64>(glwe, n, fft).unaligned_bytes_required(),
    );
    for (i, ggsw) in bsk.as_view().into_ggsw_iter().enumerate() {
        let rows = ggsw
            .into_levels()
            .find(|m| m.decomposition_level().0 == level)
            .expect("the key has that decomposition level");
        let one_level = FourierGgswCiphertext::from_container(
            rows.data(),
            glwe,
            n,
            DecompositionBaseLog(base_log),
            DecompositionLevelCount(1),
        );
        for (acc, input) in accs.iter_mut().zip(inputs) {
            let a = input.mask[i];
            if a == 0 {
                continue;
            }
            for (mut d, c) in diff
                .as_mut_polynomial_list()
                .iter_mut()
                .zip(acc.as_polynomial_list().iter())
            {
                polynomial_wrapping_monic_monomial_mul(&mut d, &c, MonomialDegree(a));
                polynomial_wrapping_sub_assign(&mut d, &c);
            }
            add_external_product_assign(
                acc.as_mut_view(),
                one_level.as_view(),
                diff.as_view(),
                fft,
                buffers.stack(),
            );
        }
    }
    accs
}

/// Blind-rotate every input with the same test vector, sharing each GGSW load across the batch.
fn batch_rotate(
    bsk: &FourierLweBootstrapKeyOwned,
    tv: &[u64],
    inputs: &[SwitchedLwe<'_>],
) -> Vec<GlweCiphertextOwned<u64>> {
    let n = PolynomialSize(tv.len());
    let native = CiphertextModulus::<u64>::new_native();
    let mut luts = GlweCiphertextList::new(
        0u64,
        GlweSize(2),
        n,
        GlweCiphertextCount(inputs.len()),
        native,
    );
    for mut lut in luts.iter_mut() {
        lut.get_mut_body().as_mut().copy_from_slice(tv);
    }
    let fft = Fft::new(n);
    let fft = fft.as_view();
    let mut buffers = ComputationBuffers::new();
    buffers.resize(
        batch_blind_rotate_assign_scratch::<u64>(
            GlweSize(2),
            n,
            CiphertextCount(inputs.len()),
            fft,
        )
        .unaligned_bytes_required(),
    );
    bsk.as_view()
        .batch_blind_rotate_assign(luts.as_mut_view(), inputs, fft, buffers.stack());
    luts.iter()
        .map(|g| GlweCiphertext::from_container(g.as_ref().to_vec(), n, native))
        .collect()
}
