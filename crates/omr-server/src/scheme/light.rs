//! omr-light-v1 behind the seam: the uploaded key is validated and, in the worker, laid out for
//! the kernel; detection runs in batches of D = 4096 messages, one batch per epoch (omrd
//! refuses any other `epoch_len` for this set). The work every key shares (the batch's NTT'd
//! plaintexts and the common reference string's half of the digest) is prepared once per batch
//! and kept in a small cache that every key's pass reads; a key's pass is its half.
//!
//! A key's state for an epoch is the digest part of the messages of that batch detected so far.
//! It is not folded into: when more of the open batch is detected (for an online recipient), the
//! whole part is computed again from the batch's first message and replaces the stored one, so a
//! job that ran twice (a crash before its commit) writes the same part. A digest is the parts of
//! its range, in order.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use omr_core::OmrError;
use omr_light::{Batch, BatchDigest, Clue, Digest, DigestPart, ExpandedKey, LightParams};
use omr_store::StoredMessage;

use super::gpu::GpuDetector;
use super::{AcceptedKey, BatchScheme, Batched, DetectionScheme};

/// Prepared batches kept: the closed batch keys are catching up on and the open one, with room
/// for one more (32 MiB each).
const PREPARED_BATCHES: usize = 3;

/// Keys served in one pass when a GPU detects: one launch for all of them (the card's threads
/// are ≈ 64 keys' worth of positions; fewer leave it partly idle).
const GPU_GROUP_KEYS: usize = 64;

/// The light scheme for one parameter set, with its cache of prepared batches (shared by the
/// clones the worker hands to its jobs).
#[derive(Debug, Clone)]
pub struct Light {
    params: &'static LightParams,
    batches: Arc<Mutex<Prepared>>,
    /// The GPU the keys' passes run on while it works (`detect_device`); `None`: the CPU.
    gpu: Option<Arc<GpuDetector>>,
}

/// Prepared batches by (first index, messages), most recent last, and a spent batch whose
/// buffers the next preparation reuses.
#[derive(Debug, Default)]
struct Prepared {
    ready: VecDeque<((u64, usize), Arc<Batch>)>,
    spare: Option<Batch>,
}

/// A key's digest parts over `[at, end)`: one per batch, each from the batch's first message.
#[derive(Debug, Clone)]
pub struct LightState {
    at: u64,
    parts: Vec<DigestPart>,
}

impl Light {
    pub fn new(params: &'static LightParams) -> Light {
        Light {
            params,
            batches: Arc::default(),
            gpu: None,
        }
    }

    /// The same scheme, its keys' passes on `gpu` (`None`: the CPU).
    pub fn with_gpu(self, gpu: Option<Arc<GpuDetector>>) -> Light {
        Light { gpu, ..self }
    }

    /// The GPU detector, if this scheme has one.
    pub fn gpu(&self) -> Option<&Arc<GpuDetector>> {
        self.gpu.as_ref()
    }

    /// The keys' halves of `batch`: on the GPU while it works, else (or when it fails now) on
    /// the CPU, whose pass is bit-for-bit the same.
    fn halves(&self, batch: &Batch, keys: &[&ExpandedKey]) -> Vec<BatchDigest> {
        if let Some(halves) = self.gpu.as_ref().and_then(|g| g.detect_many(batch, keys)) {
            return halves;
        }
        batch.detect_many(keys)
    }

    /// One key's half of `batch` ([`halves`](Self::halves)).
    fn half(&self, batch: &Batch, key: &ExpandedKey) -> BatchDigest {
        self.halves(batch, &[key]).pop().expect("one key, one half")
    }

    /// The shared work of the batch `messages` (consecutive, from a batch's first index),
    /// prepared once: a second key asking for the same messages gets the same batch. Two jobs
    /// asking at once may each prepare it (no thread waits on another's preparation).
    fn batch(&self, messages: &[StoredMessage]) -> Result<Arc<Batch>, OmrError> {
        let id = (messages[0].index, messages.len());
        if let Some(b) = self.prepared(id) {
            return Ok(b);
        }
        let spare = self.batches.lock().expect("prepared batches").spare.take();
        let clues: Vec<Clue> = messages
            .iter()
            .map(|m| Clue::from_bytes(&m.clue))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Clue> = clues.iter().collect();
        let batch = Arc::new(match spare {
            Some(spent) => Batch::prepare_reusing(self.params, &refs, spent),
            None => Batch::prepare(self.params, &refs),
        });
        let mut cache = self.batches.lock().expect("prepared batches");
        if !cache.ready.iter().any(|(k, _)| *k == id) {
            cache.ready.push_back((id, batch.clone()));
        }
        while cache.ready.len() > PREPARED_BATCHES {
            let (_, old) = cache.ready.pop_front().expect("non-empty");
            // Reused only when no job still reads it.
            if let Ok(spent) = Arc::try_unwrap(old) {
                cache.spare = Some(spent);
            }
        }
        Ok(batch)
    }
}

impl Light {
    /// The prepared batch `(first, count)`, if it is held.
    fn prepared(&self, id: (u64, usize)) -> Option<Arc<Batch>> {
        let cache = self.batches.lock().expect("prepared batches");
        cache
            .ready
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, b)| b.clone())
    }

    /// The state of one key's half `own` of `batch`, which starts at `first`.
    fn part(first: u64, own: BatchDigest, batch: &Batch) -> LightState {
        LightState {
            at: first,
            parts: vec![DigestPart {
                first,
                own,
                shared: batch.shared().clone(),
            }],
        }
    }

    /// The first index of `messages`, a batch from its first message; malformed otherwise.
    fn check_batch(&self, messages: &[StoredMessage]) -> Result<u64, OmrError> {
        let Some(first) = messages.first().map(|m| m.index) else {
            return Err(OmrError::malformed("batch", "no messages"));
        };
        if first % self.params.batch as u64 != 0 || messages.len() > self.params.batch {
            return Err(OmrError::malformed(
                "batch",
                format!("{} messages from index {first}", messages.len()),
            ));
        }
        Ok(first)
    }
}

impl LightState {
    fn end(&self) -> u64 {
        self.parts
            .last()
            .map_or(self.at, |p| p.first + p.own.len() as u64)
    }
}

impl DetectionScheme for Light {
    type Key = ExpandedKey;
    type State = LightState;
    type DigestKey = ();
    type Walk = Batched;

    fn accept_key(&self, key: &[u8], limit: usize) -> Result<AcceptedKey, OmrError> {
        if key.len() > limit {
            return Err(OmrError::malformed(
                "detection key",
                format!("{} bytes, at most {limit}", key.len()),
            ));
        }
        let params = omr_light::DetectionKey::check_bytes(key)?;
        Ok(AcceptedKey {
            param_set: params.name,
            kbar: 1,
            digest_key: Vec::new(),
        })
    }

    fn expand_key(&self, stored: &[u8]) -> Result<ExpandedKey, OmrError> {
        ExpandedKey::from_bytes(stored)
    }

    fn key_memory_bytes(key: &ExpandedKey) -> u64 {
        key.memory_bytes() as u64
    }

    fn key_file_len(key: &ExpandedKey) -> u64 {
        2 + key.memory_bytes() as u64
    }

    fn write_key_file(key: &ExpandedKey, w: &mut dyn Write) -> std::io::Result<()> {
        key.write_local(w)
    }

    fn read_key_file(&self, r: &mut dyn Read) -> Result<ExpandedKey, OmrError> {
        ExpandedKey::read_local(self.params, r)
    }

    /// A light key decodes from the store in about the time its file takes to write, so a file
    /// written at its first load saves little (`key_load_bench omr-light-v1`; docs/benchmarks.md):
    /// its file is written when it is evicted, not at every first load. A node whose keys fit in
    /// memory then writes none (32 MiB of disk a key).
    fn key_file_at_load(&self) -> bool {
        false
    }

    fn new_state(_key: &ExpandedKey, start: u64) -> LightState {
        LightState {
            at: start,
            parts: Vec::new(),
        }
    }

    /// `messages` are the batch's from its first index (the worker reads them so for a batch
    /// scheme); `state` is replaced, not folded into.
    fn detect_and_fold(
        &self,
        key: &ExpandedKey,
        _state: LightState,
        messages: &[StoredMessage],
    ) -> Result<LightState, OmrError> {
        let first = self.check_batch(messages)?;
        let batch = self.batch(messages)?;
        Ok(Light::part(first, self.half(&batch, key), &batch))
    }

    fn range(state: &LightState) -> (u64, u64) {
        (state.at, state.end())
    }

    fn encode_state(state: &LightState) -> Vec<u8> {
        Digest::new(&omr_light::OMR_LIGHT_V1, state.parts.clone()).to_bytes()
    }

    fn decode_state(&self, bytes: &[u8]) -> Result<LightState, OmrError> {
        let d = Digest::from_bytes(bytes)?;
        let Some(at) = d.parts.first().map(|p| p.first) else {
            return Err(OmrError::malformed("stored digest part", "no batch"));
        };
        Ok(LightState { at, parts: d.parts })
    }

    fn empty_state(&self, _kbar: usize, at: u64) -> LightState {
        LightState {
            at,
            parts: Vec::new(),
        }
    }

    fn merge(state: &mut LightState, next: &LightState) -> Result<(), OmrError> {
        if next.at != state.end() {
            return Err(OmrError::malformed(
                "digest parts",
                format!("a part at {} after one ending at {}", next.at, state.end()),
            ));
        }
        state.parts.extend(next.parts.iter().cloned());
        Ok(())
    }

    fn digest_key(&self, _bytes: &[u8]) -> Result<(), OmrError> {
        Ok(())
    }

    fn encode_digest(_key: &(), state: LightState) -> Result<Vec<u8>, OmrError> {
        Ok(Digest::new(&omr_light::OMR_LIGHT_V1, state.parts).to_bytes())
    }
}

impl BatchScheme for Light {
    fn batch_messages(&self) -> usize {
        self.params.batch.max(1)
    }

    fn detect_prepared(&self, key: &ExpandedKey, first: u64, count: usize) -> Option<LightState> {
        let batch = self.prepared((first, count))?;
        Some(Light::part(first, self.half(&batch, key), &batch))
    }

    /// One pass over the batch's shared plaintexts for all of `keys` (`Batch::detect_many`:
    /// each block of them is read from memory once for the group; on a GPU, one launch).
    fn detect_many(
        &self,
        keys: &[&ExpandedKey],
        first: u64,
        count: usize,
        messages: &[StoredMessage],
    ) -> Result<Option<Vec<LightState>>, OmrError> {
        let batch = if messages.is_empty() {
            match self.prepared((first, count)) {
                Some(b) => b,
                None => return Ok(None),
            }
        } else {
            self.check_batch(messages)?;
            self.batch(messages)?
        };
        let halves = self.halves(&batch, keys);
        Ok(Some(
            (halves.into_iter())
                .map(|own| Light::part(first, own, &batch))
                .collect(),
        ))
    }

    fn keys_per_pass(&self) -> Option<usize> {
        (self.gpu.as_ref())
            .filter(|g| g.is_active())
            .map(|_| GPU_GROUP_KEYS)
    }

    fn has_prepared(&self, first: u64, count: usize) -> bool {
        self.prepared((first, count)).is_some()
    }
}
