//! GLWE arithmetic modulo the prime p = 2^64 - 2^32 + 1: encryption, NTT-domain keyswitching,
//! automorphisms and the homomorphic trace.
//!
//! tfhe-rs 1.8.2 has no trace and only a schoolbook GLWE keyswitch for non-native moduli, so
//! this module does it on `tfhe-ntt`. With a prime modulus N is invertible: the level-2 output
//! is multiplied by N^-1 before the trace, so the trace does not multiply its noise by N.
//!
//! Layers inside: `field` (Z_p) -> `ntt` -> `glwe` (keys, sampling, automorphisms) ->
//! `keyswitch` (gadget, keys and their encoding) -> `trace`.

mod field;
mod glwe;
mod keyswitch;
mod ntt;
mod trace;

#[cfg(test)]
mod tests;

pub(crate) use field::{add, centered_f64, from_native, inverse, mul, sub};
pub(crate) use glwe::PrimeGlweKey;
pub(crate) use keyswitch::{Decomposer, KsScratch, PrimeKeyswitchKey, SeededPrimeKeyswitchKey};
pub(crate) use ntt::Ntt;
pub(crate) use trace::{trace, trace_elements};
