//! The detector: one clue and one detection key in, the pertinency ciphertext out.
//!
//! Level 1 blind-rotates each of the ℓ clue ciphertexts with a box LUT (+1 on the box of 0, -1 on
//! its negacyclic twin) and sums them; the sum is keyswitched to the level-2 key and
//! modulus-switched; level 2 blind-rotates with a LUT that is Δ only when all ℓ clues matched;
//! the GLWE is switched to the prime p, keyswitched to a k = 2 key, multiplied by N^-1 and traced
//! so that it encrypts the constant b·Δ. Pure function of its inputs: callable from any thread.

use std::time::{Duration, Instant};

use crate::clue::Clue;
use crate::error::OmrError;
use crate::keys::DetectionKey;
use crate::params::{ParamSet, PRIME_P};

mod cmux;
mod decompose;
mod rotate;
mod stages;

#[doc(hidden)]
pub use stages::{KeyswitchOut, Level1Out, Level2Out};

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

/// Messages whose blind rotations run together: each key bit's GGSW is loaded once for all of
/// them, but their accumulators (ℓ + 1 GLWEs of 32 KiB each per message) must stay in cache.
/// `benches/stages.rs` finds a batch of 16 slower per message than a batch of 4, on omr-v1 and
/// more so on omr-v2 (docs/PARAMETERS.md), so a larger batch is detected 4 at a time.
pub const MESSAGES_PER_ROTATION: usize = 4;

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
pub(crate) fn level2_value(p: &ParamSet) -> u64 {
    (((digest_delta(p) as u128) << 64) / PRIME_P as u128) as u64
}

impl DetectionKey {
    /// Detect one message: the pertinency ciphertext of `clue` for this key.
    pub fn detect(&self, clue: &Clue) -> Result<Pertinency, OmrError> {
        Ok(self.detect_inner(&[clue], None, None)?.remove(0))
    }

    /// Detect several messages at once. Same results as [`detect`](Self::detect) on each, but
    /// the blind rotations of up to [`MESSAGES_PER_ROTATION`] messages share each
    /// bootstrapping-key load, which is what limits throughput once several threads compete
    /// for memory bandwidth.
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
        let mut out = Vec::with_capacity(clues.len());
        for chunk in clues.chunks(MESSAGES_PER_ROTATION) {
            out.extend(self.detect_chunk(chunk, times.as_deref_mut(), traces.as_deref_mut())?);
        }
        Ok(out)
    }

    fn detect_chunk(
        &self,
        clues: &[&Clue],
        mut times: Option<&mut StageTimes>,
        traces: Option<&mut Vec<DetectTrace>>,
    ) -> Result<Vec<Pertinency>, OmrError> {
        let mut clock = Instant::now();
        let mut lap = |slot: Option<&mut Duration>| {
            let now = Instant::now();
            if let Some(slot) = slot {
                *slot += now - clock;
            }
            clock = now;
        };
        let level1 = self.stage_level1(clues)?;
        lap(times.as_deref_mut().map(|t| &mut t.level1));
        let switched = self.stage_keyswitch(&level1);
        lap(times.as_deref_mut().map(|t| &mut t.keyswitch));
        let level2 = self.stage_level2(&switched);
        lap(times.as_deref_mut().map(|t| &mut t.level2));
        let traced = self.stage_prime(&level2);
        if let Some(tr) = traces {
            for (k, ct) in traced.iter().enumerate() {
                tr.push(DetectTrace {
                    level1: level1.0[k].as_ref().to_vec(),
                    keyswitched: switched.0[k].as_ref().to_vec(),
                    level2: level2.0[k].as_ref().to_vec(),
                    traced: ct.clone(),
                });
            }
        }
        let out = traced.into_iter().map(|ct| self.stage_ntt(ct)).collect();
        lap(times.map(|t| &mut t.trace));
        Ok(out)
    }
}
