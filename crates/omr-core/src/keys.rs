//! Key generation and the three keys: the recipient's secret key, the public clue key, and the
//! detection key (compressed with seeds for transport, expanded once on the server).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tfhe::core_crypto::commons::math::random::{CompressionSeed, Seed};
use tfhe::core_crypto::prelude::*;

use crate::codec::{pack_bits, write_header, Kind, Reader};
use crate::digest::{DigestKey, Layout};
use crate::error::OmrError;
use crate::params::ParamSet;
use crate::prime::{Decomposer, Ntt, PrimeGlweKey, PrimeKeyswitchKey, SeededPrimeKeyswitchKey};

/// Size limits for decoding (a little above the production sizes).
pub const SECRET_KEY_LIMIT: usize = 64 * 1024;
pub const CLUE_KEY_LIMIT: usize = 8 * 1024;
pub const DETECTION_KEY_LIMIT: usize = 160 * 1024 * 1024;

/// The recipient's secret key. Never leaves the recipient.
#[derive(Clone)]
pub struct SecretKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) clue_sk: LweSecretKeyOwned<u64>,
    pub(crate) glwe1: GlweSecretKeyOwned<u64>,
    pub(crate) lwe2: LweSecretKeyOwned<u64>,
    pub(crate) glwe2: GlweSecretKeyOwned<u64>,
    pub(crate) glwe3: PrimeGlweKey,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey")
            .field("params", &self.params.name)
            .field("kbar", &self.kbar)
            .finish_non_exhaustive()
    }
}

/// The public clue key (the recipient's address): a seeded compact public key whose body is
/// rounded to its top bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClueKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) seed: u128,
    /// Body coefficients, each the top `64 - clue_key_dropped_bits` bits.
    pub(crate) body_hi: Vec<u64>,
}

/// A seeded native-modulus key on the wire: tfhe's seed and its bodies rounded to their top bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SeededNative {
    pub(crate) seed: u128,
    pub(crate) dropped_bits: u32,
    pub(crate) bodies_hi: Vec<u64>,
}

impl SeededNative {
    fn compress(seed: u128, bodies: &[u64], dropped_bits: u32) -> Self {
        let bodies_hi = bodies
            .iter()
            .map(|&b| round_drop(b, dropped_bits))
            .collect();
        SeededNative {
            seed,
            dropped_bits,
            bodies_hi,
        }
    }

    fn bodies(&self) -> Vec<u64> {
        self.bodies_hi
            .iter()
            .map(|&b| b << self.dropped_bits)
            .collect()
    }

    fn bits(&self) -> u32 {
        64 - self.dropped_bits
    }
}

fn round_drop(x: u64, bits: u32) -> u64 {
    if bits == 0 {
        return x;
    }
    let keep = 64 - bits;
    let r = x.wrapping_add(1u64 << (bits - 1)) >> bits;
    if keep == 64 {
        r
    } else {
        r & ((1u64 << keep) - 1)
    }
}

/// The detection key as the recipient uploads it: seeds plus bodies (≈ 100 MB for omr-v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedDetectionKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) bsk1: SeededNative,
    pub(crate) ksk: SeededNative,
    pub(crate) bsk2: SeededNative,
    pub(crate) up: SeededPrimeKeyswitchKey,
    pub(crate) trace: Vec<SeededPrimeKeyswitchKey>,
    pub(crate) down: SeededPrimeKeyswitchKey,
}

/// The detection key expanded in server memory: Fourier bootstrapping keys, the LWE keyswitch
/// key and the NTT-domain prime-modulus keys. Immutable and `Sync`: share it across threads.
pub struct DetectionKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) layout: Layout,
    pub(crate) bsk1: FourierLweBootstrapKeyOwned,
    pub(crate) ksk: LweKeyswitchKeyOwned<u64>,
    pub(crate) bsk2: FourierLweBootstrapKeyOwned,
    pub(crate) up: PrimeKeyswitchKey,
    pub(crate) trace: Vec<PrimeKeyswitchKey>,
    pub(crate) digest_key: DigestKey,
    pub(crate) ntt: Ntt,
}

impl std::fmt::Debug for DetectionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetectionKey")
            .field("params", &self.params.name)
            .field("kbar", &self.kbar)
            .field("memory_bytes", &self.memory_bytes())
            .finish_non_exhaustive()
    }
}

/// Everything key generation produces.
#[derive(Debug)]
pub struct KeySet {
    pub secret: SecretKey,
    pub clue_key: ClueKey,
    pub detection_key: CompressedDetectionKey,
}

fn native() -> CiphertextModulus<u64> {
    CiphertextModulus::new_native()
}

fn random_u128(rng: &mut impl RngCore) -> u128 {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    u128::from_le_bytes(b)
}

/// A seeded bootstrapping key from `input` to `output` (k = 1), compressed for transport.
fn seeded_bsk(
    input: &LweSecretKeyOwned<u64>,
    output: &GlweSecretKeyOwned<u64>,
    base_log: usize,
    levels: usize,
    noise_log2: u32,
    rng: &mut impl RngCore,
    seeder: &mut dyn Seeder,
) -> SeededNative {
    let seed = random_u128(rng);
    let mut bsk = SeededLweBootstrapKey::new(
        0u64,
        GlweSize(2),
        output.polynomial_size(),
        DecompositionBaseLog(base_log),
        DecompositionLevelCount(levels),
        input.lwe_dimension(),
        CompressionSeed::from(Seed(seed)),
        native(),
    );
    par_generate_seeded_lwe_bootstrap_key(
        input,
        output,
        &mut bsk,
        DynamicDistribution::new_t_uniform(noise_log2),
        seeder,
    );
    SeededNative::compress(
        seed,
        bsk.into_container().as_ref(),
        ParamSet::dropped_bits_for_noise(noise_log2),
    )
}

/// Regenerate a seeded bootstrapping key's masks and convert it to the Fourier domain.
fn expand_bsk(
    k: &SeededNative,
    n: usize,
    base_log: usize,
    levels: usize,
) -> FourierLweBootstrapKeyOwned {
    let bsk = SeededLweBootstrapKey::from_container(
        k.bodies(),
        GlweSize(2),
        PolynomialSize(n),
        DecompositionBaseLog(base_log),
        DecompositionLevelCount(levels),
        CompressionSeed::from(Seed(k.seed)),
        native(),
    )
    .par_decompress_into_lwe_bootstrap_key();
    let mut f = FourierLweBootstrapKey::new(
        bsk.input_lwe_dimension(),
        bsk.glwe_size(),
        bsk.polynomial_size(),
        bsk.decomposition_base_log(),
        bsk.decomposition_level_count(),
    );
    par_convert_standard_lwe_bootstrap_key_to_fourier(&bsk, &mut f);
    f
}

/// Generate a recipient's keys for `params` and a per-key k̄ (max pertinent messages a digest
/// decodes). Uses the operating system's entropy.
pub fn keygen(params: &'static ParamSet, kbar: usize) -> Result<KeySet, OmrError> {
    if kbar == 0 || kbar > params.max_kbar {
        return Err(OmrError::BadKbar {
            got: kbar,
            max: params.max_kbar,
        });
    }
    let mut boxed_seeder = new_seeder();
    let seeder = boxed_seeder.as_mut();
    let mut secret_gen = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
    let mut rng = ChaCha20Rng::from_entropy();

    let clue_sk: LweSecretKeyOwned<u64> = allocate_and_generate_new_binary_lwe_secret_key(
        LweDimension(params.clue_dim),
        &mut secret_gen,
    );
    let glwe1: GlweSecretKeyOwned<u64> = allocate_and_generate_new_binary_glwe_secret_key(
        GlweDimension(1),
        PolynomialSize(params.n1),
        &mut secret_gen,
    );
    let lwe2: LweSecretKeyOwned<u64> = allocate_and_generate_new_binary_lwe_secret_key(
        LweDimension(params.lwe2_dim),
        &mut secret_gen,
    );
    let glwe2: GlweSecretKeyOwned<u64> = allocate_and_generate_new_binary_glwe_secret_key(
        GlweDimension(1),
        PolynomialSize(params.n2),
        &mut secret_gen,
    );
    let glwe3 = PrimeGlweKey::generate(params.k3, params.n2, &mut rng);
    let mut prf_seed = [0u8; 32];
    rng.fill_bytes(&mut prf_seed);

    // Clue key: seeded compact public key, body rounded for transport.
    let pk_seed = random_u128(&mut rng);
    let mut seeded_pk = SeededLweCompactPublicKey::new(
        0u64,
        LweDimension(params.clue_dim),
        CompressionSeed::from(Seed(pk_seed)),
        native(),
    );
    generate_seeded_lwe_compact_public_key(
        &clue_sk,
        &mut seeded_pk,
        DynamicDistribution::new_t_uniform(params.clue_noise_log2),
        seeder,
    );
    let dropped = params.clue_key_dropped_bits();
    let body_hi = seeded_pk
        .into_container()
        .iter()
        .map(|&b| round_drop(b, dropped))
        .collect();
    let clue_key = ClueKey {
        params,
        seed: pk_seed,
        body_hi,
    };

    // Level-1 bootstrapping key: clue key -> GLWE1.
    let bsk1 = seeded_bsk(
        &clue_sk,
        &glwe1,
        params.bsk1_base_log,
        params.bsk1_levels,
        params.glwe1_noise_log2,
        &mut rng,
        seeder,
    );

    // Keyswitching key: extracted level-1 LWE (dimension N1) -> LWE2.
    let ksk_seed = random_u128(&mut rng);
    let mut ksk = SeededLweKeyswitchKey::new(
        0u64,
        DecompositionBaseLog(params.ksk_base_log),
        DecompositionLevelCount(params.ksk_levels),
        LweDimension(params.n1),
        LweDimension(params.lwe2_dim),
        CompressionSeed::from(Seed(ksk_seed)),
        native(),
    );
    generate_seeded_lwe_keyswitch_key(
        &glwe1.as_lwe_secret_key(),
        &lwe2,
        &mut ksk,
        DynamicDistribution::new_t_uniform(params.lwe2_noise_log2),
        seeder,
    );
    let ksk = SeededNative::compress(
        ksk_seed,
        ksk.into_container().as_ref(),
        ParamSet::dropped_bits_for_noise(params.lwe2_noise_log2),
    );

    // Level-2 bootstrapping key: LWE2 -> GLWE2.
    let bsk2 = seeded_bsk(
        &lwe2,
        &glwe2,
        params.bsk2_base_log,
        params.bsk2_levels,
        params.glwe2_noise_log2,
        &mut rng,
        seeder,
    );

    // Prime-modulus keys.
    let ntt = Ntt::new(params.n2);
    let glwe2_prime = PrimeGlweKey {
        polys: vec![glwe2.as_ref().to_vec()],
    };
    let up = SeededPrimeKeyswitchKey::generate(
        &ntt,
        &glwe2_prime,
        &glwe3,
        Decomposer {
            base_log: params.up_base_log,
            levels: params.up_levels,
        },
        params.glwe3_noise_log2,
        &mut rng,
    );
    let trace = crate::prime::trace_elements(params.n2)
        .into_iter()
        .map(|g| {
            SeededPrimeKeyswitchKey::generate(
                &ntt,
                &glwe3.automorphism(g),
                &glwe3,
                Decomposer {
                    base_log: params.trace_base_log,
                    levels: params.trace_levels,
                },
                params.glwe3_noise_log2,
                &mut rng,
            )
        })
        .collect();
    let down = SeededPrimeKeyswitchKey::generate(
        &ntt,
        &glwe3,
        &glwe2_prime,
        Decomposer {
            base_log: params.down_base_log,
            levels: params.down_levels,
        },
        params.glwe2_noise_log2,
        &mut rng,
    );

    let secret = SecretKey {
        params,
        kbar,
        prf_seed,
        clue_sk,
        glwe1,
        lwe2,
        glwe2,
        glwe3,
    };
    let detection_key = CompressedDetectionKey {
        params,
        kbar,
        prf_seed,
        bsk1,
        ksk,
        bsk2,
        up,
        trace,
        down,
    };
    Ok(KeySet {
        secret,
        clue_key,
        detection_key,
    })
}

impl SecretKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::SecretKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        out.extend_from_slice(&self.prf_seed);
        for bits in [
            self.clue_sk.as_ref(),
            self.glwe1.as_ref(),
            self.lwe2.as_ref(),
            self.glwe2.as_ref(),
        ] {
            pack_bits(&mut out, bits.iter().copied(), 1);
        }
        for p in &self.glwe3.polys {
            pack_bits(&mut out, p.iter().copied(), 1);
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, params) = Reader::open(bytes, Kind::SecretKey, SECRET_KEY_LIMIT)?;
        let kbar = r.kbar(params)?;
        let prf_seed = r.array32()?;
        let clue_sk = LweSecretKey::from_container(r.packed(params.clue_dim, 1)?);
        let glwe1 =
            GlweSecretKey::from_container(r.packed(params.n1, 1)?, PolynomialSize(params.n1));
        let lwe2 = LweSecretKey::from_container(r.packed(params.lwe2_dim, 1)?);
        let glwe2 =
            GlweSecretKey::from_container(r.packed(params.n2, 1)?, PolynomialSize(params.n2));
        let mut polys = Vec::with_capacity(params.k3);
        for _ in 0..params.k3 {
            polys.push(r.packed(params.n2, 1)?);
        }
        r.finish()?;
        Ok(SecretKey {
            params,
            kbar,
            prf_seed,
            clue_sk,
            glwe1,
            lwe2,
            glwe2,
            glwe3: PrimeGlweKey { polys },
        })
    }
}

impl ClueKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub(crate) fn public_key(&self) -> LweCompactPublicKeyOwned<u64> {
        let dropped = self.params.clue_key_dropped_bits();
        let body: Vec<u64> = self.body_hi.iter().map(|&b| b << dropped).collect();
        SeededLweCompactPublicKey::from_container(
            body,
            CompressionSeed::from(Seed(self.seed)),
            native(),
        )
        .decompress_into_lwe_compact_public_key()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, Kind::ClueKey, self.params);
        out.extend_from_slice(&self.seed.to_le_bytes());
        pack_bits(
            &mut out,
            self.body_hi.iter().copied(),
            64 - self.params.clue_key_dropped_bits(),
        );
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        let (mut r, params) = Reader::open(bytes, Kind::ClueKey, CLUE_KEY_LIMIT)?;
        let seed = r.u128()?;
        let body_hi = r.packed(params.clue_dim, 64 - params.clue_key_dropped_bits())?;
        r.finish()?;
        Ok(ClueKey {
            params,
            seed,
            body_hi,
        })
    }
}

fn write_native(out: &mut Vec<u8>, k: &SeededNative) {
    out.extend_from_slice(&k.seed.to_le_bytes());
    out.push(k.dropped_bits as u8);
    pack_bits(out, k.bodies_hi.iter().copied(), k.bits());
}

fn read_native(
    r: &mut Reader<'_>,
    count: usize,
    dropped_bits: u32,
) -> Result<SeededNative, OmrError> {
    let seed = r.u128()?;
    let got = r.u8()? as u32;
    if got != dropped_bits {
        return Err(r.err(format!(
            "key body width {got} does not match the parameter set"
        )));
    }
    let bodies_hi = r.packed(count, 64 - dropped_bits)?;
    Ok(SeededNative {
        seed,
        dropped_bits,
        bodies_hi,
    })
}

pub(crate) fn write_prime(out: &mut Vec<u8>, k: &SeededPrimeKeyswitchKey) {
    out.extend_from_slice(&k.seed);
    for b in &k.bodies {
        out.extend_from_slice(&b.to_le_bytes());
    }
}

pub(crate) fn read_prime(
    r: &mut Reader<'_>,
    k_in: usize,
    k_out: usize,
    base_log: usize,
    levels: usize,
    n: usize,
) -> Result<SeededPrimeKeyswitchKey, OmrError> {
    let seed = r.array32()?;
    let bodies = r.u64s(SeededPrimeKeyswitchKey::expected_body_len(k_in, levels, n))?;
    if bodies.iter().any(|&b| b >= crate::params::PRIME_P) {
        return Err(r.err("prime-modulus key coefficient out of range"));
    }
    Ok(SeededPrimeKeyswitchKey {
        k_in,
        k_out,
        decomposer_base_log: base_log,
        levels,
        seed,
        bodies,
    })
}

impl CompressedDetectionKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    /// The part of this key that turns accumulators into digests.
    pub fn digest_key(&self) -> DigestKey {
        DigestKey::new(self.params, self.kbar, self.down.clone())
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    fn bsk_body_count(input_dim: usize, n: usize, levels: usize) -> usize {
        // Seeded GGSW: (k+1)·levels rows, one body polynomial each (k = 1).
        input_dim * 2 * levels * n
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len_estimate());
        write_header(&mut out, Kind::DetectionKey, self.params);
        out.extend_from_slice(&(self.kbar as u32).to_le_bytes());
        out.extend_from_slice(&self.prf_seed);
        write_native(&mut out, &self.bsk1);
        write_native(&mut out, &self.ksk);
        write_native(&mut out, &self.bsk2);
        write_prime(&mut out, &self.up);
        for t in &self.trace {
            write_prime(&mut out, t);
        }
        write_prime(&mut out, &self.down);
        out
    }

    fn encoded_len_estimate(&self) -> usize {
        (self.bsk1.bodies_hi.len() * self.bsk1.bits() as usize
            + self.bsk2.bodies_hi.len() * self.bsk2.bits() as usize)
            / 8
            + 4 * 1024 * 1024
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OmrError> {
        Self::from_bytes_with_limit(bytes, DETECTION_KEY_LIMIT)
    }

    pub fn from_bytes_with_limit(bytes: &[u8], limit: usize) -> Result<Self, OmrError> {
        let (mut r, p) = Reader::open(bytes, Kind::DetectionKey, limit)?;
        let kbar = r.kbar(p)?;
        let prf_seed = r.array32()?;
        let bsk1 = read_native(
            &mut r,
            Self::bsk_body_count(p.clue_dim, p.n1, p.bsk1_levels),
            ParamSet::dropped_bits_for_noise(p.glwe1_noise_log2),
        )?;
        let ksk = read_native(
            &mut r,
            p.n1 * p.ksk_levels,
            ParamSet::dropped_bits_for_noise(p.lwe2_noise_log2),
        )?;
        let bsk2 = read_native(
            &mut r,
            Self::bsk_body_count(p.lwe2_dim, p.n2, p.bsk2_levels),
            ParamSet::dropped_bits_for_noise(p.glwe2_noise_log2),
        )?;
        let up = read_prime(&mut r, 1, p.k3, p.up_base_log, p.up_levels, p.n2)?;
        let mut trace = Vec::new();
        for _ in crate::prime::trace_elements(p.n2) {
            trace.push(read_prime(
                &mut r,
                p.k3,
                p.k3,
                p.trace_base_log,
                p.trace_levels,
                p.n2,
            )?);
        }
        let down = read_prime(&mut r, p.k3, 1, p.down_base_log, p.down_levels, p.n2)?;
        r.finish()?;
        Ok(CompressedDetectionKey {
            params: p,
            kbar,
            prf_seed,
            bsk1,
            ksk,
            bsk2,
            up,
            trace,
            down,
        })
    }

    /// Expand into the server's in-memory form (seeds regenerated, Fourier/NTT conversions).
    pub fn expand(&self) -> DetectionKey {
        let p = self.params;
        let bsk1 = expand_bsk(&self.bsk1, p.n1, p.bsk1_base_log, p.bsk1_levels);
        let ksk = SeededLweKeyswitchKey::from_container(
            self.ksk.bodies(),
            DecompositionBaseLog(p.ksk_base_log),
            DecompositionLevelCount(p.ksk_levels),
            LweSize(p.lwe2_dim + 1),
            CompressionSeed::from(Seed(self.ksk.seed)),
            native(),
        )
        .par_decompress_into_lwe_keyswitch_key();
        let bsk2 = expand_bsk(&self.bsk2, p.n2, p.bsk2_base_log, p.bsk2_levels);
        let ntt = Ntt::new(p.n2);
        let up = self.up.expand(&ntt);
        let trace = self.trace.iter().map(|t| t.expand(&ntt)).collect();
        DetectionKey {
            params: p,
            kbar: self.kbar,
            prf_seed: self.prf_seed,
            layout: Layout::new(p, self.kbar),
            bsk1,
            ksk,
            bsk2,
            up,
            trace,
            digest_key: self.digest_key(),
            ntt,
        }
    }
}

impl DetectionKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    /// Bytes held by the expanded key (what one registered key costs in server RAM).
    pub fn memory_bytes(&self) -> usize {
        let c64 = 16;
        self.bsk1.as_view().data().len() * c64
            + self.bsk2.as_view().data().len() * c64
            + self.ksk.as_ref().len() * 8
            + (self.up.rows.len()
                + self.digest_key.down.rows.len()
                + self.trace.iter().map(|t| t.rows.len()).sum::<usize>())
                * 8
    }
}
