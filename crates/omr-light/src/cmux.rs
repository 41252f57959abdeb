//! Choosing between two ciphertexts by an encrypted bit the server cannot read (the fold and
//! the rotation of the payload fetch, docs/light/STUDY.md §7), from what query expansion gives:
//! Regev encryptions of g_i·b for a gadget g, and no RGSW conversion.
//!
//! For d = x1 − x0 = (d0, d1): Σ_i dec_i(d0)·Enc(g_i·b) encrypts b·d0 and
//! y = Σ_i dec_i(d1)·Enc(g_i·b) encrypts b·d1. Then (0, y0) + KS_{S²→S}(y1) encrypts
//! S·(y0 + y1·S) = S·b·d1, so x0 plus both encrypts x0 + b·(d0 + d1·S) = x0 + b·(x1 − x0).
//! One key switch per CMux replaces the 2ℓ external products that would turn each bit into an
//! RGSW ciphertext (the conversion Spiral and Respire use): a bit serves at most 4 CMux here.
//!
//! The key switching key from S² to S (a relinearisation key) is uploaded once with the
//! expansion keys; like them it rests on the usual circular-security assumption of BFV.

use rand::RngCore;

use crate::ring::{add, Ntt};
use crate::rlwe::{Ciphertext, Secret, D};
use crate::switch::{decompose_ntt, gadget_product_ntt, Gadget, SwitchKey, COARSE};

/// Rows in the NTT domain (both halves of each).
type Rows = Vec<(Vec<u64>, Vec<u64>)>;

/// Enc(g_i·b) for every digit of `gadget`, NTT domain.
pub struct EncryptedBit {
    gadget: Gadget,
    rows: Rows,
}

impl std::fmt::Debug for EncryptedBit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedBit")
            .field("gadget", &self.gadget)
            .finish()
    }
}

/// The key switching key from S² to S (coarse gadget).
#[derive(Debug)]
pub struct SquareKey(pub SwitchKey);

impl Secret {
    /// The key switching key from S² to S.
    pub fn square_key(&self, rng: &mut impl RngCore) -> SquareKey {
        let ntt = Ntt::of(D);
        let mut s2 = self.lifted();
        ntt.fwd(&mut s2);
        let s = s2.clone();
        ntt.mul_assign(&mut s2, &s);
        ntt.inv(&mut s2);
        SquareKey(self.switch_key(&s2, COARSE, rng))
    }
}

impl EncryptedBit {
    /// The bit whose rows `regev` (Enc(g_i·b), i < gadget.digits, both halves in the NTT
    /// domain, as `expand::expand_each` gives them) are.
    pub fn from_regev(regev: Vec<Ciphertext>, gadget: Gadget) -> EncryptedBit {
        assert_eq!(regev.len(), gadget.digits);
        let rows = regev.into_iter().map(|ct| (ct.c0, ct.c1)).collect();
        EncryptedBit { gadget, rows }
    }

    /// The noise variance one CMux adds, for rows whose noise has variance `row_var`: the
    /// digits of d1 times the rows' noise, times S (variance D/2 a coefficient), dominate; the
    /// digits of d0 add the same without S, and the key switch adds its own.
    pub fn cmux_noise_variance(gadget: Gadget, row_var: f64) -> f64 {
        let product = gadget.noise_variance(row_var);
        (D as f64 / 2.0 + 1.0) * product + COARSE.noise_variance(0.5)
    }
}

/// x0 when `bit` encrypts 0, x1 when it encrypts 1.
pub fn cmux(
    bit: &EncryptedBit,
    square: &SquareKey,
    x0: &Ciphertext,
    x1: &Ciphertext,
) -> Ciphertext {
    let ntt = Ntt::of(D);
    let d = x1.sub(x0);
    let (mut c0, mut c1) = gadget_product_ntt(&decompose_ntt(&d.c0, bit.gadget), &bit.rows);
    let (y0, mut y1) = gadget_product_ntt(&decompose_ntt(&d.c1, bit.gadget), &bit.rows);
    ntt.inv(&mut y1);
    let (k0, k1) = square.0.apply_ntt(&y1);
    for j in 0..D {
        c0[j] = add(c0[j], k0[j]);
        c1[j] = add(add(c1[j], y0[j]), k1[j]);
    }
    ntt.inv(&mut c0);
    ntt.inv(&mut c1);
    Ciphertext { c0, c1 }.add(x0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use crate::expand::{expand_each, output_noise_variance, place, ExpansionKeys};
    use crate::params::PRIME_Q as Q;
    use crate::rlwe::{noise, scaled, variance};
    use crate::sample::stream;
    use crate::switch::MEDIUM;

    #[test]
    fn a_cmux_on_expanded_bits_picks_the_right_side_with_the_predicted_noise() {
        let mut rng = stream(&[11; 32], 0);
        let s = Secret::generate(&mut rng);
        let levels = 4;
        let keys = ExpansionKeys::generate(&s, levels, &mut rng);
        let square = s.square_key(&mut rng);
        // Values 0..6 are g_i·0, 6..12 are g_i·1.
        let g = MEDIUM;
        let values: Vec<u64> = (0..2 * g.digits)
            .map(|v| {
                if v < g.digits {
                    0
                } else {
                    g.factor(v - g.digits)
                }
            })
            .collect();
        let query = place(&values, levels);
        let regev = Mutex::new(vec![None; 2 * g.digits]);
        expand_each(
            s.encrypt(&query, &mut rng),
            &keys,
            levels,
            2 * g.digits,
            &|v, ct| {
                regev.lock().unwrap()[v] = Some(ct);
            },
        );
        let mut regev: Vec<Ciphertext> = (regev.into_inner().unwrap().into_iter())
            .map(Option::unwrap)
            .collect();
        let one = EncryptedBit::from_regev(regev.split_off(g.digits), g);
        let zero = EncryptedBit::from_regev(regev, g);

        let delta = Q >> 10;
        let m0 = scaled(&(0..D as u64).map(|i| i % 1000).collect::<Vec<_>>(), delta);
        let m1 = scaled(
            &(0..D as u64).map(|i| (i * 7) % 1000).collect::<Vec<_>>(),
            delta,
        );
        let (x0, x1) = (s.encrypt(&m0, &mut rng), s.encrypt(&m1, &mut rng));
        let predicted = EncryptedBit::cmux_noise_variance(g, output_noise_variance(levels));
        for (bit, want) in [(&zero, &m0), (&one, &m1)] {
            let e = noise(&s, &cmux(bit, &square, &x0, &x1), want);
            assert!(e.iter().all(|x| x.unsigned_abs() < delta / 2));
            let measured = variance(&e);
            assert!(
                (0.7..1.4).contains(&(measured / predicted)),
                "measured {measured:e}, predicted {predicted:e}"
            );
        }
    }
}
