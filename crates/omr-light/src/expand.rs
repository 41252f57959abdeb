//! Query expansion (SealPIR, Angel et al., S&P 2018, with the power-of-two fix of Chen et al.):
//! one ciphertext of Σ_{i<2^L} m_i·X^i becomes 2^L ciphertexts of the constants m_i, with L
//! automorphism keys and 2^L − 1 key switches. The client scales its message by 2^−L mod Q
//! (Q is odd), so the outputs carry m_i itself and the factor 2^L lands on the noise only.

use rand::RngCore;

use crate::rlwe::{Ciphertext, GaloisKey, Secret, COARSE, D, FINE};

/// The most levels: 2^12 = D outputs from one ciphertext.
pub const MAX_LEVELS: u32 = 12;

/// Levels, from the last of [`MAX_LEVELS`], whose keys switch with the coarse gadget; the
/// earlier ones use the fine one. Level j's noise is doubled by every later level, so the first levels' noise dominates
/// the outputs while the last levels do most of the switches (level j does 2^j): fine early
/// and coarse late costs 8 % more than all coarse for 1/12 of its noise variance (12 levels).
pub const COARSE_LEVELS: u32 = 2;

/// The gadget of level j's key.
fn level_gadget(j: u32) -> crate::rlwe::Gadget {
    if j + COARSE_LEVELS >= MAX_LEVELS {
        COARSE
    } else {
        FINE
    }
}

/// The automorphism keys of expansion: level j uses τ_k with k = D/2^j + 1.
#[derive(Debug)]
pub struct ExpansionKeys {
    keys: Vec<GaloisKey>,
}

impl ExpansionKeys {
    /// The keys for `levels` levels.
    pub fn generate(secret: &Secret, levels: u32, rng: &mut impl RngCore) -> ExpansionKeys {
        assert!(levels <= MAX_LEVELS);
        let keys = (0..levels)
            .map(|j| secret.galois_key(D / (1 << j) + 1, level_gadget(j), rng))
            .collect();
        ExpansionKeys { keys }
    }

    pub fn levels(&self) -> u32 {
        self.keys.len() as u32
    }

    /// The key of level j (τ_k, k = D/2^j + 1).
    pub fn key(&self, j: usize) -> &GaloisKey {
        &self.keys[j]
    }
}

/// The predicted noise variance of an output of `levels` levels: every level doubles the
/// variance before it (c ± τ(c)) and adds one key switch's, so level j's switch reaches the
/// output times 2^(L−1−j); the fresh error (variance 1/2) is doubled L times.
pub fn output_noise_variance(levels: u32) -> f64 {
    let mut var = 0.5;
    for j in 0..levels {
        var = 2.0 * var + level_gadget(j).noise_variance(0.5);
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

/// The 2^levels ciphertexts of the constants m_0, m_1, … that `query` carries in its first
/// 2^levels coefficients (the rest must be zero, or output i also holds m_{i+u·2^L}·X^{u·2^L}),
/// with the first `levels` keys.
pub fn expand(query: &Ciphertext, keys: &ExpansionKeys, levels: u32) -> Vec<Ciphertext> {
    let mut cts = vec![query.clone()];
    for (j, key) in keys.keys[..levels as usize].iter().enumerate() {
        let step = 1usize << j;
        let mut next = vec![None; 2 * step];
        for (i, ct) in cts.into_iter().enumerate() {
            let tau = ct.automorphism(key);
            next[i + step] = Some(ct.sub(&tau).times_monomial(-(step as i64)));
            next[i] = Some(ct.add(&tau));
        }
        cts = next
            .into_iter()
            .map(|c| c.expect("every slot filled"))
            .collect();
    }
    cts
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
        let f = expansion_factor(levels);
        let mut m = vec![0u64; D];
        for (i, &v) in values.iter().enumerate() {
            m[i] = mul(mul(v, delta), f);
        }
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
    fn the_expansion_factor_inverts_the_power_of_two() {
        for levels in [0, 1, 7, 12] {
            assert_eq!(mul(expansion_factor(levels), 1 << levels), 1);
        }
    }
}
