//! The homomorphic trace: ct += KS_g(τ_g(ct)) over the Galois elements N+1, N/2+1, ..., 3.

use super::field::add;
use super::glwe::automorphism_into;
use super::keyswitch::{KsScratch, PrimeKeyswitchKey};
use super::ntt::Ntt;

/// The trace's Galois elements, in application order: N+1, N/2+1, ..., 3.
pub(crate) fn trace_elements(n: usize) -> Vec<usize> {
    let log_n = n.ilog2();
    (1..=log_n).map(|i| (n >> (i - 1)) + 1).collect()
}

/// The homomorphic trace in place: ct += KS_g(τ_g(ct)) for every trace element g, so that a
/// ciphertext of m(X) becomes one of N·m_0. `keys[i]` switches from τ_{g_i}(S) back to S.
pub(crate) fn trace(
    ntt: &Ntt,
    keys: &[PrimeKeyswitchKey],
    ct: &mut [u64],
    scratch: &mut KsScratch,
) {
    let n = ntt.n;
    let mut rotated = vec![0u64; ct.len()];
    let mut switched = vec![0u64; ct.len()];
    for (g, ksk) in trace_elements(n).into_iter().zip(keys) {
        for (src, dst) in ct.chunks_exact(n).zip(rotated.chunks_exact_mut(n)) {
            automorphism_into(src, g, dst);
        }
        ksk.keyswitch(ntt, &rotated, &mut switched, scratch);
        for (c, s) in ct.iter_mut().zip(&switched) {
            *c = add(*c, *s);
        }
    }
}
