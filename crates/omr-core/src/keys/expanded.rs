//! The detection key expanded in server memory (Fourier bootstrapping keys, the LWE keyswitch
//! key, NTT-domain prime-modulus keys, the digest layout) and the expansion from the uploaded
//! form.

use std::time::{Duration, Instant};

use tfhe::core_crypto::commons::math::random::{CompressionSeed, Seed};
use tfhe::core_crypto::prelude::*;

use super::compressed::CompressedDetectionKey;
use super::lwe_ksk::LweKsk;
use super::seeded::{native, SeededNative};
use crate::layout::Layout;
use crate::params::ParamSet;
use crate::prime::{Ntt, PrimeKeyswitchKey};

/// The detection key expanded in server memory: Fourier bootstrapping keys, the LWE keyswitch
/// key and the NTT-domain prime-modulus keys. Immutable and `Sync`: share it across threads.
///
/// Its methods live with what they do: `detect` in `detect.rs`, `fold` in
/// `digest/accumulator.rs`, `digest` in `digest/key.rs`.
pub struct DetectionKey {
    pub(crate) params: &'static ParamSet,
    pub(crate) kbar: usize,
    pub(crate) prf_seed: [u8; 32],
    pub(crate) layout: Layout,
    pub(crate) bsk1: FourierLweBootstrapKeyOwned,
    pub(crate) ksk: LweKsk,
    pub(crate) bsk2: FourierLweBootstrapKeyOwned,
    pub(crate) up: PrimeKeyswitchKey,
    pub(crate) trace: Vec<PrimeKeyswitchKey>,
    /// The down keyswitching key (k3 → 1) of the digest key.
    pub(crate) down: PrimeKeyswitchKey,
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

impl DetectionKey {
    pub fn params(&self) -> &'static ParamSet {
        self.params
    }

    pub fn kbar(&self) -> usize {
        self.kbar
    }

    /// The digest layout of this key.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Assemble a key from its containers; `primes` holds the prime-modulus keys in order: up,
    /// one per trace element, down.
    pub(crate) fn from_parts(
        params: &'static ParamSet,
        kbar: usize,
        prf_seed: [u8; 32],
        [bsk1, bsk2]: [FourierLweBootstrapKeyOwned; 2],
        ksk: LweKsk,
        mut primes: Vec<PrimeKeyswitchKey>,
    ) -> Self {
        let down = primes.pop().expect("up, the trace keys and down");
        let trace = primes.split_off(1);
        let up = primes.pop().expect("up, the trace keys and down");
        DetectionKey {
            params,
            kbar,
            prf_seed,
            layout: Layout::new(params, kbar),
            bsk1,
            ksk,
            bsk2,
            up,
            trace,
            down,
            ntt: Ntt::new(params.n2),
        }
    }

    /// Bytes held by the expanded key (what one registered key costs in server RAM).
    pub fn memory_bytes(&self) -> usize {
        let c64 = 16;
        self.bsk1.as_view().data().len() * c64
            + self.bsk2.as_view().data().len() * c64
            + self.ksk.memory_bytes()
            + (self.up.rows.len()
                + self.down.rows.len()
                + self.trace.iter().map(|t| t.rows.len()).sum::<usize>())
                * 8
    }
}

/// Where the time of one [`CompressedDetectionKey::expand_timed`] went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExpandTimes {
    /// Regenerating the seeded masks of both bootstrapping keys and the LWE keyswitch key.
    pub masks: Duration,
    /// Converting both bootstrapping keys to the Fourier domain.
    pub fourier: Duration,
    /// The prime-modulus keys: masks regenerated (ChaCha20) and NTT-transformed.
    pub prime: Duration,
}

/// Regenerate a seeded bootstrapping key's masks.
fn decompress_bsk(
    k: &SeededNative,
    n: usize,
    base_log: usize,
    levels: usize,
) -> LweBootstrapKeyOwned<u64> {
    SeededLweBootstrapKey::from_container(
        k.bodies(),
        GlweSize(2),
        PolynomialSize(n),
        DecompositionBaseLog(base_log),
        DecompositionLevelCount(levels),
        CompressionSeed::from(Seed(k.seed)),
        native(),
    )
    .par_decompress_into_lwe_bootstrap_key()
}

/// Convert a bootstrapping key to the Fourier domain.
fn to_fourier(bsk: &LweBootstrapKeyOwned<u64>) -> FourierLweBootstrapKeyOwned {
    let mut f = FourierLweBootstrapKey::new(
        bsk.input_lwe_dimension(),
        bsk.glwe_size(),
        bsk.polynomial_size(),
        bsk.decomposition_base_log(),
        bsk.decomposition_level_count(),
    );
    par_convert_standard_lwe_bootstrap_key_to_fourier(bsk, &mut f);
    f
}

impl CompressedDetectionKey {
    /// Expand into the server's in-memory form (seeds regenerated, Fourier/NTT conversions).
    pub fn expand(&self) -> DetectionKey {
        self.expand_timed().0
    }

    /// [`expand`](Self::expand), also returning where the time went.
    pub fn expand_timed(&self) -> (DetectionKey, ExpandTimes) {
        let p = self.params;
        let mut times = ExpandTimes::default();
        // Each bootstrapping key goes to the Fourier domain before the next is decompressed, so
        // that only one standard-domain key is held at a time.
        let mut timed_bsk = |k: &SeededNative, n: usize, base_log: usize, levels: usize| {
            if k.bodies_hi.is_empty() {
                // No key of its own (level 1 on the level-2 key): an empty one.
                return FourierLweBootstrapKey::new(
                    LweDimension(0),
                    GlweSize(2),
                    PolynomialSize(n),
                    DecompositionBaseLog(base_log),
                    DecompositionLevelCount(levels),
                );
            }
            let t = Instant::now();
            let bsk = decompress_bsk(k, n, base_log, levels);
            times.masks += t.elapsed();
            let t = Instant::now();
            let f = to_fourier(&bsk);
            times.fourier += t.elapsed();
            f
        };
        let bsk1 = timed_bsk(&self.bsk1, p.n1, p.bsk1_base_log, p.bsk1_levels);
        let bsk2 = timed_bsk(&self.bsk2, p.n2, p.bsk2_base_log, p.bsk2_levels);
        let t = Instant::now();
        let ksk = LweKsk::expand(p, &self.ksk);
        times.masks += t.elapsed();
        let t = Instant::now();
        let ntt = Ntt::new(p.n2);
        let primes = std::iter::once(&self.up)
            .chain(&self.trace)
            .chain([&self.down])
            .map(|k| k.expand(&ntt))
            .collect();
        times.prime = t.elapsed();
        let fourier = [bsk1, bsk2];
        let dk = DetectionKey::from_parts(p, self.kbar, self.prf_seed, fourier, ksk, primes);
        (dk, times)
    }
}
