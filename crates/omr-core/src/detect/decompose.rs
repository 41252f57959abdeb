//! The first pass of a CMUX: the rotation X^a·acc − acc and its signed gadget decomposition
//! together, compiled for the machine's vector width at run time (pulp's dispatch). Digits are
//! balanced (each in [−B/2, B/2), the rounding carried up), as tfhe-rs's, and stored as 32-bit
//! two's complement: every base is at most 2^32, and tfhe-rs converts 32-bit integers to the
//! Fourier domain with one instruction per 8 (AVX-512) or 4 (AVX2).

/// How a key's GGSWs are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gadget {
    /// log2 of the decomposition base the digits use.
    pub(crate) base_log: usize,
    /// Digit levels (1 ..= 5).
    pub(crate) levels: usize,
    /// `Some(l)`: only the key's level l is read, as a one-level key of base 2^`base_log`
    /// (its rows sit at q/2^base_log); `None`: every level of the key, as it was made.
    pub(crate) key_level: Option<usize>,
}

/// The digits of X^a·acc − acc, level 1 (most significant) first: `digits` holds levels × polys
/// × N values.
pub(super) fn rotate_decompose(
    digits: &mut [u32],
    acc: &[u64],
    n: usize,
    a: usize,
    g: Gadget,
    arch: pulp::Arch,
) {
    match g.levels {
        1 => rotate_decompose_l::<1>(digits, acc, n, a, g.base_log, arch),
        2 => rotate_decompose_l::<2>(digits, acc, n, a, g.base_log, arch),
        3 => rotate_decompose_l::<3>(digits, acc, n, a, g.base_log, arch),
        4 => rotate_decompose_l::<4>(digits, acc, n, a, g.base_log, arch),
        5 => rotate_decompose_l::<5>(digits, acc, n, a, g.base_log, arch),
        l => panic!("{l} decomposition levels are not supported (1 to 5)"),
    }
}

fn rotate_decompose_l<const L: usize>(
    digits: &mut [u32],
    acc: &[u64],
    n: usize,
    a: usize,
    base_log: usize,
    arch: pulp::Arch,
) {
    let total = base_log * L;
    assert!((1..64).contains(&total), "{L} levels of 2^{base_log}");
    assert!(base_log <= 32, "digits of 2^{base_log} do not fit 32 bits");
    arch.dispatch(RotateDecompose::<L> {
        digits,
        acc,
        n,
        a,
        base_log,
    });
}

/// The pass of [`rotate_decompose`] as a `pulp::WithSimd`, so that it is compiled inside the
/// dispatched target-feature function (a closure passed to `dispatch` is not inlined there, and
/// ran as baseline x86-64 code).
struct RotateDecompose<'a, const L: usize> {
    digits: &'a mut [u32],
    acc: &'a [u64],
    n: usize,
    a: usize,
    base_log: usize,
}

impl<const L: usize> pulp::WithSimd for RotateDecompose<'_, L> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self {
            digits,
            acc,
            n,
            a,
            base_log,
        } = self;
        let shift = 64 - (base_log * L) as u32;
        let (a, negate) = if a >= n { (a - n, true) } else { (a, false) };
        // Negation as (x ^ m) − m with m all ones; identity with m = 0.
        let flip = |neg: bool| if neg { u64::MAX } else { 0 };
        let polys = acc.len() / n;
        for (p, c) in acc.chunks_exact(n).enumerate() {
            let mut outs: [&mut [u32]; L] = split_levels(digits, polys, n, p);
            // Coefficients a..N of X^a·c come from c[0..N−a] with the sign of X^a;
            // 0..a wrap around once more.
            decompose_range::<L>(
                &mut outs,
                a,
                &c[..n - a],
                &c[a..],
                flip(negate),
                base_log,
                shift,
            );
            decompose_range::<L>(
                &mut outs,
                0,
                &c[n - a..],
                &c[..a],
                flip(!negate),
                base_log,
                shift,
            );
        }
    }
}

/// The L output slices (one per level) of polynomial p.
#[inline(always)]
fn split_levels<const L: usize>(
    digits: &mut [u32],
    polys: usize,
    n: usize,
    p: usize,
) -> [&mut [u32]; L] {
    let mut rest = digits;
    std::array::from_fn(|_| {
        let (level, tail) = std::mem::take(&mut rest).split_at_mut(polys * n);
        rest = tail;
        &mut level[p * n..(p + 1) * n]
    })
}

/// outs[l][at + j] = digit l of (±src[j] − c[j]), for j in 0..src.len().
#[inline(always)]
fn decompose_range<const L: usize>(
    outs: &mut [&mut [u32]; L],
    at: usize,
    src: &[u64],
    c: &[u64],
    m: u64,
    base_log: usize,
    shift: u32,
) {
    let len = src.len();
    let mask = (1u64 << base_log) - 1;
    let round = 1u64 << (shift - 1);
    let outs: [&mut [u32]; L] = outs.each_mut().map(|o| &mut o[at..at + len]);
    for j in 0..len {
        let x = (src[j] ^ m).wrapping_sub(m).wrapping_sub(c[j]);
        // The top `L·base_log` bits, rounded; then digits from the least significant up.
        let mut y = x.wrapping_add(round) >> shift;
        for l in (0..L).rev() {
            let d = y & mask;
            let carry = d >> (base_log - 1);
            // In [−B/2, B/2) with B ≤ 2^32: the low 32 bits are its two's complement.
            outs[l][j] = d.wrapping_sub(carry << base_log) as u32;
            y = (y >> base_log) + carry;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{rotate_decompose, Gadget};

    /// X^a·c − c in Z[X]/(X^N + 1), coefficient by coefficient.
    fn rotated_minus(c: &[u64], a: usize) -> Vec<u64> {
        let n = c.len();
        (0..n)
            .map(|j| {
                // Coefficient j of X^a·c is ±c[(j − a) mod N], negated once per wrap.
                let k = (j + 2 * n - a) % (2 * n);
                let v = if k < n { c[k] } else { c[k - n].wrapping_neg() };
                v.wrapping_sub(c[j])
            })
            .collect()
    }

    #[test]
    fn digits_are_balanced_and_recombine_to_the_rotation_rounded() {
        let n = 64;
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let acc: Vec<u64> = (0..2 * n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            })
            .collect();
        let arch = pulp::Arch::new();
        for (base_log, levels) in [(24, 1), (12, 3), (9, 4), (2, 5), (23, 1), (8, 2), (32, 1)] {
            let g = Gadget {
                base_log,
                levels,
                key_level: None,
            };
            let shift = 64 - base_log * levels;
            let mut digits = vec![0u32; levels * 2 * n];
            for a in 0..2 * n {
                rotate_decompose(&mut digits, &acc, n, a, g, arch);
                for p in 0..2 {
                    let want = rotated_minus(&acc[p * n..(p + 1) * n], a);
                    for (j, &x) in want.iter().enumerate() {
                        let mut sum = 0u64;
                        for l in 0..levels {
                            let d = digits[(l * 2 + p) * n + j] as i32 as i64;
                            let half = 1i64 << (base_log - 1);
                            assert!((-half..half).contains(&d), "digit {d} at 2^{base_log}");
                            let weight = 1u64 << (64 - base_log * (l + 1));
                            sum = sum.wrapping_add((d as u64).wrapping_mul(weight));
                        }
                        let err = x.wrapping_sub(sum) as i64;
                        assert!(
                            err.unsigned_abs() <= 1 << (shift - 1),
                            "2^{base_log} × {levels}, a = {a}: error {err}"
                        );
                    }
                }
            }
        }
    }
}
