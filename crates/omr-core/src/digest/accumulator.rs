//! The accumulator: one key's running digest Σ PV_i · p_i(X) over a contiguous range of board
//! indices, held modulo p in the NTT domain; folding a message into it, merging, its encoding.

use crate::codec::{write_header, write_kbar_and_range, Kind, Reader};
use crate::detect::Pertinency;
use crate::error::OmrError;
use crate::keys::DetectionKey;
use crate::layout::{message_plaintext, payload_symbols, Layout};
use crate::params::{ParamSet, PRIME_P};
use crate::prime;

/// Limit when decoding an accumulator.
pub const ACCUMULATOR_LIMIT: usize = 64 * 1024 * 1024;

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

/// Reusable buffers for [`DetectionKey::fold`].
#[derive(Debug, Default)]
pub struct FoldScratch {
    plain: Vec<u64>,
}

impl DetectionKey {
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
}
