//! The discrete Gaussian that LWE secrets and errors come from: a cumulative distribution table
//! over [-T, T] (T = 12σ, beyond which the mass is below 2^-100), sampled by comparing a 64-bit
//! uniform word against every entry, so the time does not depend on the value drawn.

use rand::RngCore;

/// A table-based sampler of the discrete Gaussian of standard deviation σ centred on 0.
#[derive(Debug, Clone)]
pub struct Gaussian {
    /// cdf[i] = round(2^64 · Pr[X ≤ i - T]) for i in 0..2T (the last point is implied).
    cdf: Vec<u64>,
    tail: i32,
}

impl Gaussian {
    /// The sampler for standard deviation `sigma` (the width parameter s = σ√(2π)).
    pub fn new(sigma: f64) -> Gaussian {
        let tail = (12.0 * sigma).ceil() as i32;
        let weight = |x: i32| (-(f64::from(x) * f64::from(x)) / (2.0 * sigma * sigma)).exp();
        let total: f64 = (-tail..=tail).map(weight).sum();
        let mut cdf = Vec::with_capacity(2 * tail as usize);
        let mut acc = 0.0;
        for x in -tail..tail {
            acc += weight(x) / total;
            // 2^64 · acc, saturating just below 2^64.
            cdf.push((acc * 18_446_744_073_709_551_616.0).min(u64::MAX as f64) as u64);
        }
        Gaussian { cdf, tail }
    }

    /// One sample.
    pub fn sample(&self, rng: &mut impl RngCore) -> i32 {
        let r = rng.next_u64();
        let below: u32 = self.cdf.iter().map(|&c| u32::from(r >= c)).sum();
        below as i32 - self.tail
    }

    /// Fills `out` with samples reduced modulo 2^32.
    pub fn fill(&self, rng: &mut impl RngCore, out: &mut [u32]) {
        for x in out {
            *x = self.sample(rng) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn moments_match_sigma() {
        let g = Gaussian::new(11.0);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let n = 200_000;
        let samples: Vec<f64> = (0..n).map(|_| f64::from(g.sample(&mut rng))).collect();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = samples.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        // Standard errors: 11/√n ≈ 0.025 for the mean, ≈ 0.35 for the variance (121).
        assert!(mean.abs() < 0.15, "mean {mean}");
        assert!((var - 121.0).abs() < 2.5, "variance {var}");
    }

    #[test]
    fn histogram_matches_the_density() {
        let sigma = 3.0;
        let g = Gaussian::new(sigma);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
        let n = 100_000;
        let mut counts = [0u32; 13];
        for _ in 0..n {
            let x = g.sample(&mut rng);
            if (-6..=6).contains(&x) {
                counts[(x + 6) as usize] += 1;
            }
        }
        let total: f64 = (-40..=40)
            .map(|x: i32| (-(f64::from(x * x)) / (2.0 * sigma * sigma)).exp())
            .sum();
        // Chi-square over the 13 central values, 12 degrees of freedom: the 99.99% point is 39.
        let chi2: f64 = (-6..=6)
            .map(|x: i32| {
                let expected =
                    n as f64 * (-(f64::from(x * x)) / (2.0 * sigma * sigma)).exp() / total;
                let got = f64::from(counts[(x + 6) as usize]);
                (got - expected) * (got - expected) / expected
            })
            .sum();
        assert!(chi2 < 39.0, "chi-square {chi2}, counts {counts:?}");
    }

    #[test]
    fn samples_stay_in_the_table() {
        let g = Gaussian::new(11.0);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        for _ in 0..10_000 {
            assert!(g.sample(&mut rng).abs() <= 132);
        }
    }
}
