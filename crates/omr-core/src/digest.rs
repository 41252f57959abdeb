//! Digests: per-key accumulators that fold pertinency ciphertexts times plaintext polynomials,
//! their merge, and the encoded digest the recipient downloads.
//!
//! Plaintext layout (t = plaintext modulus, N = N2):
//! - index polynomials: `segments` segments of `buckets` buckets of 4 slots
//!   [counter 1, i mod t, (i / t) mod t, h(i)], then `checksum` slots of PRF weights;
//! - payload polynomials: K = k̄ + margin combinations, combination j holding w_{j,i}·x_i where x_i is
//!   the payload (two length bytes, then the bytes, zero-padded).
//!
//! Bucket choices and weights come from a keyed BLAKE3 PRF of (seed, i), so the recipient can
//! recompute them. Coefficients are centered in (-t/2, t/2] to keep the products' noise small.

use crate::codec::{pack_bits, write_header, write_kbar_and_range, Kind, Reader};
use crate::detect::Pertinency;
use crate::error::OmrError;
use crate::keys::DetectionKey;
use crate::params::{ParamSet, PRIME_P};
use crate::prime::{self, KsScratch, Ntt, PrimeKeyswitchKey, SeededPrimeKeyswitchKey};

/// Slots per index bucket: counter, two index digits, check value.
pub(crate) const BUCKET_SLOTS: usize = 4;
/// Limit when decoding a digest.
pub const DIGEST_LIMIT: usize = 16 * 1024 * 1024;
/// Limit when decoding an accumulator.
pub const ACCUMULATOR_LIMIT: usize = 64 * 1024 * 1024;

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

/// The running digest of one key over a contiguous range of board indices `[start, end)`:
/// Σ PV_i · p_i(X), held modulo p in the NTT domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accumulator {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) data: Vec<u64>,
}

impl Accumulator {
    /// An empty accumulator whose first message will be `start`.
    pub fn new(params: &'static ParamSet, kbar: usize, start: u64) -> Self {
        let layout = Layout::new(params, kbar);
        Accumulator {
            params,
            kbar,
            start,
            end: start,
            data: vec![0; layout.total_polys() * (params.k3 + 1) * params.n2],
        }
    }

    /// First index covered.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// One past the last index covered.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Number of messages folded.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// True when one more message would exceed the noise budget's range M.
    pub fn is_full(&self) -> bool {
        self.len() >= self.params.max_range
    }

    /// Append the adjacent accumulator `next` (same key, `next.start == self.end`).
    pub fn merge(&mut self, next: &Accumulator) -> Result<(), OmrError> {
        if next.params != self.params || next.kbar != self.kbar {
            return Err(OmrError::NotAdjacent("different parameter set or k̄".into()));
        }
        if next.start != self.end {
            return Err(OmrError::NotAdjacent(format!(
                "[{}, {}) then [{}, {})",
                self.start, self.end, next.start, next.end
            )));
        }
        let total = next.end - self.start;
        if total > self.params.max_range {
            return Err(OmrError::RangeTooLong {
                got: total,
                max: self.params.max_range,
            });
        }
        for (a, b) in self.data.iter_mut().zip(&next.data) {
            *a = prime::add(*a, *b);
        }
        self.end = next.end;
        Ok(())
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.data.len() * 8);
        write_header(&mut out, Kind::Accumulator, self.params);
        write_kbar_and_range(&mut out, self.kbar, self.start, self.end);
        for v in &self.data {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::Accumulator, ACCUMULATOR_LIMIT)?;
        let (kbar, start, end) = r.kbar_and_range(p)?;
        let layout = Layout::new(p, kbar);
        let data = r.u64s(layout.total_polys() * (p.k3 + 1) * p.n2)?;
        if data.iter().any(|&v| v >= PRIME_P) {
            return Err(r.err("coefficient out of range"));
        }
        r.finish()?;
        Ok(Accumulator {
            params: p,
            kbar,
            start,
            end,
            data,
        })
    }
}

/// A digest as sent to the recipient: k = 1 GLWE ciphertexts under the level-2 key, switched
/// to 2^digest_modulus_log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// total_polys × (mask, body) × N values.
    pub(crate) glwes: Vec<u64>,
}

impl Digest {
    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::Digest, self.params);
        write_kbar_and_range(&mut out, self.kbar, self.start, self.end);
        pack_bits(
            &mut out,
            self.glwes.iter().copied(),
            self.params.digest_modulus_log,
        );
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::Digest, DIGEST_LIMIT)?;
        let (kbar, start, end) = r.kbar_and_range(p)?;
        let layout = Layout::new(p, kbar);
        let glwes = r.packed(layout.total_polys() * 2 * p.n2, p.digest_modulus_log)?;
        r.finish()?;
        Ok(Digest {
            params: p,
            kbar,
            start,
            end,
            glwes,
        })
    }

    /// Encoded size in bytes for a (parameter set, k̄).
    pub fn encoded_len(p: &ParamSet, kbar: usize) -> usize {
        crate::codec::HEADER_LEN
            + 20
            + (Layout::new(p, kbar).total_polys() * 2 * p.n2 * p.digest_modulus_log as usize)
                .div_ceil(8)
    }
}

/// Reusable buffers for [`DetectionKey::fold`].
#[derive(Debug, Default)]
pub struct FoldScratch {
    plain: Vec<u64>,
}

impl DetectionKey {
    /// The digest layout of this key.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A new empty accumulator for this key starting at board index `start`.
    pub fn new_accumulator(&self, start: u64) -> Accumulator {
        Accumulator::new(self.params, self.kbar, start)
    }

    /// Fold message `index` (which must be `acc.end()`) with its pertinency and payload.
    pub fn fold(
        &self,
        acc: &mut Accumulator,
        index: u64,
        pv: &Pertinency,
        payload: &[u8],
        scratch: &mut FoldScratch,
    ) -> Result<(), OmrError> {
        if acc.params != self.params || acc.kbar != self.kbar {
            return Err(OmrError::NotAdjacent(
                "accumulator belongs to another key shape".into(),
            ));
        }
        if index != acc.end {
            return Err(OmrError::OutOfOrder {
                index,
                start: acc.start,
                end: acc.end,
            });
        }
        if acc.is_full() {
            return Err(OmrError::RangeTooLong {
                got: acc.len() + 1,
                max: self.params.max_range,
            });
        }
        let symbols = payload_symbols(self.params, payload)?;
        message_plaintext(
            &self.layout,
            &self.prf_seed,
            index,
            &symbols,
            &mut scratch.plain,
        );
        let n = self.params.n2;
        let parts = self.params.k3 + 1;
        for (d, plain) in scratch.plain.chunks_exact_mut(n).enumerate() {
            if plain.iter().all(|&c| c == 0) {
                continue;
            }
            self.ntt.fwd(plain);
            let target = &mut acc.data[d * parts * n..(d + 1) * parts * n];
            for (m, t) in target.chunks_exact_mut(n).enumerate() {
                self.ntt.mul_acc(t, &pv.ntt[m * n..(m + 1) * n], plain);
            }
        }
        acc.end += 1;
        Ok(())
    }

    /// Turn an accumulator into the digest the recipient downloads (see [`DigestKey::digest`]).
    pub fn digest(&self, acc: &Accumulator) -> Result<Digest, OmrError> {
        self.digest_key.digest(acc)
    }
}

/// What turning accumulators into digests needs: the down keyswitching key (k3 → 1). Small
/// (≈ 100 KB encoded for omr-v1) so an API server can hold it without the detection key.
#[derive(Debug)]
pub struct DigestKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) seeded: SeededPrimeKeyswitchKey,
    pub(crate) down: PrimeKeyswitchKey,
    pub(crate) ntt: Ntt,
}

/// Limit when decoding a digest key.
pub const DIGEST_KEY_LIMIT: usize = 1024 * 1024;

impl DigestKey {
    pub(crate) fn new(
        params: &'static ParamSet,
        kbar: usize,
        seeded: SeededPrimeKeyswitchKey,
    ) -> Self {
        let ntt = Ntt::new(params.n2);
        let down = seeded.expand(&ntt);
        DigestKey {
            params,
            kbar,
            seeded,
            down,
            ntt,
        }
    }

    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    /// Back to coefficients, keyswitch to the k = 1 level-2 key, switch to
    /// 2^digest_modulus_log.
    pub fn digest(&self, acc: &Accumulator) -> Result<Digest, OmrError> {
        if acc.params != self.params || acc.kbar != self.kbar {
            return Err(OmrError::NotAdjacent(
                "accumulator belongs to another key shape".into(),
            ));
        }
        let p = self.params;
        let n = p.n2;
        let parts = p.k3 + 1;
        let log = p.digest_modulus_log;
        let mut scratch = KsScratch::default();
        let mut coeff = vec![0u64; parts * n];
        let mut down = vec![0u64; 2 * n];
        let mut glwes = Vec::with_capacity(acc.data.len() / parts * 2);
        for chunk in acc.data.chunks_exact(parts * n) {
            coeff.copy_from_slice(chunk);
            for poly in coeff.chunks_exact_mut(n) {
                self.ntt.inv(poly);
            }
            self.down
                .keyswitch(&self.ntt, &coeff, &mut down, &mut scratch);
            glwes.extend(down.iter().map(|&c| {
                let r = (((c as u128) << log) + PRIME_P as u128 / 2) / PRIME_P as u128;
                r as u64 & ((1u64 << log) - 1)
            }));
        }
        Ok(Digest {
            params: p,
            kbar: self.kbar,
            start: acc.start,
            end: acc.end,
            glwes,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::DigestKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        crate::keys::write_prime(&mut out, &self.seeded);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::DigestKey, DIGEST_KEY_LIMIT)?;
        let kbar = r.kbar(p)?;
        let seeded =
            crate::keys::read_prime(&mut r, p.k3, 1, p.down_base_log, p.down_levels, p.n2)?;
        r.finish()?;
        Ok(DigestKey::new(p, kbar, seeded))
    }
}
