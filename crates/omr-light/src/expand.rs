//! Query expansion (SealPIR, Angel et al., S&P 2018, with the power-of-two fix of Chen et al.):
//! one ciphertext of Σ_{i<2^L} m_i·X^i becomes 2^L ciphertexts of the constants m_i, with L
//! automorphism keys and 2^L − 1 key switches. The client scales its message by 2^−L mod Q
//! (Q is odd), so the outputs carry m_i itself and the factor 2^L lands on the noise only.

use rand::RngCore;

use crate::ring::{butterflies, Ntt};
use crate::rlwe::{monomial_ntt, times_monomial, Ciphertext, Secret, D};
use crate::switch::{Gadget, GaloisKey, SwitchKey, COARSE, FINE};

/// The most levels: 2^12 = D outputs from one ciphertext.
pub const MAX_LEVELS: u32 = 12;

/// The last levels of an expansion (of any size) whose keys switch with the coarse gadget; the
/// earlier ones use the fine one. Level j's noise is doubled by every later level, so the
/// first levels' noise dominates the outputs while the last levels do most of the switches
/// (level j does 2^j): fine early and coarse late costs little more than all coarse, for 1/580
/// of its noise variance at 12 levels (docs/light/STUDY.md §7.1).
pub const COARSE_LEVELS: u32 = 3;

/// The gadget of level j's key in an expansion of `levels` levels.
fn level_gadget(j: u32, levels: u32) -> Gadget {
    if j + COARSE_LEVELS >= levels {
        COARSE
    } else {
        FINE
    }
}

/// The automorphism keys of expansion: level j uses τ_k with k = D/2^j + 1, with the fine
/// gadget for j < 9 and the coarse one for the last [`COARSE_LEVELS`] levels of every
/// expansion of at least `min_levels` levels.
#[derive(Debug)]
pub struct ExpansionKeys {
    fine: Vec<Option<GaloisKey>>,
    coarse: Vec<Option<GaloisKey>>,
}

impl ExpansionKeys {
    /// The keys for expansions of `min_levels` to [`MAX_LEVELS`] levels.
    pub fn generate(secret: &Secret, min_levels: u32, rng: &mut impl RngCore) -> ExpansionKeys {
        let k = |j: u32| D / (1 << j) + 1;
        let fine = (0..MAX_LEVELS)
            .map(|j| (j + COARSE_LEVELS < MAX_LEVELS).then(|| secret.galois_key(k(j), FINE, rng)))
            .collect();
        let coarse = (0..MAX_LEVELS)
            .map(|j| {
                (j + COARSE_LEVELS >= min_levels).then(|| secret.galois_key(k(j), COARSE, rng))
            })
            .collect();
        ExpansionKeys { fine, coarse }
    }

    /// The key of level j in an expansion of `levels` levels (τ_k, k = D/2^j + 1).
    pub fn key(&self, j: u32, levels: u32) -> &GaloisKey {
        let keys = if level_gadget(j, levels) == COARSE {
            &self.coarse
        } else {
            &self.fine
        };
        keys[j as usize]
            .as_ref()
            .expect("a key for every level of the expansions it was made for")
    }

    /// Key switching keys it holds, fine ones by level then coarse ones by level.
    pub fn keys(&self) -> impl Iterator<Item = &GaloisKey> {
        self.fine.iter().chain(&self.coarse).flatten()
    }

    /// The keys for expansions of at least `min_levels` levels as [`ExpansionKeys::keys`]
    /// wrote them.
    pub fn read(
        r: &mut omr_core::codec::Reader<'_>,
        min_levels: u32,
    ) -> Result<ExpansionKeys, omr_core::OmrError> {
        let k = |j: u32| D / (1 << j) + 1;
        let mut fine = Vec::with_capacity(MAX_LEVELS as usize);
        for j in 0..MAX_LEVELS {
            fine.push(if j + COARSE_LEVELS < MAX_LEVELS {
                Some(GaloisKey::new(k(j), SwitchKey::read(r, FINE)?))
            } else {
                None
            });
        }
        let mut coarse = Vec::with_capacity(MAX_LEVELS as usize);
        for j in 0..MAX_LEVELS {
            coarse.push(if j + COARSE_LEVELS >= min_levels {
                Some(GaloisKey::new(k(j), SwitchKey::read(r, COARSE)?))
            } else {
                None
            });
        }
        Ok(ExpansionKeys { fine, coarse })
    }
}

/// The predicted noise variance of an output of `levels` levels: every level doubles the
/// variance before it (c ± τ(c)) and adds one key switch's, so level j's switch reaches the
/// output times 2^(L−1−j); the fresh error (variance 1/2) is doubled L times.
pub fn output_noise_variance(levels: u32) -> f64 {
    let mut var = 0.5;
    for j in 0..levels {
        var = 2.0 * var + level_gadget(j, levels).noise_variance(0.5);
    }
    var
}

/// 2^−levels mod Q, the factor a client puts on the values it will have expanded.
pub fn expansion_factor(levels: u32) -> u64 {
    let q = crate::params::PRIME_Q as u128;
    // 2^−1 = (Q + 1)/2 since Q is odd.
    let half = q.div_ceil(2);
    let mut f: u128 = 1;
    for _ in 0..levels {
        f = f * half % q;
    }
    f as u64
}

/// Levels of the expansion tree whose two halves run as parallel rayon tasks.
const PARALLEL_LEVELS: u32 = 4;

/// The message of a query carrying `values` (at most 2^levels): value v, times 2^−levels, at
/// coefficient bitrev(v). Reversed bits make every subtree of the expansion a contiguous run
/// of values, so [`expand_each`] yields them in order and prunes the unused tail.
pub fn place(values: &[u64], levels: u32) -> Vec<u64> {
    assert!(values.len() <= 1 << levels && levels <= MAX_LEVELS);
    let f = expansion_factor(levels);
    let mut m = vec![0u64; D];
    for (v, &x) in values.iter().enumerate() {
        m[reverse(v, levels)] = crate::ring::mul(x, f);
    }
    m
}

/// The low `bits` bits of `x` reversed.
fn reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Expands `query` (its message made by [`place`]) and calls `sink(v, ct)` for every value
/// v < `count`, ct encrypting value v as a constant **in the NTT domain** (both halves): depth
/// first, the top [`PARALLEL_LEVELS`] levels in parallel, so only a path of the tree is held
/// per task.
///
/// A node keeps c0 in the NTT domain, where τ_k only permutes it and X^−step is one pointwise
/// product, and c1 in coefficients, where its key switch takes its digits: a split costs the
/// switch's transforms and one more (c1's switched half back to coefficients, or at the last
/// level c1 forth), not the four of a split done in coefficients.
pub fn expand_each<F>(query: Ciphertext, keys: &ExpansionKeys, levels: u32, count: usize, sink: &F)
where
    F: Fn(usize, Ciphertext) + Sync,
{
    fn node<F: Fn(usize, Ciphertext) + Sync>(
        ct: Node,
        at: (u32, usize),
        levels: u32,
        count: usize,
        keys: &ExpansionKeys,
        sink: &F,
    ) {
        let (j, index) = at;
        // The values below this node: the top j bits are reverse(index, j).
        let first = reverse(index, j) << (levels - j);
        if first >= count {
            return;
        }
        if j == levels {
            // Only for an expansion of no levels: the query itself.
            let Node { c0, mut c1 } = ct;
            Ntt::of(D).fwd(&mut c1);
            return sink(first, Ciphertext { c0, c1 });
        }
        let key = keys.key(j, levels);
        if j + 1 == levels {
            let (even, odd) = split(ct, key, j, true);
            sink(first, even.into());
            if first + 1 < count {
                sink(first + 1, odd.into());
            }
            return;
        }
        let (even, odd) = split(ct, key, j, false);
        let step = 1usize << j;
        let (left, right) = ((j + 1, index), (j + 1, index + step));
        if j < PARALLEL_LEVELS {
            rayon::join(
                || node(even, left, levels, count, keys, sink),
                || node(odd, right, levels, count, keys, sink),
            );
        } else {
            node(even, left, levels, count, keys, sink);
            node(odd, right, levels, count, keys, sink);
        }
    }
    let Ciphertext { mut c0, c1 } = query;
    Ntt::of(D).fwd(&mut c0);
    node(Node { c0, c1 }, (0, 0), levels, count, keys, sink);
}

/// A node of the expansion tree: c0 in the NTT domain, c1 in coefficients (at the last level
/// both in the NTT domain).
struct Node {
    c0: Vec<u64>,
    c1: Vec<u64>,
}

impl From<Node> for Ciphertext {
    fn from(n: Node) -> Ciphertext {
        Ciphertext { c0: n.c0, c1: n.c1 }
    }
}

/// Level j's split of `ct`: ct + τ(ct) and (ct − τ(ct))·X^−2^j, τ(ct) = (τ(c0) + k0, k1) with
/// (k0, k1) the key switch of τ(c1). With `last`, both halves of both children in the NTT
/// domain (for the sink); otherwise as a [`Node`].
fn split(ct: Node, key: &GaloisKey, j: u32, last: bool) -> (Node, Node) {
    let ntt = Ntt::of(D);
    let shift = monomial_ntt(j);
    let Node {
        c0: mut even0,
        c1: mut even1,
    } = ct;
    let (mut odd0, mut odd1) = key.switch_ntt(&even1);
    // c0 ± (τ(c0) + k0), in the NTT domain.
    butterflies(&mut even0, &mut odd0, Some(key.permutation()));
    ntt.mul_assign_normalize(&mut odd0, shift);
    // c1 ± k1, in the domain the children want.
    if last {
        ntt.fwd(&mut even1);
    } else {
        ntt.inv(&mut odd1);
    }
    butterflies(&mut even1, &mut odd1, None);
    if last {
        ntt.mul_assign_normalize(&mut odd1, shift);
    } else {
        odd1 = times_monomial(&odd1, -(1i64 << j));
    }
    (
        Node {
            c0: even0,
            c1: even1,
        },
        Node { c0: odd0, c1: odd1 },
    )
}

/// Every output of [`expand_each`], in value order, back in the coefficient domain.
pub fn expand(query: &Ciphertext, keys: &ExpansionKeys, levels: u32) -> Vec<Ciphertext> {
    let out = std::sync::Mutex::new(vec![None; 1 << levels]);
    expand_each(query.clone(), keys, levels, 1 << levels, &|v, mut ct| {
        Ntt::of(D).inv(&mut ct.c0);
        Ntt::of(D).inv(&mut ct.c1);
        out.lock().expect("outputs")[v] = Some(ct);
    });
    (out.into_inner().expect("outputs").into_iter())
        .map(|ct| ct.expect("every output"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::PRIME_Q as Q;
    use crate::ring::{centered, lift, mul, sub};
    use crate::sample::stream;

    #[test]
    fn expansion_yields_each_coefficient_as_a_constant_with_the_predicted_noise() {
        let mut rng = stream(&[9; 32], 0);
        let s = Secret::generate(&mut rng);
        let levels = 6;
        let keys = ExpansionKeys::generate(&s, levels, &mut rng);
        let delta = Q >> 10;
        let values: Vec<u64> = (0..1u64 << levels).map(|i| (i * 37 + 5) % 1024).collect();
        let m = place(&crate::rlwe::scaled(&values, delta), levels);
        let out = expand(&s.encrypt(&m, &mut rng), &keys, levels);
        assert_eq!(out.len(), 1 << levels);
        let mut noise = Vec::new();
        for (i, ct) in out.iter().enumerate() {
            let phase = s.phase(ct);
            for (c, &p) in phase.iter().enumerate() {
                let want = if c == 0 { mul(values[i], delta) } else { 0 };
                let e = centered(sub(lift(p), want));
                noise.push(e);
                assert!(e.unsigned_abs() < delta / 2, "output {i} coefficient {c}");
            }
        }
        let predicted = output_noise_variance(levels);
        let measured = crate::rlwe::variance(&noise);
        assert!(
            (0.5..2.0).contains(&(measured / predicted)),
            "measured {measured:e}, predicted {predicted:e}"
        );
    }

    #[test]
    fn the_split_in_the_ntt_domain_gives_exactly_the_split_in_coefficients() {
        // The textbook split, all in coefficients: ct ± τ(ct), the odd half times X^−step.
        fn reference(ct: Ciphertext, j: u32, levels: u32, keys: &ExpansionKeys) -> Vec<Ciphertext> {
            if j == levels {
                return vec![ct];
            }
            let tau = ct.automorphism(keys.key(j, levels));
            let odd = ct.sub(&tau).times_monomial(-(1i64 << j));
            let even = ct.add(&tau);
            let (mut even, odd) = (
                reference(even, j + 1, levels, keys),
                reference(odd, j + 1, levels, keys),
            );
            // The even subtree holds the first half of the values ([`place`] reversed their bits).
            even.extend(odd);
            even
        }
        let mut rng = stream(&[5; 32], 0);
        let s = Secret::generate(&mut rng);
        let levels = 5;
        let keys = ExpansionKeys::generate(&s, levels, &mut rng);
        let values: Vec<u64> = (0..1u64 << levels).map(|i| i * 977).collect();
        let query = s.encrypt(&place(&values, levels), &mut rng);
        let got = expand(&query, &keys, levels);
        let want = reference(query, 0, levels, &keys);
        for (v, ct) in got.iter().enumerate() {
            assert_eq!(ct, &want[v], "value {v}");
        }
    }

    #[test]
    fn the_expansion_factor_inverts_the_power_of_two() {
        for levels in [0, 1, 7, 12] {
            assert_eq!(mul(expansion_factor(levels), 1 << levels), 1);
        }
    }
}
