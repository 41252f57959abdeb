//! The recipient's side: decrypt each batch's ℓ values per message, keep the messages whose
//! values all lie in [−r, r].

use crate::clue::{centre, Clue};
use crate::digest::{Digest, DigestPart};
use crate::keys::SecretKey;
use crate::ring::{centered, centre_bits, lift, Ntt};

impl SecretKey {
    /// The phases of one batch: for output k and message i, (c0·2^(q1−q0) + c1·S) mod 2^q1,
    /// which is 2^(q1 − log t)·(b′_k − (a′·s)_k) plus the decryption error (row k at k·count).
    pub fn phases(&self, part: &DigestPart) -> Vec<u64> {
        let p = self.params();
        let d = p.batch;
        let count = part.own.count;
        let ntt = Ntt::of(d);
        let mask = (1u64 << p.log_q1) - 1;
        let mut out = Vec::with_capacity(p.ell * count);
        for k in 0..p.ell {
            // c1 centred is below 2^32 and S is ternary: |c1·S| < 2^44, exact modulo Q.
            let mut c1: Vec<u64> = part.shared.values[k * d..][..d]
                .iter()
                .map(|&v| lift(centre_bits(v as i64, p.log_q1)))
                .collect();
            ntt.fwd(&mut c1);
            ntt.mul_assign(&mut c1, &self.s_big_ntt);
            ntt.inv(&mut c1);
            let own = &part.own.values[k * count..][..count];
            out.extend(own.iter().zip(&c1).map(|(&c0, &c1s)| {
                ((c0 << (p.log_q1 - p.log_q0)) as i64 + centered(c1s)) as u64 & mask
            }));
        }
        out
    }

    /// The decrypted values of one batch, centred mod t (row k at k·count).
    pub fn values(&self, part: &DigestPart) -> Vec<i64> {
        let p = self.params();
        let shift = p.log_q1 - p.log_t;
        self.phases(part)
            .into_iter()
            .map(|v| centre(((v + (1 << (shift - 1))) >> shift) as i64, p))
            .collect()
    }

    /// Board indices of the messages of `part` that pass the range check `range`.
    pub fn pertinent_in_with_range(&self, part: &DigestPart, range: u32) -> Vec<u64> {
        let count = part.own.count;
        let values = self.values(part);
        let r = i64::from(range);
        (0..count)
            .filter(|&i| (0..self.params().ell).all(|k| values[k * count + i].abs() <= r))
            .map(|i| part.first + i as u64)
            .collect()
    }

    /// Board indices of the digest's pertinent messages, in order.
    pub fn pertinent(&self, digest: &Digest) -> Vec<u64> {
        let range = self.params().range;
        digest
            .parts
            .iter()
            .flat_map(|part| self.pertinent_in_with_range(part, range))
            .collect()
    }

    /// b′_k − (a′·s)_k for one clue, computed in the clear: what detection should give for it
    /// (the clue's noise when the clue is this recipient's).
    pub fn clue_values(&self, clue: &Clue) -> Vec<i64> {
        let p = self.params();
        let a: Vec<i64> = (0..p.n).map(|i| clue.a_coeff(i)).collect();
        let prod = crate::ring::exact_product(&a, &self.s);
        (0..p.ell)
            .map(|k| centre(i64::from(clue.b[k]) - prod[k], p))
            .collect()
    }
}
