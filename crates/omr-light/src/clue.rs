//! Clues: an RLWE encryption of zero under a recipient's address, of which the server needs the
//! whole first polynomial and ℓ coefficients of the second.
//!
//! a′ = a·u + e1 and b′ = b·u + e2 mod t, with u, e1, e2 from the centred binomial of η = 1.
//! a′ is sent rounded to an even value (one bit less per coefficient, 2,944 B instead of 3,072),
//! which adds the rounding times s to the noise; `LightParams::clue_noise_variance` counts it.

use omr_core::codec::pack_bits;
use omr_core::OmrError;
use rand::RngCore;

use crate::codec::{open, write_header, Kind};
use crate::keys::Address;
use crate::params::LightParams;
use crate::ring::{centre_bits, exact_product};
use crate::sample::cbd1;

/// A clue as the server stores it: a′ rounded (`a_bits` bits each) and b′'s first ℓ coefficients.
#[derive(Clone, PartialEq, Eq)]
pub struct Clue {
    params: &'static LightParams,
    /// a′ / 2^(log_t − a_bits), rounded half to even, mod 2^a_bits.
    pub(crate) a: Vec<u32>,
    /// b′_0 .. b′_{ℓ−1}, each below t.
    pub(crate) b: Vec<u32>,
}

impl std::fmt::Debug for Clue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clue")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

impl Address {
    /// A fresh clue for this address.
    pub fn clue(&self) -> Clue {
        self.clue_with(&mut rand::rngs::OsRng)
    }

    /// A clue with the randomness of `rng` (tests and benchmarks use a seeded one).
    pub fn clue_with(&self, rng: &mut impl RngCore) -> Clue {
        let p = self.params();
        let u = cbd1(rng, p.n);
        let e1 = cbd1(rng, p.n);
        let e2 = cbd1(rng, p.ell);
        let mask = p.t() as i64 - 1;
        let au = exact_product(&self.a(), &u);
        let b_centered: Vec<i64> = self.b.iter().map(|&v| centre(i64::from(v), p)).collect();
        let bu = exact_product(&b_centered, &u);
        let shift = p.log_t - p.a_bits;
        let a = au
            .iter()
            .zip(&e1)
            .map(|(&x, &e)| round_half_even((x + e) & mask, shift) as u32 & ((1 << p.a_bits) - 1))
            .collect();
        let b = (0..p.ell)
            .map(|k| ((bu[k] + e2[k]) & mask) as u32)
            .collect();
        Clue { params: p, a, b }
    }
}

/// x / 2^shift rounded to the nearest integer, ties to even (x ≥ 0).
fn round_half_even(x: i64, shift: u32) -> i64 {
    if shift == 0 {
        return x;
    }
    let q = x >> shift;
    let rem = x & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// The centred representative of v mod t.
pub(crate) fn centre(v: i64, p: &LightParams) -> i64 {
    centre_bits(v, p.log_t)
}

impl Clue {
    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    /// Coefficient i of a′ as the server uses it (the rounded value, centred mod t).
    #[inline]
    pub(crate) fn a_coeff(&self, i: usize) -> i64 {
        centre(
            i64::from(self.a[i]) << (self.params.log_t - self.params.a_bits),
            self.params,
        )
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let p = self.params;
        let mut out = Vec::with_capacity(p.clue_bytes());
        write_header(&mut out, Kind::Clue, p);
        pack_bits(&mut out, self.a.iter().map(|&v| u64::from(v)), p.a_bits);
        pack_bits(&mut out, self.b.iter().map(|&v| u64::from(v)), p.log_t);
        out
    }

    /// Decode a clue. Every length is fixed by the set, so any other length is refused before
    /// anything is allocated.
    pub fn from_bytes(bytes: &[u8]) -> Result<Clue, OmrError> {
        // No limit beyond the exact length checked next (before anything is allocated): a clue
        // one byte long is malformed, not an oversized body.
        let (mut r, p) = open(bytes, Kind::Clue, usize::MAX)?;
        if bytes.len() != p.clue_bytes() {
            return Err(r.err(format!(
                "{} bytes, a clue of {} is {}",
                bytes.len(),
                p.name,
                p.clue_bytes()
            )));
        }
        let a = r
            .packed(p.n, p.a_bits)?
            .into_iter()
            .map(|v| v as u32)
            .collect();
        let b = r
            .packed(p.ell, p.log_t)?
            .into_iter()
            .map(|v| v as u32)
            .collect();
        r.finish()?;
        Ok(Clue { params: p, a, b })
    }
}
