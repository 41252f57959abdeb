//! The digest plaintext layout and the per-message PRF: where each message's index buckets,
//! checksum weights and payload combinations go, for one (parameter set, k̄).
//!
//! Plaintext layout (t = plaintext modulus, N = N2):
//! - index polynomials: `segments` segments of `buckets` buckets of 4 slots
//!   [counter 1, i mod t, (i / t) mod t, h(i)], then `checksum` slots of PRF weights;
//! - payload polynomials: K = k̄ + margin combinations, combination j holding w_{j,i}·x_i where x_i is
//!   the payload (two length bytes, then the bytes, zero-padded).
//!
//! Bucket choices and weights come from a keyed BLAKE3 PRF of (seed, i), so the recipient can
//! recompute them. Coefficients are centered in (-t/2, t/2] to keep the products' noise small.
//! It needs nothing but the parameter set, so it sits below the keys: the expanded detection key
//! holds its `Layout`, the accumulator and the decoder use the PRF.

use crate::error::OmrError;
use crate::params::{ParamSet, PRIME_P};

/// Slots per index bucket: counter, two index digits, check value.
pub(crate) const BUCKET_SLOTS: usize = 4;

/// Where each piece of a message's plaintext goes, for one (parameter set, k̄).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub n: usize,
    pub t: u64,
    pub segments: usize,
    pub buckets: usize,
    pub checksum: usize,
    pub combos: usize,
    pub payload_coeffs: usize,
    pub index_polys: usize,
    pub payload_polys: usize,
}

impl Layout {
    pub fn new(p: &ParamSet, kbar: usize) -> Self {
        let n = p.n2;
        let wanted = p.index_segments * BUCKET_SLOTS * 4 * kbar + p.checksum_slots;
        let index_polys = wanted.div_ceil(n).max(1);
        let buckets = (index_polys * n - p.checksum_slots) / (p.index_segments * BUCKET_SLOTS);
        let combos = kbar + p.payload_margin;
        let payload_coeffs = p.payload_coeffs();
        let payload_polys = (combos * payload_coeffs).div_ceil(n);
        Layout {
            n,
            t: p.plain_modulus,
            segments: p.index_segments,
            buckets,
            checksum: p.checksum_slots,
            combos,
            payload_coeffs,
            index_polys,
            payload_polys,
        }
    }

    pub fn total_polys(&self) -> usize {
        self.index_polys + self.payload_polys
    }

    pub(crate) fn slot(&self, segment: usize, bucket: usize) -> usize {
        (segment * self.buckets + bucket) * BUCKET_SLOTS
    }

    pub(crate) fn checksum_slot(&self, j: usize) -> usize {
        self.segments * self.buckets * BUCKET_SLOTS + j
    }

    pub(crate) fn payload_slot(&self, combo: usize, k: usize) -> usize {
        self.index_polys * self.n + combo * self.payload_coeffs + k
    }
}

/// The PRF outputs for one message index.
#[derive(Debug, Clone)]
pub(crate) struct MessagePrf {
    pub(crate) check: u64,
    pub(crate) buckets: Vec<usize>,
    pub(crate) checksum: Vec<u64>,
    /// Non-zero payload weights, one per combination.
    pub(crate) weights: Vec<u64>,
}

impl MessagePrf {
    pub(crate) fn new(seed: &[u8; 32], layout: &Layout, index: u64) -> Self {
        let mut h = blake3::Hasher::new_keyed(seed);
        h.update(b"omr-v1 digest prf");
        h.update(&index.to_le_bytes());
        let mut xof = h.finalize_xof();
        let mut next = || {
            let mut b = [0u8; 8];
            xof.fill(&mut b);
            u64::from_le_bytes(b)
        };
        let t = layout.t;
        let check = next() % t;
        let buckets = (0..layout.segments)
            .map(|_| (next() % layout.buckets as u64) as usize)
            .collect();
        let checksum = (0..layout.checksum).map(|_| next() % t).collect();
        let weights = (0..layout.combos).map(|_| 1 + next() % (t - 1)).collect();
        MessagePrf {
            check,
            buckets,
            checksum,
            weights,
        }
    }
}

/// Payload symbols: two length bytes then the bytes, zero-padded to `payload_coeffs`.
pub(crate) fn payload_symbols(p: &ParamSet, payload: &[u8]) -> Result<Vec<u64>, OmrError> {
    if payload.len() > p.payload_bytes {
        return Err(OmrError::PayloadTooLarge {
            got: payload.len(),
            max: p.payload_bytes,
        });
    }
    let mut x = vec![0u64; p.payload_coeffs()];
    x[0] = (payload.len() & 0xff) as u64;
    x[1] = (payload.len() >> 8) as u64;
    for (d, &b) in x[2..].iter_mut().zip(payload) {
        *d = b as u64;
    }
    Ok(x)
}

/// Check a payload against the parameter set's limit.
pub fn validate_payload(p: &ParamSet, payload: &[u8]) -> Result<(), OmrError> {
    payload_symbols(p, payload).map(|_| ())
}

#[inline]
fn centered_to_p(v: u64, t: u64) -> u64 {
    if v > t / 2 {
        PRIME_P - (t - v)
    } else {
        v
    }
}

/// The plaintext polynomials p_i(X) of one message (coefficient domain, values mod p).
pub(crate) fn message_plaintext(
    layout: &Layout,
    seed: &[u8; 32],
    index: u64,
    symbols: &[u64],
    out: &mut Vec<u64>,
) {
    let t = layout.t;
    out.clear();
    out.resize(layout.total_polys() * layout.n, 0);
    let prf = MessagePrf::new(seed, layout, index);
    let offset = index % (t * t);
    let slot_values = [1, offset % t, offset / t, prf.check];
    for (seg, &b) in prf.buckets.iter().enumerate() {
        let base = layout.slot(seg, b);
        for (k, &v) in slot_values.iter().enumerate() {
            out[base + k] = centered_to_p(v, t);
        }
    }
    for (j, &w) in prf.checksum.iter().enumerate() {
        out[layout.checksum_slot(j)] = centered_to_p(w, t);
    }
    for (j, &w) in prf.weights.iter().enumerate() {
        let base = layout.payload_slot(j, 0);
        for (k, &x) in symbols.iter().enumerate() {
            out[base + k] = centered_to_p(w * x % t, t);
        }
    }
}
