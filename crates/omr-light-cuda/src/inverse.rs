//! The inverse NTT on the card: the sums come back in the NTT domain of tfhe-ntt (omr-light's
//! transform), in its order; `light_inverse` (pass.cu) turns each row into coefficients there,
//! and switches the batch's coefficients to the digest's 32-bit values, so only those travel
//! back. The tables below, and the check that they match tfhe-ntt, are made
//! on the host when a device is opened; where the check fails the host transforms instead.

use rand::RngCore;

/// What `light_inverse` needs: ψ^{-br(k)} for k < D (ψ the primitive 2D-th root of unity
/// tfhe-ntt's forward transform evaluates at, br the bit reversal of log2 D bits) and D^{-1}.
#[derive(Debug, Clone)]
pub(crate) struct InverseTables {
    pub twiddles: Vec<u64>,
    pub d_inv: u64,
}

fn mul(a: u64, b: u64, q: u64) -> u64 {
    (a as u128 * b as u128 % q as u128) as u64
}

fn pow(mut b: u64, mut e: u64, q: u64) -> u64 {
    let mut r = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = mul(r, b, q);
        }
        b = mul(b, b, q);
        e >>= 1;
    }
    r
}

fn bit_rev(bits: u32, k: usize) -> usize {
    k.reverse_bits() >> (usize::BITS - bits)
}

impl InverseTables {
    /// The tables for size `d` modulo `q`, if tfhe-ntt's forward transform puts a(ψ^{2·br(i)+1})
    /// at position i (the order `light_inverse` inverts) and the host mirror of the kernel
    /// inverts it exactly on random input; `None` otherwise.
    pub(crate) fn new(d: usize, q: u64) -> Option<InverseTables> {
        let plan = tfhe_ntt::prime64::Plan::try_new(d, q)?;
        let bits = d.trailing_zeros();
        let mut x = vec![0u64; d];
        x[1] = 1;
        plan.fwd(&mut x);
        let psi = x[0];
        let order_holds = (0..d).all(|i| x[i] == pow(psi, 2 * bit_rev(bits, i) as u64 + 1, q));
        if !order_holds {
            return None;
        }
        let psi_inv = pow(psi, 2 * d as u64 - 1, q);
        let tables = InverseTables {
            twiddles: (0..d)
                .map(|k| pow(psi_inv, bit_rev(bits, k) as u64, q))
                .collect(),
            d_inv: pow(d as u64, q - 2, q),
        };
        let mut rng = rand::thread_rng();
        let want: Vec<u64> = (0..d).map(|_| rng.next_u64() % q).collect();
        let mut got = want.clone();
        plan.fwd(&mut got);
        tables.inverse(&mut got, q);
        (got == want).then_some(tables)
    }

    /// The host mirror of `light_inverse`: Gentleman–Sande butterflies from the bit-reversed
    /// NTT domain to coefficients, then × D^{-1}.
    pub(crate) fn inverse(&self, a: &mut [u64], q: u64) {
        let d = a.len();
        let mut t = 1;
        let mut m = d;
        while m > 1 {
            let h = m / 2;
            for b in 0..d / 2 {
                let (i, j) = (b / t, b % t);
                let j1 = 2 * i * t + j;
                let (u, v) = (a[j1], a[j1 + t]);
                a[j1] = (u + v) % q;
                a[j1 + t] = mul((u + q - v) % q, self.twiddles[h + i], q);
            }
            t *= 2;
            m = h;
        }
        for x in a.iter_mut() {
            *x = mul(*x, self.d_inv, q);
        }
    }
}
