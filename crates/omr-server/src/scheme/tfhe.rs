//! omr-v1 and omr-v2 behind the scheme seam: a compressed detection key uploaded and expanded
//! (Fourier bootstrapping keys, keyswitching keys) in the worker, detection one message at a
//! time by two levels of functional bootstrapping and a trace, each result folded into an
//! [`Accumulator`] per epoch; a digest is the sum of a range's accumulators, keyswitched and
//! switched down by the key's [`DigestKey`].

use std::io::{Read, Write};

use omr_core::{
    Accumulator, Clue, CompressedDetectionKey, DetectionKey, DigestKey, FoldScratch, OmrError,
    ParamSet, Pertinency,
};
use omr_store::StoredMessage;
use rayon::prelude::*;

use super::{AcceptedKey, DetectionScheme, PerMessage};

/// The TFHE scheme for one parameter set.
#[derive(Debug, Clone, Copy)]
pub struct Tfhe {
    params: &'static ParamSet,
}

impl Tfhe {
    pub fn new(params: &'static ParamSet) -> Tfhe {
        Tfhe { params }
    }
}

impl DetectionScheme for Tfhe {
    type Key = DetectionKey;
    type State = Accumulator;
    type DigestKey = DigestKey;
    type Walk = PerMessage;

    fn accept_key(&self, key: &[u8], limit: usize) -> Result<AcceptedKey, OmrError> {
        let k = CompressedDetectionKey::from_bytes_with_limit(key, limit)?;
        Ok(AcceptedKey {
            param_set: k.params().name,
            kbar: k.kbar(),
            digest_key: k.digest_key().to_bytes(),
        })
    }

    fn expand_key(&self, stored: &[u8]) -> Result<DetectionKey, OmrError> {
        CompressedDetectionKey::from_bytes(stored).map(|k| k.expand())
    }

    fn key_memory_bytes(key: &DetectionKey) -> u64 {
        key.memory_bytes() as u64
    }

    fn key_file_len(key: &DetectionKey) -> u64 {
        key.expanded_len()
    }

    fn write_key_file(key: &DetectionKey, mut w: &mut dyn Write) -> std::io::Result<()> {
        key.write_expanded(&mut w)
    }

    fn read_key_file(&self, mut r: &mut dyn Read) -> Result<DetectionKey, OmrError> {
        DetectionKey::read_expanded(&mut r, self.params)
    }

    fn new_state(key: &DetectionKey, start: u64) -> Accumulator {
        key.new_accumulator(start)
    }

    fn detect_and_fold(
        &self,
        key: &DetectionKey,
        mut acc: Accumulator,
        messages: &[StoredMessage],
    ) -> Result<Accumulator, OmrError> {
        let pvs = detect(key, messages)?;
        let mut scratch = FoldScratch::default();
        for (m, pv) in messages.iter().zip(&pvs) {
            key.fold(&mut acc, m.index, pv, &m.payload, &mut scratch)?;
        }
        Ok(acc)
    }

    fn range(acc: &Accumulator) -> (u64, u64) {
        (acc.start(), acc.end())
    }

    fn encode_state(acc: &Accumulator) -> Vec<u8> {
        acc.to_bytes()
    }

    fn decode_state(&self, bytes: &[u8]) -> Result<Accumulator, OmrError> {
        Accumulator::from_bytes(bytes)
    }

    fn empty_state(&self, kbar: usize, at: u64) -> Accumulator {
        Accumulator::new(self.params, kbar, at)
    }

    fn merge(acc: &mut Accumulator, next: &Accumulator) -> Result<(), OmrError> {
        acc.merge(next)
    }

    fn digest_key(&self, bytes: &[u8]) -> Result<DigestKey, OmrError> {
        DigestKey::from_bytes(bytes)
    }

    fn encode_digest(key: &DigestKey, acc: Accumulator) -> Result<Vec<u8>, OmrError> {
        key.digest(&acc).map(|d| d.to_bytes())
    }
}

/// The pertinency of every message, in order, the batch split over the pool's threads (each
/// part still shares its key loads). Runs on the pool.
fn detect(dk: &DetectionKey, messages: &[StoredMessage]) -> Result<Vec<Pertinency>, OmrError> {
    let clues: Vec<Clue> = messages
        .iter()
        .map(|m| Clue::from_bytes(&m.clue))
        .collect::<Result<_, _>>()?;
    let threads = rayon::current_num_threads().max(1);
    let part = clues.len().div_ceil(threads).max(1);
    let parts: Vec<Vec<_>> = clues
        .par_chunks(part)
        .map(|c| dk.detect_batch(&c.iter().collect::<Vec<_>>()))
        .collect::<Result<_, _>>()?;
    Ok(parts.into_iter().flatten().collect())
}
