//! The simulator's only randomness: SplitMix64 (Steele, Lea, Flood 2014), seeded, so that the
//! same seed makes the same packet-loss decisions on every run and every machine.

/// A small seeded PRNG. Not for secrets: herald's own keys come from its [`herald_core::Seed`].
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.next_u64() % 1000 < u64::from(per_mille)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b, mut c) = (SimRng::new(5), SimRng::new(5), SimRng::new(6));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..8).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(xs, (0..8).map(|_| c.next_u64()).collect::<Vec<_>>());
    }

    #[test]
    fn chance_is_roughly_the_rate() {
        let mut r = SimRng::new(1);
        let hits = (0..10_000).filter(|_| r.chance(200)).count();
        assert!((1_800..2_200).contains(&hits), "{hits}");
    }
}
