//! [`Set`]: the parameter set a server runs, of either scheme, and what the request side asks of
//! it: its name and sizes, whether it is insecure, how a clue's bytes are read (so that a clue of
//! the other scheme is named for what it is), the payload rule and the postage stamp.

use omr_core::{OmrError, ParamSet, Postage};
use omr_light::LightParams;

/// A parameter set as omrd runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// omr-v1, omr-v2 and the insecure test set: TFHE detection, payloads in the digest.
    Tfhe(&'static ParamSet),
    /// omr-light-v1: linear detection in batches, payloads by PIR.
    Light(&'static LightParams),
}

impl Set {
    /// The set named `name`, of either scheme.
    pub fn by_name(name: &str) -> Option<Set> {
        if let Ok(p) = ParamSet::by_name(name) {
            return Some(Set::Tfhe(p));
        }
        LightParams::by_name(name).map(Set::Light)
    }

    /// The secure sets' names, for error messages.
    pub fn names() -> String {
        omr_api::param_sets::param_set_list()
    }

    pub fn name(self) -> &'static str {
        match self {
            Set::Tfhe(p) => p.name,
            Set::Light(p) => p.name,
        }
    }

    /// Whether omrd refuses it unless told that it is insecure.
    pub fn insecure(self) -> bool {
        match self {
            Set::Tfhe(p) => p.insecure,
            Set::Light(p) => !p.secure,
        }
    }

    /// The TFHE set, when it is one.
    pub fn tfhe(self) -> Option<&'static ParamSet> {
        match self {
            Set::Tfhe(p) => Some(p),
            Set::Light(_) => None,
        }
    }

    pub fn clue_bytes(self) -> usize {
        match self {
            Set::Tfhe(p) => p.clue_bytes(),
            Set::Light(p) => p.clue_bytes(),
        }
    }

    pub fn payload_bytes(self) -> usize {
        match self {
            Set::Tfhe(p) => p.payload_bytes,
            Set::Light(p) => p.payload_bytes,
        }
    }

    /// The largest k̄ a key may declare (a light digest carries no payloads: 1).
    pub fn max_kbar(self) -> usize {
        match self {
            Set::Tfhe(p) => p.max_kbar,
            Set::Light(_) => 1,
        }
    }

    /// The most board messages one digest covers (TFHE: the range M an accumulator holds).
    pub fn max_range(self) -> u64 {
        match self {
            Set::Tfhe(p) => p.max_range,
            Set::Light(p) => p.max_digest_messages,
        }
    }

    /// Messages detected together (`Some(D)` for a batch scheme), which an epoch must equal.
    pub fn batch(self) -> Option<u64> {
        match self {
            Set::Tfhe(_) => None,
            Set::Light(p) => Some(p.batch as u64),
        }
    }

    /// The name of the set `clue` is a clue of. The clue is decoded (lengths, coefficient
    /// ranges) under this server's scheme; one of the other scheme is recognised too, so that
    /// it is refused as of another set rather than as malformed.
    pub fn clue_set(self, clue: &[u8]) -> Result<&'static str, OmrError> {
        let tfhe = |c: &[u8]| omr_core::Clue::from_bytes(c).map(|c| c.params().name);
        let light = |c: &[u8]| omr_light::Clue::from_bytes(c).map(|c| c.params().name);
        match self {
            Set::Tfhe(_) => tfhe(clue).or_else(|e| light(clue).map_err(|_| e)),
            Set::Light(_) => light(clue).or_else(|e| tfhe(clue).map_err(|_| e)),
        }
    }

    /// A payload this set carries.
    pub fn validate_payload(self, payload: &[u8]) -> Result<(), OmrError> {
        match self {
            Set::Tfhe(p) => omr_core::validate_payload(p, payload),
            Set::Light(p) if payload.len() > p.payload_bytes => Err(OmrError::PayloadTooLarge {
                got: payload.len(),
                max: p.payload_bytes,
            }),
            Set::Light(_) => Ok(()),
        }
    }

    /// The postage stamp of a message of this set.
    pub fn postage(self, clue: &[u8], payload: &[u8]) -> Postage {
        Postage::named(self.name(), clue, payload)
    }
}
