//! Blind rotation of a batch of modulus-switched LWE ciphertexts: with a whole tfhe-rs key
//! (its batched rotation), or with one decomposition level of a key (level 1 of a set whose
//! level 1 uses the level-2 key).

use tfhe::core_crypto::algorithms::polynomial_algorithms::polynomial_wrapping_monic_monomial_div;
use tfhe::core_crypto::fft_impl::fft64::crypto::bootstrap::batch_blind_rotate_assign_scratch;
use tfhe::core_crypto::fft_impl::fft64::crypto::ggsw::{
    add_external_product_assign, add_external_product_assign_scratch, FourierGgswCiphertext,
};
use tfhe::core_crypto::prelude::*;

/// A modulus-switched LWE ciphertext as tfhe-rs's blind rotation reads it.
pub(crate) struct SwitchedLwe<'a> {
    pub(crate) mask: &'a [usize],
    pub(crate) body: usize,
    pub(crate) log: CiphertextModulusLog,
}

impl ModulusSwitchedLweCiphertext<usize> for SwitchedLwe<'_> {
    fn log_modulus(&self) -> CiphertextModulusLog {
        self.log
    }
    fn lwe_dimension(&self) -> LweDimension {
        LweDimension(self.mask.len())
    }
    fn body(&self) -> usize {
        self.body
    }
    fn mask(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.mask.iter().copied()
    }
}

/// Blind-rotate every input with one decomposition level of `bsk`: the rows of level `level`
/// (those at q/B^level) of a key of base B form a one-level key of base B^level, here
/// `base_log`. tfhe-rs's batched rotation takes whole keys only, so this is its loop (a CMUX
/// per key bit and input: ct1 = X^a·ct0 − ct0, then ct0 += GGSW ⊡ ct1) on views of that level.
pub(crate) fn batch_rotate_one_level(
    bsk: &FourierLweBootstrapKeyOwned,
    level: usize,
    base_log: usize,
    tv: &[u64],
    inputs: &[SwitchedLwe<'_>],
) -> Vec<GlweCiphertextOwned<u64>> {
    let n = PolynomialSize(tv.len());
    let glwe = GlweSize(2);
    let native = CiphertextModulus::<u64>::new_native();
    let mut accs: Vec<GlweCiphertextOwned<u64>> = inputs
        .iter()
        .map(|input| {
            let mut acc = GlweCiphertext::new(0u64, glwe, n, native);
            let mut body = acc.get_mut_body();
            let mut poly = body.as_mut_polynomial();
            polynomial_wrapping_monic_monomial_div(
                &mut poly,
                &Polynomial::from_container(tv),
                MonomialDegree(input.body),
            );
            acc
        })
        .collect();
    let mut diff = GlweCiphertext::new(0u64, glwe, n, native);
    let fft = Fft::new(n);
    let fft = fft.as_view();
    let mut buffers = ComputationBuffers::new();
    buffers.resize(
        add_external_product_assign_scratch::<u64>(glwe, n, fft).unaligned_bytes_required(),
    );
    for (i, ggsw) in bsk.as_view().into_ggsw_iter().enumerate() {
        let rows = ggsw
            .into_levels()
            .find(|m| m.decomposition_level().0 == level)
            .expect("the key has that decomposition level");
        let one_level = FourierGgswCiphertext::from_container(
            rows.data(),
            glwe,
            n,
            DecompositionBaseLog(base_log),
            DecompositionLevelCount(1),
        );
        for (acc, input) in accs.iter_mut().zip(inputs) {
            let a = input.mask[i];
            if a == 0 {
                continue;
            }
            for (d, c) in diff
                .as_mut()
                .chunks_exact_mut(n.0)
                .zip(acc.as_ref().chunks_exact(n.0))
            {
                rotate_minus(d, c, a);
            }
            add_external_product_assign(
                acc.as_mut_view(),
                one_level.as_view(),
                diff.as_view(),
                fft,
                buffers.stack(),
            );
        }
    }
    accs
}

/// d = X^a·c − c in Z[X]/(X^N + 1), for 0 ≤ a < 2N: the first half of a CMUX in one pass.
fn rotate_minus(d: &mut [u64], c: &[u64], a: usize) {
    let n = c.len();
    let (a, negate) = if a >= n { (a - n, true) } else { (a, false) };
    let sign = |x: u64, neg: bool| if neg { x.wrapping_neg() } else { x };
    // Coefficients a..N come from c[0..N-a] with the sign of X^a; 0..a wrap around once more.
    for ((dj, &cj), &src) in d[a..].iter_mut().zip(&c[a..]).zip(&c[..n - a]) {
        *dj = sign(src, negate).wrapping_sub(cj);
    }
    for ((dj, &cj), &src) in d[..a].iter_mut().zip(&c[..a]).zip(&c[n - a..]) {
        *dj = sign(src, !negate).wrapping_sub(cj);
    }
}

/// Blind-rotate every input with the same test vector, sharing each GGSW load across the batch.
pub(crate) fn batch_rotate(
    bsk: &FourierLweBootstrapKeyOwned,
    tv: &[u64],
    inputs: &[SwitchedLwe<'_>],
) -> Vec<GlweCiphertextOwned<u64>> {
    let n = PolynomialSize(tv.len());
    let native = CiphertextModulus::<u64>::new_native();
    let mut luts = GlweCiphertextList::new(
        0u64,
        GlweSize(2),
        n,
        GlweCiphertextCount(inputs.len()),
        native,
    );
    for mut lut in luts.iter_mut() {
        lut.get_mut_body().as_mut().copy_from_slice(tv);
    }
    let fft = Fft::new(n);
    let fft = fft.as_view();
    let mut buffers = ComputationBuffers::new();
    buffers.resize(
        batch_blind_rotate_assign_scratch::<u64>(
            GlweSize(2),
            n,
            CiphertextCount(inputs.len()),
            fft,
        )
        .unaligned_bytes_required(),
    );
    bsk.as_view()
        .batch_blind_rotate_assign(luts.as_mut_view(), inputs, fft, buffers.stack());
    luts.iter()
        .map(|g| GlweCiphertext::from_container(g.as_ref().to_vec(), n, native))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::rotate_minus;
    use tfhe::core_crypto::algorithms::polynomial_algorithms::polynomial_wrapping_monic_monomial_mul;
    use tfhe::core_crypto::prelude::{MonomialDegree, Polynomial};

    #[test]
    fn rotate_minus_is_the_monomial_product_less_the_input() {
        let n = 16;
        let c: Vec<u64> = (0..n as u64)
            .map(|i| i * 0x9E37_79B9_7F4A_7C15 + 3)
            .collect();
        for a in 0..2 * n {
            let mut want = Polynomial::new(0u64, tfhe::core_crypto::prelude::PolynomialSize(n));
            polynomial_wrapping_monic_monomial_mul(
                &mut want,
                &Polynomial::from_container(c.as_slice()),
                MonomialDegree(a),
            );
            let want: Vec<u64> = want
                .as_ref()
                .iter()
                .zip(&c)
                .map(|(&w, &x)| w.wrapping_sub(x))
                .collect();
            let mut got = vec![0u64; n];
            rotate_minus(&mut got, &c, a);
            assert_eq!(got, want, "a = {a}");
        }
    }
}
