//! The machine-speed yardstick: one tfhe-rs KS + PBS at PARAM_MESSAGE_2_CARRY_2_KS_PBS
//! (TUniform, 2^-128) parameters through core_crypto, against which detection is reported as a
//! number of PBS (`omr bench`, and the criterion bench `stages`).

use std::time::Instant;

use tfhe::core_crypto::prelude::*;

/// The yardstick's keys and input, made once.
pub struct Yardstick {
    fbsk: FourierLweBootstrapKeyOwned,
    ksk: LweKeyswitchKeyOwned<u64>,
    ct: LweCiphertextOwned<u64>,
    lut: GlweCiphertextOwned<u64>,
    ks_out: LweCiphertextOwned<u64>,
    out: LweCiphertextOwned<u64>,
}

impl Yardstick {
    /// Generate the keys (a few seconds).
    pub fn new() -> Yardstick {
        let mut seeder = new_seeder();
        let seeder = seeder.as_mut();
        let mut sgen = SecretRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed());
        let mut egen =
            EncryptionRandomGenerator::<DefaultRandomGenerator>::new(seeder.seed(), seeder);
        let small: LweSecretKeyOwned<u64> =
            allocate_and_generate_new_binary_lwe_secret_key(LweDimension(918), &mut sgen);
        let glwe: GlweSecretKeyOwned<u64> = allocate_and_generate_new_binary_glwe_secret_key(
            GlweDimension(1),
            PolynomialSize(2048),
            &mut sgen,
        );
        let big = glwe.clone().into_lwe_secret_key();
        let m = CiphertextModulus::new_native();
        let bsk = par_allocate_and_generate_new_lwe_bootstrap_key(
            &small,
            &glwe,
            DecompositionBaseLog(23),
            DecompositionLevelCount(1),
            DynamicDistribution::new_t_uniform(17),
            m,
            &mut egen,
        );
        let mut fbsk = FourierLweBootstrapKey::new(
            LweDimension(918),
            GlweSize(2),
            PolynomialSize(2048),
            DecompositionBaseLog(23),
            DecompositionLevelCount(1),
        );
        par_convert_standard_lwe_bootstrap_key_to_fourier(&bsk, &mut fbsk);
        let ksk = allocate_and_generate_new_lwe_keyswitch_key(
            &big,
            &small,
            DecompositionBaseLog(4),
            DecompositionLevelCount(4),
            DynamicDistribution::new_t_uniform(45),
            m,
            &mut egen,
        );
        let ct = allocate_and_encrypt_new_lwe_ciphertext(
            &big,
            Plaintext(3u64 << 60),
            DynamicDistribution::new_t_uniform(17),
            m,
            &mut egen,
        );
        let lut = generate_programmable_bootstrap_glwe_lut(
            PolynomialSize(2048),
            GlweSize(2),
            16,
            m,
            1u64 << 59,
            |x: u64| x,
        );
        Yardstick {
            fbsk,
            ksk,
            ct,
            lut,
            ks_out: LweCiphertext::new(0u64, LweSize(919), m),
            out: LweCiphertext::new(0u64, LweSize(2049), m),
        }
    }

    /// Milliseconds of one KS + PBS: the mean of `runs`.
    pub fn time_ms(&mut self, runs: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..runs {
            self.run();
        }
        start.elapsed().as_secs_f64() * 1e3 / runs.max(1) as f64
    }

    /// One keyswitch and one programmable bootstrap.
    pub fn run(&mut self) {
        keyswitch_lwe_ciphertext(&self.ksk, &self.ct, &mut self.ks_out);
        programmable_bootstrap_lwe_ciphertext(&self.ks_out, &mut self.out, &self.lut, &self.fbsk);
    }
}

impl std::fmt::Debug for Yardstick {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Yardstick").finish_non_exhaustive()
    }
}

impl Default for Yardstick {
    fn default() -> Self {
        Self::new()
    }
}

/// Milliseconds of one KS + PBS (the mean of 10 after the keys are made).
pub fn reference_pbs_ms() -> f64 {
    Yardstick::new().time_ms(10)
}
