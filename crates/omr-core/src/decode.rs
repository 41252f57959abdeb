//! The recipient's side: decrypt a digest, peel the index buckets, check the checksums and solve
//! the payload system over GF(t).

use std::collections::{BTreeSet, VecDeque};

use crate::digest::Digest;
use crate::error::OmrError;
use crate::keys::SecretKey;
use crate::layout::{Layout, MessagePrf, BUCKET_SLOTS};
use crate::prime::{self, Ntt};

/// One recovered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrieved {
    pub index: u64,
    pub payload: Vec<u8>,
}

impl SecretKey {
    /// Raw phases B - A·S of every digest coefficient, modulo 2^digest_modulus_log.
    pub(crate) fn digest_phases(&self, digest: &Digest) -> Vec<u64> {
        let p = self.params;
        let n = p.n2;
        let q = 1i64 << p.digest_modulus_log;
        let ntt = Ntt::new(n);
        let mut s = self.glwe2.as_ref().to_vec();
        ntt.fwd(&mut s);
        let mut out = Vec::with_capacity(digest.glwes.len() / 2);
        let mut prod = vec![0u64; n];
        for ct in digest.glwes.chunks_exact(2 * n) {
            let mut a = ct[..n].to_vec();
            ntt.fwd(&mut a);
            prod.fill(0);
            ntt.mul_acc(&mut prod, &a, &s);
            ntt.inv(&mut prod);
            for (&b, &as_) in ct[n..].iter().zip(&prod) {
                // a·s is an exact small integer: |a·s| < N·2^log < p/2.
                let as_ = prime::centered_f64(as_) as i64;
                out.push((b as i64 - as_).rem_euclid(q) as u64);
            }
        }
        out
    }

    /// Decrypt every plaintext coefficient of a digest (values in [0, t)).
    pub fn decrypt_digest(&self, digest: &Digest) -> Result<Vec<u64>, OmrError> {
        if digest.params != self.params {
            return Err(OmrError::ParamMismatch {
                what: "digest",
                got: digest.params.name,
                expected: self.params.name,
            });
        }
        if digest.kbar != self.kbar {
            return Err(OmrError::malformed(
                "digest",
                "k̄ differs from the secret key's",
            ));
        }
        let log = self.params.digest_modulus_log;
        let t = self.params.plain_modulus;
        let half = 1u128 << (log - 1);
        Ok(self
            .digest_phases(digest)
            .into_iter()
            .map(|ph| ((ph as u128 * t as u128 + half) >> log) as u64 % t)
            .collect())
    }

    /// Decode a digest into the (index, payload) pairs of this recipient's messages in
    /// `[digest.start(), digest.end())`, sorted by index.
    pub fn decode(&self, digest: &Digest) -> Result<Vec<Retrieved>, OmrError> {
        let plain = self.decrypt_digest(digest)?;
        let layout = Layout::new(self.params, self.kbar);
        let indices = peel(
            &layout,
            &self.prf_seed,
            digest.start,
            digest.end,
            &plain,
            self.kbar,
        )?;
        solve_payloads(self, &layout, &indices, &plain)
    }
}

fn sub_t(a: u64, b: u64, t: u64) -> u64 {
    (a + t - b) % t
}

/// Recover the pertinent indices from the bucket segments by peeling pure buckets.
fn peel(
    layout: &Layout,
    seed: &[u8; 32],
    start: u64,
    end: u64,
    plain: &[u64],
    kbar: usize,
) -> Result<Vec<u64>, OmrError> {
    let t = layout.t;
    let modulus = t * t;
    let mut cells: Vec<u64> = plain[..layout.segments * layout.buckets * BUCKET_SLOTS].to_vec();
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    for seg in 0..layout.segments {
        for b in 0..layout.buckets {
            if cells[layout.slot(seg, b)] == 1 {
                queue.push_back((seg, b));
            }
        }
    }
    let mut found = BTreeSet::new();
    while let Some((seg, b)) = queue.pop_front() {
        let base = layout.slot(seg, b);
        if cells[base] != 1 {
            continue;
        }
        let offset = cells[base + 1] + t * cells[base + 2];
        // The unique index in [start, end) congruent to offset mod t² (end - start ≤ M ≤ t²).
        // A digest near the top of u64 (a hostile server's) may put it past u64::MAX: not in
        // the range either.
        let Some(first) = start.checked_add((offset + modulus - start % modulus) % modulus) else {
            continue;
        };
        if first >= end || found.contains(&first) {
            continue;
        }
        let prf = MessagePrf::new(seed, layout, first);
        if prf.check != cells[base + 3] || prf.buckets[seg] != b {
            continue;
        }
        found.insert(first);
        if found.len() > kbar + layout.combos {
            break;
        }
        let values = [1, first % modulus % t, first % modulus / t, prf.check];
        for (s2, &b2) in prf.buckets.iter().enumerate() {
            let base2 = layout.slot(s2, b2);
            for (k, v) in values.iter().enumerate() {
                cells[base2 + k] = sub_t(cells[base2 + k], *v, t);
            }
            if cells[base2] == 1 {
                queue.push_back((s2, b2));
            }
        }
    }
    let leftover = cells.iter().any(|&c| c != 0);
    if leftover || found.len() > kbar {
        // Count at least what the first segment's counters say.
        let counted: u64 = (0..layout.buckets).map(|b| plain[layout.slot(0, b)]).sum();
        return Err(OmrError::Overflow {
            kbar,
            found: found.len().max(counted as usize),
        });
    }
    // Checksums: Σ_{i ∈ found} w'_{j,i} must equal each checksum slot.
    let mut sums = vec![0u64; layout.checksum];
    for &i in &found {
        let prf = MessagePrf::new(seed, layout, i);
        for (s, w) in sums.iter_mut().zip(&prf.checksum) {
            *s = (*s + w) % t;
        }
    }
    for (j, s) in sums.iter().enumerate() {
        if plain[layout.checksum_slot(j)] != *s {
            return Err(OmrError::Overflow {
                kbar,
                found: found.len() + 1,
            });
        }
    }
    Ok(found.into_iter().collect())
}

fn pow_mod(mut b: u64, mut e: u64, t: u64) -> u64 {
    let mut r = 1;
    b %= t;
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % t;
        }
        b = b * b % t;
        e >>= 1;
    }
    r
}

/// Solve W·X = Y over GF(t) for the payloads of `indices`.
fn solve_payloads(
    sk: &SecretKey,
    layout: &Layout,
    indices: &[u64],
    plain: &[u64],
) -> Result<Vec<Retrieved>, OmrError> {
    let t = layout.t;
    let r = indices.len();
    if r == 0 {
        return Ok(Vec::new());
    }
    let k = layout.combos;
    let pc = layout.payload_coeffs;
    let weights: Vec<Vec<u64>> = indices
        .iter()
        .map(|&i| MessagePrf::new(&sk.prf_seed, layout, i).weights)
        .collect();
    // Augmented rows [w_{j,0..r} | y_j].
    let width = r + pc;
    let mut m: Vec<u64> = Vec::with_capacity(k * width);
    for j in 0..k {
        for w in &weights {
            m.push(w[j]);
        }
        let base = layout.payload_slot(j, 0);
        m.extend_from_slice(&plain[base..base + pc]);
    }
    for (row, col) in (0..r).enumerate() {
        let Some(piv) = (row..k).find(|&i| m[i * width + col] != 0) else {
            return Err(OmrError::malformed(
                "digest",
                "payload system is singular (probability ≈ t^-(margin+1)); split the range",
            ));
        };
        if piv != row {
            for c in 0..width {
                m.swap(piv * width + c, row * width + c);
            }
        }
        let inv = pow_mod(m[row * width + col], t - 2, t);
        for c in col..width {
            m[row * width + c] = m[row * width + c] * inv % t;
        }
        for i in 0..k {
            if i != row && m[i * width + col] != 0 {
                let f = m[i * width + col];
                for c in col..width {
                    let v = m[row * width + c] * f % t;
                    m[i * width + c] = (m[i * width + c] + t - v) % t;
                }
            }
        }
    }
    // Extra equations must be consistent, or a message is missing.
    for i in r..k {
        if m[i * width + r..(i + 1) * width].iter().any(|&v| v != 0) {
            return Err(OmrError::Overflow {
                kbar: sk.kbar,
                found: r + 1,
            });
        }
    }
    let mut out = Vec::with_capacity(r);
    for (a, &index) in indices.iter().enumerate() {
        let x = &m[a * width + r..(a + 1) * width];
        if x.iter().any(|&v| v > 255) {
            return Err(OmrError::malformed(
                "digest",
                "decoded payload symbol out of byte range",
            ));
        }
        let len = (x[0] | (x[1] << 8)) as usize;
        if len > sk.params.payload_bytes {
            return Err(OmrError::malformed(
                "digest",
                "decoded payload length out of range",
            ));
        }
        out.push(Retrieved {
            index,
            payload: x[2..2 + len].iter().map(|&v| v as u8).collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::OMR_V1;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// The index part of Σ p_i(X) for a set of indices, as decryption would return it.
    fn index_plain(layout: &Layout, seed: &[u8; 32], indices: &[u64]) -> Vec<u64> {
        let t = layout.t;
        let mut plain = vec![0u64; layout.index_polys * layout.n];
        for &i in indices {
            let prf = MessagePrf::new(seed, layout, i);
            let offset = i % (t * t);
            let values = [1, offset % t, offset / t, prf.check];
            for (seg, &b) in prf.buckets.iter().enumerate() {
                let base = layout.slot(seg, b);
                for (k, v) in values.iter().enumerate() {
                    plain[base + k] = (plain[base + k] + v) % t;
                }
            }
            for (j, w) in prf.checksum.iter().enumerate() {
                let s = layout.checksum_slot(j);
                plain[s] = (plain[s] + w) % t;
            }
        }
        plain
    }

    fn random_set(rng: &mut ChaCha20Rng, start: u64, len: u64, count: usize) -> Vec<u64> {
        let mut set = BTreeSet::new();
        while set.len() < count {
            set.insert(start + rng.gen_range(0..len));
        }
        set.into_iter().collect()
    }

    #[test]
    fn peeling_recovers_full_kbar_sets_and_flags_every_overflow() {
        let kbar = 50;
        let layout = Layout::new(&OMR_V1, kbar);
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let seed: [u8; 32] = rng.gen();
        let (start, len) = (1_000_000u64, OMR_V1.max_range);
        for trial in 0..3000 {
            let count = if trial % 2 == 0 {
                kbar
            } else {
                rng.gen_range(0..=kbar)
            };
            let set = random_set(&mut rng, start, len, count);
            let plain = index_plain(&layout, &seed, &set);
            assert_eq!(
                peel(&layout, &seed, start, start + len, &plain, kbar).unwrap(),
                set
            );
        }
        // More than k̄: always an overflow error, never a wrong set.
        for _ in 0..300 {
            let count = rng.gen_range(kbar + 1..=4 * kbar);
            let set = random_set(&mut rng, start, len, count);
            let plain = index_plain(&layout, &seed, &set);
            assert!(matches!(
                peel(&layout, &seed, start, start + len, &plain, kbar),
                Err(OmrError::Overflow { .. })
            ));
        }
    }

    #[test]
    fn a_bucket_pointing_past_u64_max_is_junk_not_an_overflow_panic() {
        // A hostile digest at the top of the index space whose one non-empty bucket names the
        // index start + t² - 1 > u64::MAX (an unchecked addition panics in a debug build).
        let layout = Layout::new(&OMR_V1, 4);
        let (t, modulus) = (layout.t, layout.t * layout.t);
        let (start, end) = (u64::MAX - 3, u64::MAX);
        let offset = (start % modulus + modulus - 1) % modulus;
        let mut plain = vec![0u64; layout.index_polys * layout.n];
        let base = layout.slot(0, 0);
        plain[base..base + 3].copy_from_slice(&[1, offset % t, offset / t]);
        assert!(matches!(
            peel(&layout, &[7; 32], start, end, &plain, 4),
            Err(OmrError::Overflow { .. })
        ));
    }
}
