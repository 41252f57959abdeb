//! Named parameter sets: every dimension, modulus, noise bound and decomposition of the scheme.
//!
//! `docs/PARAMETERS.md` gives the security argument and the noise budget for [`OMR_V1`]; the
//! unit-test set [`INSECURE_TEST`] is small on purpose and says so in its name.

use crate::error::OmrError;

/// The prime modulus of the trace and digest stage: 2^64 - 2^32 + 1 (NTT-friendly, N invertible).
pub const PRIME_P: u64 = 0xFFFF_FFFF_0000_0001;

/// One complete, named parameter set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSet {
    /// Stable name used on the wire and in configuration (`omr-v1`).
    pub name: &'static str,
    /// Wire identifier (one byte in every encoding).
    pub id: u8,
    /// True for sets that must never protect real data.
    pub insecure: bool,

    // --- Clue (compact public key encryption, modulus-switched for transport) ---
    /// Clue LWE dimension n.
    pub clue_dim: usize,
    /// Module rank r of the clue key: 1 = tfhe-rs's compact public key over Z[X]/(X^n+1) (n a
    /// power of two); r > 1 = a module of rank r over Z[X]/(X^(n/r)+1) (`crate::mlwe`).
    pub clue_rank: usize,
    /// Number of clue ciphertexts per message (ℓ).
    pub clue_count: usize,
    /// TUniform bound (log2) of the public-key and encryption noise at q = 2^64.
    pub clue_noise_log2: u32,
    /// Half-width h of the level-1 box, in units of the transport modulus 2·N1.
    pub box_half_width: usize,

    // --- Level 1: blind rotation of each clue into GLWE(k=1, N1) at q = 2^64 ---
    /// Level 1 has no key of its own: it blind-rotates with one decomposition level of the
    /// level-2 key (the rows at q/B2², i.e. base B2² and 1 level), which encrypts the same
    /// secret because the level-2 LWE key *is* the clue secret and GLWE1 is GLWE2. Needs
    /// `lwe2_dim == clue_dim`, `n1 == n2`, `bsk1_levels == 1`, `bsk1_base_log == 2 ·
    /// bsk2_base_log` and `bsk2_levels >= 2` (checked by a test).
    pub level1_uses_level2_key: bool,
    pub n1: usize,
    pub bsk1_base_log: usize,
    pub bsk1_levels: usize,
    pub glwe1_noise_log2: u32,

    // --- Keyswitch from the level-1 extracted LWE (dimension N1) to the level-2 LWE key ---
    pub lwe2_dim: usize,
    pub ksk_base_log: usize,
    pub ksk_levels: usize,
    /// log2 of the keyswitching key's modulus: 64, or 32 (tfhe-rs's KS32 pattern: half the
    /// memory; `lwe2_noise_log2` is then relative to 2^32).
    pub ksk_modulus_log: u32,
    pub lwe2_noise_log2: u32,

    // --- Level 2: blind rotation into GLWE(k=1, N2) at q = 2^64 ---
    pub n2: usize,
    pub bsk2_base_log: usize,
    pub bsk2_levels: usize,
    pub glwe2_noise_log2: u32,

    // --- Prime stage (mod PRIME_P): switch up to GLWE(k3, N2), trace, digest ---
    pub k3: usize,
    pub glwe3_noise_log2: u32,
    pub up_base_log: usize,
    pub up_levels: usize,
    pub trace_base_log: usize,
    pub trace_levels: usize,
    pub down_base_log: usize,
    pub down_levels: usize,

    // --- Digest ---
    /// Plaintext modulus t of the digest (prime: the payload system is solved over GF(t)).
    pub plain_modulus: u64,
    /// Maximum payload size in bytes.
    pub payload_bytes: usize,
    /// log2 of the modulus the digest is switched to before it is sent.
    pub digest_modulus_log: u32,
    /// Largest number of consecutive board messages one accumulator or digest may cover (M).
    pub max_range: u64,
    /// Index-encoding segments (each message picks one bucket per segment).
    pub index_segments: usize,
    /// Random-weight checksum coefficients that detect a missed or extra message.
    pub checksum_slots: usize,
    /// Extra payload combinations beyond k̄ (rank margin of the linear system).
    pub payload_margin: usize,
    /// Largest k̄ a key may ask for.
    pub max_kbar: usize,
}

impl ParamSet {
    /// Level-1 output spacing: the clue sum s ∈ [-ℓ, ℓ] is encoded as s·2^64/D.
    pub fn level1_divisor(&self) -> u64 {
        4 * self.clue_count as u64 + 2
    }

    /// Transport modulus of the clue (= 2·N1, the blind-rotation input modulus).
    pub fn clue_modulus_log(&self) -> u32 {
        (2 * self.n1).ilog2()
    }

    /// Bits of the clue-key body kept on the wire (the rest is below the key's own noise).
    pub fn clue_key_dropped_bits(&self) -> u32 {
        self.clue_noise_log2 - 1
    }

    /// Bits dropped from a native-modulus seeded key body with TUniform bound `b` for transport:
    /// the rounding adds a variance 2^-8 of the key's own noise variance.
    pub fn dropped_bits_for_noise(b: u32) -> u32 {
        b.saturating_sub(3)
    }

    /// Input dimension of level 1's own bootstrapping key: 0 when level 1 uses the level-2 key.
    pub fn level1_key_dim(&self) -> usize {
        if self.level1_uses_level2_key {
            0
        } else {
            self.clue_dim
        }
    }

    /// Payload coefficients per message: two length bytes, then the payload bytes.
    pub fn payload_coeffs(&self) -> usize {
        self.payload_bytes + 2
    }

    /// Look a parameter set up by its wire id.
    pub fn by_id(id: u8) -> Result<&'static ParamSet, OmrError> {
        ALL.iter()
            .copied()
            .find(|p| p.id == id)
            .ok_or(OmrError::UnknownParamSet(format!("id {id}")))
    }

    /// Look a parameter set up by name.
    pub fn by_name(name: &str) -> Result<&'static ParamSet, OmrError> {
        ALL.iter()
            .copied()
            .find(|p| p.name == name)
            .ok_or_else(|| OmrError::UnknownParamSet(name.to_string()))
    }
}

/// The production set: every LWE/GLWE instance at ≥ 128 bits (docs/PARAMETERS.md).
pub const OMR_V1: ParamSet = ParamSet {
    name: "omr-v1",
    id: 1,
    insecure: false,
    clue_dim: 1024,
    clue_rank: 1,
    clue_count: 4,
    clue_noise_log2: 43,
    box_half_width: 42,
    level1_uses_level2_key: false,
    n1: 2048,
    bsk1_base_log: 22,
    bsk1_levels: 1,
    glwe1_noise_log2: 17,
    lwe2_dim: 768,
    ksk_base_log: 2,
    ksk_levels: 7,
    ksk_modulus_log: 64,
    lwe2_noise_log2: 49,
    n2: 2048,
    bsk2_base_log: 9,
    bsk2_levels: 4,
    glwe2_noise_log2: 17,
    k3: 2,
    glwe3_noise_log2: 4,
    up_base_log: 12,
    up_levels: 4,
    trace_base_log: 11,
    trace_levels: 5,
    down_base_log: 10,
    down_levels: 3,
    plain_modulus: 257,
    payload_bytes: 612,
    digest_modulus_log: 18,
    max_range: 1 << 16,
    index_segments: 5,
    checksum_slots: 4,
    payload_margin: 3,
    max_kbar: 256,
};

/// The second production set: module-LWE clues of dimension 768 (level 1 blind-rotates 768
/// coefficients per clue body instead of 1024), one bootstrapping key for both levels (level 1
/// uses its middle decomposition level), a 32-bit LWE keyswitching key, a 3-level level-2 key,
/// cheaper prime-stage keyswitches, accumulators of 2^14 messages. docs/PARAMETERS.md argues it
/// like [`OMR_V1`].
pub const OMR_V2: ParamSet = ParamSet {
    name: "omr-v2",
    id: 2,
    insecure: false,
    clue_dim: 768,
    clue_rank: 3,
    clue_count: 4,
    clue_noise_log2: 49,
    box_half_width: 38,
    level1_uses_level2_key: true,
    n1: 2048,
    bsk1_base_log: 24,
    bsk1_levels: 1,
    glwe1_noise_log2: 17,
    lwe2_dim: 768,
    ksk_base_log: 2,
    ksk_levels: 6,
    ksk_modulus_log: 32,
    lwe2_noise_log2: 17,
    n2: 2048,
    bsk2_base_log: 12,
    bsk2_levels: 3,
    glwe2_noise_log2: 17,
    k3: 2,
    glwe3_noise_log2: 4,
    up_base_log: 16,
    up_levels: 3,
    trace_base_log: 16,
    trace_levels: 3,
    down_base_log: 10,
    down_levels: 3,
    plain_modulus: 257,
    payload_bytes: 612,
    digest_modulus_log: 18,
    max_range: 1 << 14,
    index_segments: 5,
    checksum_slots: 4,
    payload_margin: 3,
    max_kbar: 256,
};

/// A small, fast set for unit tests. NOT SECURE: dimensions and noise far below 128 bits.
pub const INSECURE_TEST: ParamSet = ParamSet {
    name: "insecure-test",
    id: 200,
    insecure: true,
    clue_dim: 256,
    clue_rank: 1,
    clue_count: 4,
    clue_noise_log2: 20,
    box_half_width: 21,
    level1_uses_level2_key: false,
    n1: 512,
    bsk1_base_log: 20,
    bsk1_levels: 1,
    glwe1_noise_log2: 10,
    lwe2_dim: 256,
    ksk_base_log: 4,
    ksk_levels: 5,
    ksk_modulus_log: 64,
    lwe2_noise_log2: 20,
    n2: 512,
    bsk2_base_log: 16,
    bsk2_levels: 2,
    glwe2_noise_log2: 10,
    k3: 2,
    glwe3_noise_log2: 2,
    up_base_log: 16,
    up_levels: 3,
    trace_base_log: 16,
    trace_levels: 3,
    down_base_log: 16,
    down_levels: 2,
    plain_modulus: 257,
    payload_bytes: 64,
    digest_modulus_log: 19,
    max_range: 1 << 14,
    index_segments: 5,
    checksum_slots: 4,
    payload_margin: 3,
    max_kbar: 32,
};

/// Every known parameter set.
pub const ALL: &[&ParamSet] = &[&OMR_V1, &OMR_V2, &INSECURE_TEST];
