//! The engine's one source of unpredictability (quinn-proto's `EndpointConfig::rng_seed`).
//!
//! Branches (RFC 3261 §8.1.1.7, §16.6 step 8) and the tags herald puts in its own responses
//! (§19.3) must be unguessable by peers, or a peer that saw one could forge responses to the
//! next; the location store's hash must be secret, or peers choosing AoRs could flood one
//! bucket. All of that is keyed SipHash-1-3 (the algorithm behind std's `RandomState`) with keys
//! derived from one [`Seed`]: the runtime draws a random seed at start-up, tests and the
//! simulator fix one, and the same seed with the same inputs gives the same outputs, bit for
//! bit (a fuzz crash replays).

use siphasher::sip::SipHasher13;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};

/// 128 bits that key every hash the core must keep secret from peers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Seed([u64; 2]);

impl Seed {
    /// A fixed seed: for tests, the simulator and replaying a fuzz input.
    pub const fn fixed(n: u64) -> Seed {
        // One number spread over both keys ("heraldse" in ASCII keeps them apart for n = 0).
        Seed([n, n ^ 0x6865_7261_6c64_7365])
    }

    /// A seed from the process's randomness (std's `RandomState`, itself seeded from the
    /// operating system): what the runtime uses unless a configuration fixes one.
    pub fn random() -> Seed {
        let r = RandomState::new();
        Seed([r.hash_one(0u8), r.hash_one(1u8)])
    }

    /// An independent seed for one purpose (`label`) and one instance (`index`): SipHash as a
    /// PRF keyed with this seed, so knowing a derived seed tells nothing of this one or of its
    /// siblings.
    pub fn derive(self, label: &str, index: u64) -> Seed {
        let word = |half: u8| {
            let mut h = self.hasher();
            label.hash(&mut h);
            index.hash(&mut h);
            half.hash(&mut h);
            h.finish()
        };
        Seed([word(0), word(1)])
    }

    /// The two SipHash keys.
    pub fn keys(self) -> [u64; 2] {
        self.0
    }

    /// A SipHash-1-3 hasher keyed with this seed.
    pub fn hasher(self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.0[0], self.0[1])
    }

    /// Keyed hash of one value (`BuildHasher::hash_one` with this seed's keys).
    pub fn hash_one<T: Hash>(self, value: T) -> u64 {
        self.build().hash_one(value)
    }

    /// A `BuildHasher` for hash tables that peers fill.
    pub fn build(self) -> SeededState {
        SeededState(self)
    }
}

/// The seed's value is the secret that keeps branches unguessable: never in logs.
impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

/// [`Seed`] as a `BuildHasher` (SipHash-1-3, like std's `RandomState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeededState(Seed);

impl BuildHasher for SeededState {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        self.0.hasher()
    }
}

/// A `BuildHasher` for the hash tables peers fill on every message (transactions by branch):
/// foldhash, about a tenth of SipHash's cost on these short keys (SipHash was ~11k
/// instructions per proxied call, issue 21). Its secret is two-part: the process's random
/// shared seed (foldhash's `global_random`) and a per-table seed derived from the engine's
/// [`Seed`], so a peer can neither precompute collisions nor carry them between tables. A
/// table's layout therefore differs between processes with the same seed; nothing iterates
/// these tables, so what herald does with a given input stays the same. SipHash stays where a
/// hash is a secret value others see (tags, branches: [`Seed::hash_one`], [`SeededState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableState(u64);

impl Seed {
    /// The [`TableState`] of the tables keyed with this seed.
    pub fn table_state(self) -> TableState {
        TableState(self.0[0] ^ self.0[1].rotate_left(32))
    }
}

impl BuildHasher for TableState {
    type Hasher = foldhash::fast::FoldHasher<'static>;

    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FoldHasher::with_seed(self.0, foldhash::SharedSeed::global_random())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_states_differ_by_derived_seed_and_hash_consistently() {
        let a = Seed::fixed(1).derive("client transactions", 0).table_state();
        let b = Seed::fixed(1).derive("server transactions", 0).table_state();
        assert_eq!(a.hash_one("z9hG4bK1"), a.hash_one("z9hG4bK1"));
        assert_ne!(a.hash_one("z9hG4bK1"), a.hash_one("z9hG4bK2"));
        assert_ne!(a.hash_one("z9hG4bK1"), b.hash_one("z9hG4bK1"));
    }

    #[test]
    fn a_fixed_seed_gives_the_same_keys_and_hashes_every_time() {
        let a = Seed::fixed(7);
        assert_eq!(a.derive("branch", 3).keys(), Seed::fixed(7).derive("branch", 3).keys());
        assert_eq!(a.hash_one("x"), Seed::fixed(7).hash_one("x"));
        assert_ne!(a.hash_one("x"), Seed::fixed(8).hash_one("x"));
    }

    #[test]
    fn derived_seeds_differ_by_label_and_index() {
        let s = Seed::fixed(1);
        let keys = [s.derive("a", 0), s.derive("a", 1), s.derive("b", 0), s].map(Seed::keys);
        for i in 0..keys.len() {
            for j in i + 1..keys.len() {
                assert_ne!(keys[i], keys[j], "{i} vs {j}");
            }
        }
    }

    #[test]
    fn random_seeds_differ_and_do_not_print() {
        assert_ne!(Seed::random().keys(), Seed::random().keys());
        assert_eq!(format!("{:?}", Seed::fixed(1)), "Seed(..)");
    }

    #[test]
    fn the_state_hashes_like_the_seed() {
        let s = Seed::fixed(9);
        assert_eq!(s.build().hash_one(b"abc"), s.hash_one(b"abc"));
    }
}
