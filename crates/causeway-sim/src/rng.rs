//! Seeded randomness for the simulator: a ChaCha8 stream per concern (faults, network,
//! workload) so that changing one does not reshuffle the others, and a Zipf sampler.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// A seeded generator. ChaCha8 is specified, so runs replay across rand versions.
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// A stream derived from the run's seed and a fixed stream number.
    pub fn new(seed: u64, stream: u64) -> SimRng {
        let mixed =
            seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ stream.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        SimRng(ChaCha8Rng::seed_from_u64(mixed))
    }

    /// Uniform in `lo..hi` (returns `lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.0.random_range(lo..hi)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.0.random_bool(p.clamp(0.0, 1.0))
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        assert!(!items.is_empty(), "pick from an empty slice");
        items[self.range(0, items.len() as u64) as usize]
    }
}

/// Zipf distribution over `0..n` with exponent `s`, by inverse CDF over a precomputed table.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u32, s: f64) -> Zipf {
        assert!(n > 0, "zipf over an empty range");
        let weights: Vec<f64> = (1..=n).map(|k| 1.0 / f64::from(k).powf(s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut SimRng) -> u32 {
        let u = rng.unit();
        let i = self.cdf.partition_point(|c| *c < u);
        i.min(self.cdf.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_zipf_is_skewed() {
        let mut a = SimRng::new(7, 1);
        let mut b = SimRng::new(7, 1);
        let xs: Vec<u64> = (0..10).map(|_| a.range(0, 1000)).collect();
        let ys: Vec<u64> = (0..10).map(|_| b.range(0, 1000)).collect();
        assert_eq!(xs, ys);
        let zipf = Zipf::new(100, 1.0);
        let mut rng = SimRng::new(1, 2);
        let hits = (0..10_000).filter(|_| zipf.sample(&mut rng) == 0).count();
        // P(0) = 1/H(100) ≈ 0.19 for s = 1.
        assert!((1500..2400).contains(&hits), "key 0 drawn {hits} times");
    }
}
