//! Arithmetic modulo Q = 2^62 − 2^16 + 1 on `tfhe-ntt`: negacyclic NTTs of the two sizes the
//! scheme uses, the lazy 128-bit reduction of the detection kernel, centred lifts and the
//! modulus switch of the digest.
//!
//! omr-core's `prime/` works modulo 2^64 − 2^32 + 1, whose products do not leave room to add
//! several of them before reducing; a 62-bit Q leaves 4 bits, so the kernel adds eight 124-bit
//! products in a `u128` and reduces once.

use std::sync::OnceLock;

use tfhe_ntt::prime64::Plan;

use crate::params::PRIME_Q as Q;

/// A negacyclic NTT modulo Q of one polynomial size.
pub(crate) struct Ntt {
    plan: Plan,
}

impl Ntt {
    /// The process-wide plan of size `n` (1024 for the clue ring, 4096 for the key's ring).
    pub(crate) fn of(n: usize) -> &'static Ntt {
        static SMALL: OnceLock<Ntt> = OnceLock::new();
        static LARGE: OnceLock<Ntt> = OnceLock::new();
        let cell = match n {
            1024 => &SMALL,
            4096 => &LARGE,
            _ => panic!("omr-light uses NTTs of 1024 and 4096 points, not {n}"),
        };
        cell.get_or_init(|| Ntt {
            plan: Plan::try_new(n, Q).expect("2^16 divides Q - 1, so every size up to 2^15 works"),
        })
    }

    pub(crate) fn fwd(&self, buf: &mut [u64]) {
        self.plan.fwd(buf);
    }

    /// The inverse transform including the 1/N normalisation.
    pub(crate) fn inv(&self, buf: &mut [u64]) {
        self.plan.inv(buf);
        self.plan.normalize(buf);
    }

    /// `acc ← acc + lhs ⊙ rhs` (NTT domain, vectorised).
    pub(crate) fn mul_accumulate(&self, acc: &mut [u64], lhs: &[u64], rhs: &[u64]) {
        self.plan.mul_accumulate(acc, lhs, rhs);
    }

    /// `lhs ← lhs ⊙ rhs / N` (NTT domain, vectorised): with `rhs` already multiplied by N (as
    /// `rlwe::monomial_ntt` keeps it), one pass for the product.
    pub(crate) fn mul_assign_normalize(&self, lhs: &mut [u64], rhs: &[u64]) {
        self.plan.mul_assign_normalize(lhs, rhs);
    }

    /// `lhs ← lhs ⊙ rhs` (NTT domain).
    pub(crate) fn mul_assign(&self, lhs: &mut [u64], rhs: &[u64]) {
        for (l, &r) in lhs.iter_mut().zip(rhs) {
            *l = mul(*l, r);
        }
    }
}

/// `a, b ← a + b, a − b` element-wise, after `b ← b + a∘π` when a permutation π is given (b[i]
/// gains a[π(i)]): the butterflies of query expansion, with τ_k(a) as a gather in the NTT
/// domain. Compiled for the CPU's vector instructions at run time (`pulp`'s dispatch, as
/// tfhe-ntt's kernels are): the crate's baseline x86-64 target leaves these loops scalar.
pub(crate) fn butterflies(a: &mut [u64], b: &mut [u64], permutation: Option<&[u32]>) {
    pulp::Arch::new().dispatch(Butterflies { a, b, permutation });
}

/// [`butterflies`] as a `pulp::WithSimd`, so that its loops are compiled inside the dispatched
/// target-feature function (a closure is not inlined there).
struct Butterflies<'a> {
    a: &'a mut [u64],
    b: &'a mut [u64],
    permutation: Option<&'a [u32]>,
}

impl pulp::WithSimd for Butterflies<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { a, b, permutation } = self;
        if let Some(permutation) = permutation {
            for (y, &i) in b.iter_mut().zip(permutation) {
                *y = add(*y, a[i as usize]);
            }
        }
        for (x, y) in a.iter_mut().zip(b.iter_mut()) {
            (*x, *y) = (add(*x, *y), sub(*x, *y));
        }
    }
}

/// x mod Q for any x < 2^128, using 2^62 ≡ 2^16 − 1 (mod Q).
#[inline(always)]
pub(crate) fn reduce128(x: u128) -> u64 {
    const C: u128 = (1 << 16) - 1;
    const MASK: u128 = (1 << 62) - 1;
    // x = hi·2^62 + lo ≡ hi·C + lo: below 2^82 + 2^62, then below 2^62 + 2^37.
    let y = (x >> 62) * C + (x & MASK);
    let z = (y >> 62) * C + (y & MASK);
    let mut r = z as u64;
    while r >= Q {
        r -= Q;
    }
    r
}

/// (a + b) mod Q for a, b < Q.
#[inline(always)]
pub(crate) fn add(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= Q {
        s - Q
    } else {
        s
    }
}

/// (a − b) mod Q for a, b < Q.
#[inline(always)]
pub(crate) fn sub(a: u64, b: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a + Q - b
    }
}

/// (a · b) mod Q.
#[inline(always)]
pub(crate) fn mul(a: u64, b: u64) -> u64 {
    reduce128(a as u128 * b as u128)
}

/// b^e mod Q.
pub(crate) fn pow(mut b: u64, mut e: u64) -> u64 {
    let mut r = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = mul(r, b);
        }
        b = mul(b, b);
        e >>= 1;
    }
    r
}

/// The representative of v mod 2^bits in [−2^(bits−1), 2^(bits−1)).
#[inline(always)]
pub(crate) fn centre_bits(v: i64, bits: u32) -> i64 {
    let m = 1i64 << bits;
    let v = v.rem_euclid(m);
    if v >= m / 2 {
        v - m
    } else {
        v
    }
}

/// A small signed integer as a residue mod Q.
#[inline(always)]
pub(crate) fn lift(v: i64) -> u64 {
    v.rem_euclid(Q as i64) as u64
}

/// The representative of x mod Q in (−Q/2, Q/2].
#[inline(always)]
pub(crate) fn centered(x: u64) -> i64 {
    if x > Q / 2 {
        x as i64 - Q as i64
    } else {
        x as i64
    }
}

/// round(x · 2^log_to / Q) mod 2^log_to: the modulus switch of one coefficient. The product in
/// f64 is off by at most 2^-25 of a unit, which only moves rounding ties; the rounding noise the
/// prediction counts is unchanged.
#[inline(always)]
pub(crate) fn switch(x: u64, log_to: u32) -> u64 {
    ((x as f64 * switch_scale(log_to)).round() as u64) & ((1u64 << log_to) - 1)
}

/// The factor [`switch`] multiplies by: 2^log_to / Q, as an f64.
#[inline(always)]
pub(crate) fn switch_scale(log_to: u32) -> f64 {
    f64::from(log_to).exp2() / Q as f64
}

/// The negacyclic product of two polynomials whose centred product fits in (−Q/2, Q/2):
/// `a` with coefficients of any size below Q/2 in magnitude, `b` small. Returns the exact
/// integer coefficients.
pub(crate) fn exact_product(a: &[i64], b: &[i64]) -> Vec<i64> {
    let ntt = Ntt::of(a.len());
    let mut x: Vec<u64> = a.iter().map(|&v| lift(v)).collect();
    let mut y: Vec<u64> = b.iter().map(|&v| lift(v)).collect();
    ntt.fwd(&mut x);
    ntt.fwd(&mut y);
    ntt.mul_assign(&mut x, &y);
    ntt.inv(&mut x);
    x.into_iter().map(centered).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_lazy_reduction_agrees_with_the_remainder() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for _ in 0..100_000 {
            let x: u128 = rng.gen();
            assert_eq!(reduce128(x) as u128, x % Q as u128);
        }
        for x in [0u128, Q as u128, (Q as u128) * 2 - 1, u128::MAX] {
            assert_eq!(reduce128(x) as u128, x % Q as u128);
        }
        // Eight products of residues and a residue: what the kernel adds before reducing.
        let worst = 8 * (Q as u128 - 1) * (Q as u128 - 1) + Q as u128 - 1;
        assert_eq!(reduce128(worst) as u128, worst % Q as u128);
    }

    #[test]
    fn the_exact_product_is_the_schoolbook_one() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let n = 1024;
        let a: Vec<i64> = (0..n)
            .map(|_| rng.gen_range(-(1 << 23)..(1 << 23)))
            .collect();
        let b: Vec<i64> = (0..n).map(|_| rng.gen_range(-1..=1)).collect();
        let mut want = vec![0i64; n];
        for i in 0..n {
            for j in 0..n {
                let v = a[i] * b[j];
                if i + j < n {
                    want[i + j] += v;
                } else {
                    want[i + j - n] -= v;
                }
            }
        }
        assert_eq!(exact_product(&a, &b), want);
    }

    #[test]
    fn the_switch_rounds_to_the_nearest() {
        for x in [0, 1, Q / 2, Q - 1, 1 << 40, 12_345_678_901_234] {
            let exact = (x as f64 / Q as f64 * 2f64.powi(27)).round() as u64 % (1 << 27);
            assert_eq!(switch(x, 27), exact);
        }
    }
}
