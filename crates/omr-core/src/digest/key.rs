//! The digest key: what turns accumulators into digests (the down keyswitching key k3 → 1), on
//! its own so an API server can hold it without the detection key; its encoding.

use super::accumulator::Accumulator;
use super::ciphertext::Digest;
use crate::codec::{write_header, Kind, Reader};
use crate::error::OmrError;
use crate::keys::{CompressedDetectionKey, DetectionKey};
use crate::params::{ParamSet, PRIME_P};
use crate::prime::{KsScratch, Ntt, PrimeKeyswitchKey, SeededPrimeKeyswitchKey};

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
        switch_down(self.params, self.kbar, &self.ntt, &self.down, acc)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::DigestKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        self.seeded.write_to(&mut out);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::DigestKey, DIGEST_KEY_LIMIT)?;
        let kbar = r.kbar(p)?;
        let seeded = SeededPrimeKeyswitchKey::read_from(
            &mut r,
            p.k3,
            1,
            p.down_base_log,
            p.down_levels,
            p.n2,
        )?;
        r.finish()?;
        Ok(DigestKey::new(p, kbar, seeded))
    }
}

impl CompressedDetectionKey {
    /// The part of this key that turns accumulators into digests.
    pub fn digest_key(&self) -> DigestKey {
        DigestKey::new(self.params, self.kbar, self.down.clone())
    }
}

impl DetectionKey {
    /// Turn an accumulator into the digest the recipient downloads (see [`DigestKey::digest`]).
    pub fn digest(&self, acc: &Accumulator) -> Result<Digest, OmrError> {
        switch_down(self.params, self.kbar, &self.ntt, &self.down, acc)
    }
}

/// The digest of `acc` with the down key of a (parameter set, k̄): what [`DigestKey::digest`]
/// and [`DetectionKey::digest`] both compute.
fn switch_down(
    params: &'static ParamSet,
    kbar: usize,
    ntt: &Ntt,
    down_key: &PrimeKeyswitchKey,
    acc: &Accumulator,
) -> Result<Digest, OmrError> {
    if acc.params != params || acc.kbar != kbar {
        return Err(OmrError::NotAdjacent(
            "accumulator belongs to another key shape".into(),
        ));
    }
    let p = params;
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
            ntt.inv(poly);
        }
        down_key.keyswitch(ntt, &coeff, &mut down, &mut scratch);
        glwes.extend(down.iter().map(|&c| {
            let r = (((c as u128) << log) + PRIME_P as u128 / 2) / PRIME_P as u128;
            r as u64 & ((1u64 << log) - 1)
        }));
    }
    Ok(Digest {
        params: p,
        kbar,
        start: acc.start,
        end: acc.end,
        glwes,
    })
}
