//! The CMUX of detection's blind rotations: acc ← acc + GGSW(s) ⊡ (X^a·acc − acc), for a group
//! of accumulators under the same key bit.
//!
//! The rotation X^a·acc − acc and its signed gadget decomposition are one pass, compiled for the
//! machine's vector width at run time (pulp's dispatch, AVX2 or AVX-512), with 32-bit digits.
//! The product then uses tfhe-rs's FFT: a forward transform per digit polynomial, one
//! multiply-add pass over all the key's Fourier rows for the whole group (each key vector loaded
//! once for the group, the sum of the rows' products kept in registers, where tfhe-rs reads and
//! writes the product once per row), and tfhe-rs's inverse transform added to each accumulator.
//! Both passes of our own (this multiply-add and [`super::decompose`]) are `pulp::WithSimd`
//! types: a closure handed to pulp's dispatch is not inlined into the target-feature function,
//! so its loop would run as baseline x86-64 code.
//!
//! Why not tfhe-rs's `add_external_product_assign`: it rotates and decomposes in two passes, and
//! its decomposition is compiled for baseline x86-64 (two 64-bit lanes). On omr-v2's level 1
//! (one decomposition level, so four FFTs per CMUX) those passes took a third of the rotation.
//! The digits are the same balanced decomposition (each in [−B/2, B/2), the rounding carried
//! up), so the noise is tfhe-rs's; `rotate::tests` checks the result against tfhe-rs's rotation.

use tfhe::core_crypto::fft_impl::fft64::c64;
use tfhe::core_crypto::fft_impl::fft64::crypto::ggsw::FourierGgswCiphertextView;
use tfhe::core_crypto::fft_impl::fft64::math::fft::FftView;
use tfhe::core_crypto::fft_impl::fft64::math::polynomial::FourierPolynomialMutView;
use tfhe::core_crypto::prelude::{ComputationBuffers, Polynomial};

use super::decompose::{rotate_decompose, Gadget};

/// Buffers of one rotation loop, reused across its CMUXes.
pub(crate) struct CmuxScratch {
    polys: usize,
    n: usize,
    /// Distance between consecutive Fourier polynomials in `fourier` and `product`: N/2 and a
    /// pad, so that they do not all start at the same offset modulo the cache's way size.
    stride: usize,
    /// levels × polys × N digits, 32-bit (the `decompose` module says why).
    digits: Vec<u32>,
    /// The forward transforms of every digit polynomial the key is read with, per input of a
    /// group (GROUP × rows × N/2).
    fourier: Vec<c64>,
    /// The products, per input of a group one Fourier polynomial per output polynomial.
    product: Vec<c64>,
    buffers: ComputationBuffers,
    arch: pulp::Arch,
}

/// CMUXes of one key bit computed together: each key vector is loaded once for the group.
pub(crate) const GROUP: usize = 4;

impl CmuxScratch {
    pub(crate) fn new(polys: usize, n: usize, levels: usize, fft: FftView<'_>) -> Self {
        // The multiply-add reads whole SIMD vectors (up to 4 complex numbers) of N/2.
        assert!(n.is_multiple_of(8), "polynomial size {n}");
        let mut buffers = ComputationBuffers::new();
        let need = fft
            .forward_scratch()
            .unaligned_bytes_required()
            .max(fft.backward_scratch().unaligned_bytes_required());
        buffers.resize(need);
        let stride = n / 2 + PAD;
        Self {
            polys,
            n,
            stride,
            digits: vec![0; levels * polys * n],
            fourier: vec![c64::default(); GROUP * levels * polys * stride],
            product: vec![c64::default(); GROUP * polys * stride],
            buffers,
            arch: pulp::Arch::new(),
        }
    }
}

/// accs[x] ← accs[x] + GGSW ⊡ (X^shifts[x]·accs[x] − accs[x]) for every input x of a group of
/// at most [`GROUP`] under the same key bit; each acc holds `polys` polynomials of N and each
/// shift is in 0..2N.
pub(crate) fn cmux_group(
    accs: &mut [&mut [u64]],
    shifts: &[usize],
    ggsw: FourierGgswCiphertextView<'_>,
    gadget: Gadget,
    fft: FftView<'_>,
    s: &mut CmuxScratch,
) {
    let (n, polys, stride) = (s.n, s.polys, s.stride);
    let half = n / 2;
    let inputs = accs.len();
    assert!(inputs <= GROUP && inputs == shifts.len());
    // The key rows read, and the digit polynomial each is multiplied with.
    let mut rows: [&[c64]; MAX_ROWS] = [&[]; MAX_ROWS];
    let mut digit_poly = [0usize; MAX_ROWS];
    let mut count = 0;
    for matrix in ggsw.into_levels() {
        let key_level = matrix.decomposition_level().0;
        let digit_level = match gadget.key_level {
            Some(l) if l == key_level => 1,
            Some(_) => continue,
            None => key_level,
        };
        for (p, row) in matrix.into_rows().enumerate() {
            digit_poly[count] = (digit_level - 1) * polys + p;
            rows[count] = row.data();
            count += 1;
        }
    }
    // Every input's digit transforms, then one pass over the key rows for the whole group.
    for (x, (acc, &a)) in accs.iter().zip(shifts).enumerate() {
        debug_assert_eq!(acc.len(), n * polys);
        rotate_decompose(&mut s.digits, acc, n, a, gadget, s.arch);
        for (r, &d) in digit_poly[..count].iter().enumerate() {
            let at = (x * count + r) * stride;
            fft.forward_as_integer(
                FourierPolynomialMutView {
                    data: &mut s.fourier[at..at + half],
                },
                Polynomial::from_container(&s.digits[d * n..(d + 1) * n]),
                s.buffers.stack(),
            );
        }
    }
    let product = &mut s.product[..inputs * polys * stride];
    let fourier = &s.fourier[..inputs * count * stride];
    multiply_rows(product, &rows[..count], fourier, half, stride, s.arch);
    for (acc, products) in accs
        .iter_mut()
        .zip(product.chunks_exact_mut(polys * stride))
    {
        for (out, product) in acc
            .chunks_exact_mut(n)
            .zip(products.chunks_exact_mut(stride))
        {
            let product = &mut product[..half];
            fft.add_backward_in_place_as_torus(
                Polynomial::from_container(out),
                FourierPolynomialMutView { data: product },
                s.buffers.stack(),
            );
        }
    }
}

/// At most levels × polys key rows are read per CMUX (5 levels of k = 1).
const MAX_ROWS: usize = 10;

/// The pad after each Fourier polynomial of the scratch, in complex numbers (128 bytes). A
/// Fourier polynomial of N = 2048 is 16 KiB, a multiple of an L1 way (4 KiB on x86), so without
/// it every polynomial a multiply-add pass reads (a group of 4 at 3 levels: 24, besides the key's
/// rows) starts in the same cache set, more than its ways hold, and they evict each other:
/// unpadded, omr-v2's level 2 is markedly slower (docs/PARAMETERS.md).
const PAD: usize = 8;

/// For every input x of a group and output polynomial c: product[x][c] = Σ_r rows[r][c] ·
/// fourier[x][r]. One pass per output polynomial: each key vector is loaded once for the whole
/// group, and each sum is kept in registers (tfhe-rs's `update_with_fmadd` reads and writes the
/// product once per row, and reloads the key for every input).
fn multiply_rows(
    product: &mut [c64],
    rows: &[&[c64]],
    fourier: &[c64],
    half: usize,
    stride: usize,
    arch: pulp::Arch,
) {
    fn run<const R: usize>(
        product: &mut [c64],
        rows: &[&[c64]],
        fourier: &[c64],
        half: usize,
        stride: usize,
        arch: pulp::Arch,
    ) {
        fn group<const R: usize, const X: usize>(
            product: &mut [c64],
            rows: &[&[c64]],
            fourier: &[c64],
            half: usize,
            stride: usize,
            arch: pulp::Arch,
        ) {
            arch.dispatch(Mac::<R, X> {
                product,
                rows,
                fourier,
                half,
                stride,
            })
        }
        // The group size as a constant, so that its loop unrolls.
        match fourier.len() / (R * stride) {
            1 => group::<R, 1>(product, rows, fourier, half, stride, arch),
            2 => group::<R, 2>(product, rows, fourier, half, stride, arch),
            3 => group::<R, 3>(product, rows, fourier, half, stride, arch),
            4 => group::<R, 4>(product, rows, fourier, half, stride, arch),
            x => panic!("groups of {x} are not supported"),
        }
    }
    match rows.len() {
        2 => run::<2>(product, rows, fourier, half, stride, arch),
        4 => run::<4>(product, rows, fourier, half, stride, arch),
        6 => run::<6>(product, rows, fourier, half, stride, arch),
        8 => run::<8>(product, rows, fourier, half, stride, arch),
        10 => run::<10>(product, rows, fourier, half, stride, arch),
        r => panic!("{r} key rows per CMUX are not supported"),
    }
}

struct Mac<'a, const R: usize, const X: usize> {
    /// X × polys × stride.
    product: &'a mut [c64],
    rows: &'a [&'a [c64]],
    /// X × R × stride.
    fourier: &'a [c64],
    half: usize,
    stride: usize,
}

impl<const R: usize, const X: usize> pulp::WithSimd for Mac<'_, R, X> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            product,
            rows,
            fourier,
            half,
            stride,
        } = self;
        let polys = product.len() / (X * stride);
        let f: [[&[S::c64s]; R]; X] = std::array::from_fn(|x| {
            std::array::from_fn(|r| {
                let at = (x * R + r) * stride;
                S::as_simd_c64s(&fourier[at..at + half]).0
            })
        });
        for c in 0..polys {
            let k: [&[S::c64s]; R] =
                std::array::from_fn(|r| S::as_simd_c64s(&rows[r][c * half..(c + 1) * half]).0);
            let mut chunks = product.chunks_exact_mut(polys * stride);
            let outs: [&mut [S::c64s]; X] = std::array::from_fn(|_| {
                let px = chunks.next().expect("X products");
                S::as_mut_simd_c64s(&mut px[c * stride..c * stride + half]).0
            });
            for j in 0..k[0].len() {
                let kj: [S::c64s; R] = std::array::from_fn(|r| k[r][j]);
                for x in 0..X {
                    let mut sum = simd.mul_c64s(kj[0], f[x][0][j]);
                    for r in 1..R {
                        sum = simd.mul_add_c64s(kj[r], f[x][r][j], sum);
                    }
                    outs[x][j] = sum;
                }
            }
        }
    }
}
