//! The detection key as the recipient uploads it: tfhe seeds plus rounded key bodies for the
//! level-1 and level-2 bootstrapping keys and the LWE keyswitch key, seeded prime-modulus keys
//! for the up keyswitch, the trace and the digest; its encoding.

use super::seeded::SeededNative;
use crate::codec::{write_header, Kind, Reader};
use crate::error::OmrError;
use crate::params::ParamSet;
use crate::prime::{trace_elements, SeededPrimeKeyswitchKey};

/// Size limit when decoding a detection key (a little above the production size).
pub const DETECTION_KEY_LIMIT: usize = 160 * 1024 * 1024;

/// The detection key as the recipient uploads it: seeds plus bodies (≈ 100 MB for omr-v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedDetectionKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) bsk1: SeededNative,
    pub(crate) ksk: SeededNative,
    pub(crate) bsk2: SeededNative,
    pub(crate) up: SeededPrimeKeyswitchKey,
    pub(crate) trace: Vec<SeededPrimeKeyswitchKey>,
    pub(crate) down: SeededPrimeKeyswitchKey,
}

impl CompressedDetectionKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    fn bsk_body_count(input_dim: usize, n: usize, levels: usize) -> usize {
        // Seeded GGSW: (k+1)·levels rows, one body polynomial each (k = 1).
        input_dim * 2 * levels * n
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len_estimate());
        write_header(&mut out, Kind::DetectionKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        out.extend_from_slice(&self.prf_seed);
        self.bsk1.write_to(&mut out);
        self.ksk.write_to(&mut out);
        self.bsk2.write_to(&mut out);
        self.up.write_to(&mut out);
        for t in &self.trace {
            t.write_to(&mut out);
        }
        self.down.write_to(&mut out);
        out
    }

    fn encoded_len_estimate(&self) -> usize {
        (self.bsk1.bodies_hi.len() * self.bsk1.bits() as usize
            + self.bsk2.bodies_hi.len() * self.bsk2.bits() as usize)
            / 8
            + 4 * 1024 * 1024
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        Self::from_bytes_with_limit(bytes, DETECTION_KEY_LIMIT)
    }

    pub fn from_bytes_with_limit(bytes: &[u8], limit: usize) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::DetectionKey, limit)?;
        let kbar = r.kbar(p)?;
        let prf_seed = r.array32()?;
        let bsk1 = SeededNative::read_from(
            &mut r,
            Self::bsk_body_count(p.level1_key_dim(), p.n1, p.bsk1_levels),
            ParamSet::dropped_bits_for_noise(p.glwe1_noise_log2),
        )?;
        let ksk = SeededNative::read_from(&mut r, p.n1 * p.ksk_levels, p.ksk_dropped_bits())?;
        let bsk2 = SeededNative::read_from(
            &mut r,
            Self::bsk_body_count(p.lwe2_dim, p.n2, p.bsk2_levels),
            ParamSet::dropped_bits_for_noise(p.glwe2_noise_log2),
        )?;
        let up =
            SeededPrimeKeyswitchKey::read_from(&mut r, 1, p.k3, p.up_base_log, p.up_levels, p.n2)?;
        let mut trace = Vec::new();
        for _ in trace_elements(p.n2) {
            trace.push(SeededPrimeKeyswitchKey::read_from(
                &mut r,
                p.k3,
                p.k3,
                p.trace_base_log,
                p.trace_levels,
                p.n2,
            )?);
        }
        let down = SeededPrimeKeyswitchKey::read_from(
            &mut r,
            p.k3,
            1,
            p.down_base_log,
            p.down_levels,
            p.n2,
        )?;
        r.finish()?;
        Ok(CompressedDetectionKey {
            params: p,
            kbar,
            prf_seed,
            bsk1,
            ksk,
            bsk2,
            up,
            trace,
            down,
        })
    }
}
