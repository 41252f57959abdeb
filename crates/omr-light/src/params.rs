//! The parameter set omr-light-v1 and everything derived from it: sizes, the noise prediction,
//! the range r′ and the false-positive and false-negative rates. docs/PARAMETERS.md argues the
//! choices; docs/light/STUDY.md gives the numbers that led to them.

/// One linear-detection parameter set.
#[derive(Debug, PartialEq, Eq)]
pub struct LightParams {
    pub name: &'static str,
    /// The id byte of every encoding (omr-v1 is 1, omr-v2 is 2).
    pub id: u8,
    /// Clue ring degree n: the clue secret s has n coefficients and the detection key n
    /// ciphertexts.
    pub n: usize,
    /// log2 of the clue modulus t (a power of two), which is also the plaintext modulus of the
    /// detection key's ciphertexts.
    pub log_t: u32,
    /// Bits kept of each coefficient of the clue's first polynomial (the low `log_t - a_bits`
    /// are rounded away).
    pub a_bits: u32,
    /// Coefficients of the clue's second polynomial that are sent and checked (ℓ).
    pub ell: usize,
    /// Ring degree of the detection key's ciphertexts: the messages of one batch.
    pub batch: usize,
    /// The ciphertext modulus Q of the detection key (a prime, 2·batch | Q − 1).
    pub q: u64,
    /// log2 of the modulus the digest's per-key half is switched to.
    pub log_q0: u32,
    /// log2 of the modulus the digest's shared half is switched to.
    pub log_q1: u32,
    /// The range check: a slot is pertinent when all ℓ values lie in [−r, r].
    pub range: u32,
    /// Whether omrd may run it without being told that it is insecure.
    pub secure: bool,
    /// The largest payload a message carries (fetched by PIR, not in the digest).
    pub payload_bytes: usize,
    /// The most board messages one digest covers (paged beyond).
    pub max_digest_messages: u64,
}

/// Q = 2^62 − 2^16 + 1: the largest prime below 2^62 with 2^16 | Q − 1.
pub const PRIME_Q: u64 = (1 << 62) - (1 << 16) + 1;

pub const OMR_LIGHT_V1: LightParams = LightParams {
    name: "omr-light-v1",
    id: 3,
    n: 1024,
    log_t: 24,
    a_bits: 23,
    ell: 2,
    batch: 4096,
    q: PRIME_Q,
    log_q0: 27,
    log_q1: 33,
    // The smallest r with ℓ·P(|v| > r) ≤ 2^-40 for the exact distribution of the clue noise v
    // (`docs/light/noise.py`): 2^-41.8 at r = 205.
    range: 205,
    secure: true,
    // The same letters as omr-v1/omr-v2 carry.
    payload_bytes: 612,
    // 16 batches, ≈ 983 KB: a sync of 2^16 messages in one call.
    max_digest_messages: 1 << 16,
};

impl LightParams {
    /// The set with this name.
    pub fn by_name(name: &str) -> Option<&'static LightParams> {
        (name == OMR_LIGHT_V1.name).then_some(&OMR_LIGHT_V1)
    }

    /// The set with this id byte.
    pub fn by_id(id: u8) -> Option<&'static LightParams> {
        (id == OMR_LIGHT_V1.id).then_some(&OMR_LIGHT_V1)
    }

    pub fn t(&self) -> u64 {
        1 << self.log_t
    }

    /// ⌊Q / t⌋, the scale of a plaintext in a ciphertext.
    pub fn delta(&self) -> u64 {
        self.q >> self.log_t
    }

    /// Bytes of a clue's body (the header is [`omr_core::codec::HEADER_LEN`] more).
    pub fn clue_body_bytes(&self) -> usize {
        (self.n * self.a_bits as usize).div_ceil(8) + (self.ell * self.log_t as usize).div_ceil(8)
    }

    /// Bytes of an encoded clue.
    pub fn clue_bytes(&self) -> usize {
        omr_core::codec::HEADER_LEN + self.clue_body_bytes()
    }

    /// Bits of one coefficient of the detection key (values below Q).
    pub fn q_bits(&self) -> u32 {
        64 - self.q.leading_zeros()
    }

    /// Bytes of an encoded detection key (n polynomials of `batch` coefficients, `q_bits` each).
    pub fn detection_key_bytes(&self) -> usize {
        omr_core::codec::HEADER_LEN + (self.n * self.batch * self.q_bits() as usize).div_ceil(8)
    }

    /// Bytes of memory an expanded detection key takes on the server.
    pub fn detection_key_memory(&self) -> usize {
        self.n * self.batch * 8
    }

    /// Digest bits per board message: ℓ values of the per-key half and ℓ of the shared half.
    pub fn digest_bits_per_message(&self) -> u32 {
        self.ell as u32 * (self.log_q0 + self.log_q1)
    }

    /// Variance of one coefficient of the clue noise v = e·u + e2 − (e1 + δ)·s, with s, u, e, e1,
    /// e2 from the centred binomial of η = 1 (variance 1/2) and the rounding δ of the clue's first
    /// polynomial (variance 1/2 when one bit is dropped; 0 when none is).
    pub fn clue_noise_variance(&self) -> f64 {
        let n = self.n as f64;
        // Rounding a uniform value to an even one, half to even, moves it by 0 or ±1: variance
        // 1/2. Only one dropped bit is supported.
        debug_assert!(self.log_t - self.a_bits <= 1);
        let rounding = if self.a_bits < self.log_t { 0.5 } else { 0.0 };
        n * 0.25 + n * 0.5 * (0.5 + rounding) + 0.5
    }

    /// log2 of the false-positive rate per message: another recipient's clue passes when all ℓ
    /// of its (uniformly distributed) values fall in the range.
    pub fn false_positive_log2(&self) -> f64 {
        self.false_positive_log2_at(self.range)
    }

    /// [`LightParams::false_positive_log2`] at another range (the weakened-range test).
    pub fn false_positive_log2_at(&self, range: u32) -> f64 {
        self.ell as f64 * ((2.0 * f64::from(range) + 1.0) / self.t() as f64).log2()
    }

    /// Variance of the detection key's noise after the products of one batch, before the
    /// modulus switch: n products of a plaintext with uniform coefficients mod t by a fresh error
    /// of variance 1/2, each coefficient a sum over the `batch` coefficients.
    pub fn product_noise_variance(&self) -> f64 {
        let t = self.t() as f64;
        self.n as f64 * self.batch as f64 * (t * t / 12.0) * 0.5
    }

    /// Variance of the decryption error, as a fraction of the modulus, after the modulus switch:
    /// the products' noise, the per-key half's rounding and the shared half's rounding times the
    /// digest secret (variance 1/2 per coefficient).
    pub fn digest_noise_variance(&self) -> f64 {
        let q = self.q as f64;
        let q0 = f64::from(self.log_q0).exp2();
        let q1 = f64::from(self.log_q1).exp2();
        self.product_noise_variance() / (q * q)
            + 1.0 / (12.0 * q0 * q0)
            + (self.batch as f64 * 0.5) / (12.0 * q1 * q1)
    }

    /// log2 of the chance that one coefficient of a digest decrypts wrong (Gaussian tail of
    /// [`LightParams::digest_noise_variance`] against half a plaintext step, 1/(2t)).
    pub fn decryption_failure_log2(&self) -> f64 {
        let z = 1.0 / (2.0 * self.t() as f64) / self.digest_noise_variance().sqrt();
        gaussian_two_sided_tail_log2(z)
    }
}

/// log2 P(|Z| > z) for a standard normal Z (the asymptotic series; accurate for z ≥ 3).
pub fn gaussian_two_sided_tail_log2(z: f64) -> f64 {
    let pdf = (-z * z / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let series = 1.0 - 1.0 / (z * z) + 3.0 / z.powi(4);
    (2.0 * pdf / z * series).log2()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modulus_is_the_prime_the_ntt_needs() {
        let p = &OMR_LIGHT_V1;
        assert_eq!((p.q - 1) % (2 * p.batch as u64), 0);
        assert!(tfhe_ntt::prime64::Plan::try_new(p.batch, p.q).is_some());
        assert_eq!(p.q_bits(), 62);
    }

    #[test]
    fn the_sizes_meet_the_targets() {
        let p = &OMR_LIGHT_V1;
        assert!(p.clue_bytes() <= 3000, "{}", p.clue_bytes());
        assert!(p.detection_key_bytes() <= 64_000_000);
        assert!(p.digest_bits_per_message() <= 128);
        assert!(
            p.false_positive_log2() <= -30.0,
            "{}",
            p.false_positive_log2()
        );
        assert!(
            p.decryption_failure_log2() < -60.0,
            "{}",
            p.decryption_failure_log2()
        );
        assert!((p.clue_noise_variance() - 768.5).abs() < 1e-9);
    }
}
