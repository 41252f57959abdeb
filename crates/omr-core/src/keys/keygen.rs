//! Key generation: a recipient's secret key, then the clue key and the compressed detection key
//! derived from it, each key in a function of its own.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tfhe::core_crypto::commons::math::random::{CompressionSeed, RandomGenerator, Seed};
use tfhe::core_crypto::prelude::*;

use super::clue_key::ClueKey;
use super::compressed::CompressedDetectionKey;
use super::secret::SecretKey;
use super::seeded::{native, SeededNative};
use crate::error::OmrError;
use crate::params::ParamSet;
use crate::prime::{trace_elements, Decomposer, Ntt, PrimeGlweKey, SeededPrimeKeyswitchKey};

/// Everything key generation produces.
#[derive(Debug)]
pub struct KeySet {
    pub secret: SecretKey,
    pub clue_key: ClueKey,
    pub detection_key: CompressedDetectionKey,
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
    let mut rng = ChaCha20Rng::from_entropy();
    let secret = secret_key(params, kbar, seeder, &mut rng);
    let clue_key = clue_key(&secret, seeder, &mut rng);
    let detection_key = detection_key(&secret, seeder, &mut rng);
    Ok(KeySet {
        secret,
        clue_key,
        detection_key,
    })
}

/// Fresh binary secrets for every level (tfhe's secret generator for the native-modulus ones)
/// and the PRF seed.
fn secret_key(
    params: &'static ParamSet,
    kbar: usize,
    seeder: &mut dyn Seeder,
    rng: &mut ChaCha20Rng,
) -> SecretKey {
    let mut secret_gen = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
    let clue_sk = allocate_and_generate_new_binary_lwe_secret_key(
        LweDimension(params.clue_dim),
        &mut secret_gen,
    );
    let glwe2 = allocate_and_generate_new_binary_glwe_secret_key(
        GlweDimension(1),
        PolynomialSize(params.n2),
        &mut secret_gen,
    );
    // With one key for both levels, GLWE1 is GLWE2 and the level-2 LWE key is the clue secret.
    let (glwe1, lwe2) = if params.level1_uses_level2_key {
        (glwe2.clone(), clue_sk.clone())
    } else {
        let glwe1 = allocate_and_generate_new_binary_glwe_secret_key(
            GlweDimension(1),
            PolynomialSize(params.n1),
            &mut secret_gen,
        );
        let lwe2 = allocate_and_generate_new_binary_lwe_secret_key(
            LweDimension(params.lwe2_dim),
            &mut secret_gen,
        );
        (glwe1, lwe2)
    };
    let glwe3 = PrimeGlweKey::generate(params.k3, params.n2, rng);
    let mut prf_seed = [0u8; 32];
    rng.fill_bytes(&mut prf_seed);
    SecretKey {
        params,
        kbar,
        prf_seed,
        clue_sk,
        glwe1,
        lwe2,
        glwe2,
        glwe3,
    }
}

/// The clue key: a seeded compact public key of the clue secret, body rounded for transport.
fn clue_key(sk: &SecretKey, seeder: &mut dyn Seeder, rng: &mut ChaCha20Rng) -> ClueKey {
    let params = sk.params;
    let seed = random_u128(rng);
    if params.clue_rank > 1 {
        let mut noise = RandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
        let body = crate::mlwe::public_body(params, seed, sk.clue_sk.as_ref(), &mut noise);
        return ClueKey::from_seeded(params, seed, &body);
    }
    let mut seeded_pk = SeededLweCompactPublicKey::new(
        0u64,
        LweDimension(params.clue_dim),
        CompressionSeed::from(Seed(seed)),
        native(),
    );
    generate_seeded_lwe_compact_public_key(
        &sk.clue_sk,
        &mut seeded_pk,
        DynamicDistribution::new_t_uniform(params.clue_noise_log2),
        seeder,
    );
    ClueKey::from_seeded(params, seed, seeded_pk.into_container().as_ref())
}

/// The detection key: level-1 bootstrapping key (clue key -> GLWE1; none when level 1 uses
/// the level-2 key), keyswitching key (extracted level-1 LWE -> LWE2), level-2 bootstrapping
/// key (LWE2 -> GLWE2), then the prime-modulus keys.
fn detection_key(
    sk: &SecretKey,
    seeder: &mut dyn Seeder,
    rng: &mut ChaCha20Rng,
) -> CompressedDetectionKey {
    let p = sk.params;
    let bsk1 = if p.level1_uses_level2_key {
        SeededNative::compress(0, &[], ParamSet::dropped_bits_for_noise(p.glwe1_noise_log2))
    } else {
        seeded_bsk(
            &sk.clue_sk,
            &sk.glwe1,
            p.bsk1_base_log,
            p.bsk1_levels,
            p.glwe1_noise_log2,
            rng,
            seeder,
        )
    };
    let ksk = seeded_ksk(sk, rng, seeder);
    let bsk2 = seeded_bsk(
        &sk.lwe2,
        &sk.glwe2,
        p.bsk2_base_log,
        p.bsk2_levels,
        p.glwe2_noise_log2,
        rng,
        seeder,
    );
    let PrimeKeys { up, trace, down } = prime_keys(sk, rng);
    CompressedDetectionKey {
        params: p,
        kbar: sk.kbar,
        prf_seed: sk.prf_seed,
        bsk1,
        ksk,
        bsk2,
        up,
        trace,
        down,
    }
}

/// A fresh tfhe compression seed.
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

/// The seeded keyswitching key from the extracted level-1 LWE (dimension N1) to LWE2,
/// compressed for transport.
fn seeded_ksk(sk: &SecretKey, rng: &mut impl RngCore, seeder: &mut dyn Seeder) -> SeededNative {
    super::lwe_ksk::generate_seeded(sk, random_u128(rng), seeder)
}

/// The seeded prime-modulus keyswitching keys of a detection key.
struct PrimeKeys {
    /// Level-2 key (as a k = 1 key mod p) -> the k3 key.
    up: SeededPrimeKeyswitchKey,
    /// τ_g(k3 key) -> k3 key, one per trace element.
    trace: Vec<SeededPrimeKeyswitchKey>,
    /// k3 key -> level-2 key: the digest key.
    down: SeededPrimeKeyswitchKey,
}

/// Generate the prime-modulus keys between the level-2 key (as a k = 1 key mod p) and the k3 key.
fn prime_keys(sk: &SecretKey, rng: &mut ChaCha20Rng) -> PrimeKeys {
    let p = sk.params;
    let ntt = Ntt::new(p.n2);
    let glwe2 = PrimeGlweKey {
        polys: vec![sk.glwe2.as_ref().to_vec()],
    };
    let glwe3 = &sk.glwe3;
    let mut ksk = |from: &PrimeGlweKey, to: &PrimeGlweKey, base_log, levels, noise_log2| {
        SeededPrimeKeyswitchKey::generate(
            &ntt,
            from,
            to,
            Decomposer { base_log, levels },
            noise_log2,
            rng,
        )
    };
    let up = ksk(
        &glwe2,
        glwe3,
        p.up_base_log,
        p.up_levels,
        p.glwe3_noise_log2,
    );
    let trace = trace_elements(p.n2)
        .into_iter()
        .map(|g| {
            ksk(
                &glwe3.automorphism(g),
                glwe3,
                p.trace_base_log,
                p.trace_levels,
                p.glwe3_noise_log2,
            )
        })
        .collect();
    let down = ksk(
        glwe3,
        &glwe2,
        p.down_base_log,
        p.down_levels,
        p.glwe2_noise_log2,
    );
    PrimeKeys { up, trace, down }
}
