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

    /// Whether `clue` is this recipient's, decided in the clear from the clue itself (the same
    /// range check the digest's values get): what an online recipient reading the board's new
    /// messages does instead of asking for a digest. n·ℓ products, no transform.
    pub fn matches(&self, clue: &Clue) -> bool {
        let r = i64::from(self.params().range);
        self.clue_values_direct(clue).iter().all(|v| v.abs() <= r)
    }

    /// [`SecretKey::clue_values`] by the ℓ negacyclic sums alone:
    /// (a′·s)_k = Σ_{j≤k} a′_{k−j}·s_j − Σ_{j>k} a′_{n+k−j}·s_j.
    pub(crate) fn clue_values_direct(&self, clue: &Clue) -> Vec<i64> {
        let p = self.params();
        let n = p.n;
        (0..p.ell)
            .map(|k| {
                let mut sum = 0i64;
                for (j, &s) in self.s.iter().enumerate() {
                    if s == 0 {
                        continue;
                    }
                    let term = if j <= k {
                        clue.a_coeff(k - j)
                    } else {
                        -clue.a_coeff(n + k - j)
                    };
                    sum += term * s;
                }
                centre(i64::from(clue.b[k]) - sum, p)
            })
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

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use crate::{SecretKey, OMR_LIGHT_V1};

    #[test]
    fn a_clue_checked_in_the_clear_agrees_with_the_exact_product() {
        let me = SecretKey::from_seed(&OMR_LIGHT_V1, [7; 32]);
        let other = SecretKey::from_seed(&OMR_LIGHT_V1, [8; 32]);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let (mine, theirs) = (me.address(), other.address());
        for _ in 0..20 {
            let own = mine.clue_with(&mut rng);
            let foreign = theirs.clue_with(&mut rng);
            for clue in [&own, &foreign] {
                assert_eq!(me.clue_values_direct(clue), me.clue_values(clue));
            }
            assert!(me.matches(&own), "a recipient's own clue passes");
            // A stranger's clue passes with probability 2^-30.6: never in 20 tries.
            assert!(!me.matches(&foreign), "another recipient's clue fails");
            assert!(other.matches(&foreign));
        }
    }
}
