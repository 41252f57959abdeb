//! Arithmetic in Z_p for the prime p = 2^64 - 2^32 + 1: addition, negation, products, inverses,
//! signed and native-modulus conversions.

use crate::params::PRIME_P as P;

#[inline]
pub(crate) fn add(a: u64, b: u64) -> u64 {
    let (s, o) = a.overflowing_add(b);
    let (s2, o2) = s.overflowing_sub(P);
    if o || !o2 {
        s2
    } else {
        s
    }
}

#[inline]
pub(crate) fn sub(a: u64, b: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a.wrapping_sub(b).wrapping_add(P)
    }
}

#[inline]
pub(crate) fn neg(a: u64) -> u64 {
    if a == 0 {
        0
    } else {
        P - a
    }
}

#[inline]
pub(crate) fn mul(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % P as u128) as u64
}

/// A signed integer as an element of Z_p.
#[inline]
pub(crate) fn from_i64(x: i64) -> u64 {
    if x >= 0 {
        x as u64 % P
    } else {
        neg((x.unsigned_abs()) % P)
    }
}

/// The centered representative of x ∈ Z_p, as a float (for noise measurement).
pub(crate) fn centered_f64(x: u64) -> f64 {
    if x > P / 2 {
        -((P - x) as f64)
    } else {
        x as f64
    }
}

pub(crate) fn inverse(a: u64) -> u64 {
    // Fermat: a^(p-2).
    let mut result = 1u64;
    let mut base = a % P;
    let mut e = P - 2;
    while e > 0 {
        if e & 1 == 1 {
            result = mul(result, base);
        }
        base = mul(base, base);
        e >>= 1;
    }
    result
}

/// Round a native-modulus (2^64) value to Z_p: round(x·p / 2^64).
#[inline]
pub(crate) fn from_native(x: u64) -> u64 {
    let r = ((x as u128 * P as u128 + (1u128 << 63)) >> 64) as u64;
    if r >= P {
        r - P
    } else {
        r
    }
}
