//! The negacyclic NTT modulo p on `tfhe-ntt`: products in Z_p[X]/(X^N+1).

use tfhe_ntt::prime64::Plan;

use crate::params::PRIME_P as P;

/// A negacyclic NTT of one polynomial size modulo p.
#[derive(Debug)]
pub(crate) struct Ntt {
    plan: Plan,
    pub(crate) n: usize,
}

impl Ntt {
    pub(crate) fn new(n: usize) -> Self {
        let plan = Plan::try_new(n, P).expect("p = 2^64-2^32+1 supports every power-of-two size");
        Ntt { plan, n }
    }

    pub(crate) fn fwd(&self, buf: &mut [u64]) {
        self.plan.fwd(buf);
    }

    /// Inverse transform including the 1/N normalisation.
    pub(crate) fn inv(&self, buf: &mut [u64]) {
        self.plan.inv(buf);
        self.plan.normalize(buf);
    }

    pub(crate) fn mul_acc(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        self.plan.mul_accumulate(acc, a, b);
    }

    /// Negacyclic product of two coefficient-domain polynomials.
    #[cfg(test)]
    pub(crate) fn poly_mul(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut fa = a.to_vec();
        let mut fb = b.to_vec();
        self.fwd(&mut fa);
        self.fwd(&mut fb);
        let mut acc = vec![0u64; self.n];
        self.mul_acc(&mut acc, &fa, &fb);
        self.inv(&mut acc);
        acc
    }
}
