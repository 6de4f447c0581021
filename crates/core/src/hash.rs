//! FNV-1a: a small, deterministic hash for values that must agree across processes and runs
//! (shard selection, tags of local answers). Not for hash tables fed by attackers.
//!
//! [`IdMap`]: hash tables keyed by numbers herald hands out itself (transaction ids, DNS
//! tokens), which no peer chooses. They need no keyed hash: std's SipHash cost about 20k
//! instructions per call through the proxy (callgrind), for keys that are counters.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hash map keyed by herald's own sequential ids.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of one integer: the product's high bits (the table's tag) mix every bit
/// of the id, and consecutive ids differ in the low bits (the table's bucket index).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only integer keys are meant; anything else still hashes correctly, if slowly.
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// Hashes several parts, separated so that ("ab","c") and ("a","bc") differ.
pub fn fnv1a_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_separation() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a_parts([&b"ab"[..], b"c"]), fnv1a_parts([&b"a"[..], b"bc"]));
    }

    #[test]
    fn id_maps_spread_consecutive_ids_over_buckets_and_tags() {
        let hash = |n: u64| {
            let mut h = IdHasher::default();
            h.write_u64(n);
            h.finish()
        };
        // hashbrown takes the bucket from the low bits and a 7-bit tag from the top ones.
        let buckets: std::collections::HashSet<u64> = (0..1024).map(|n| hash(n) & 1023).collect();
        assert_eq!(buckets.len(), 1024, "consecutive ids never share a bucket of a 1024-slot table");
        let tags: std::collections::HashSet<u64> = (0..1024).map(|n| hash(n) >> 57).collect();
        assert_eq!(tags.len(), 128, "every tag value is used");
        let mut m: IdMap<u64, u64> = IdMap::default();
        for n in 0..10_000 {
            m.insert(n, n * 2);
        }
        assert!((0..10_000).all(|n| m.get(&n) == Some(&(n * 2))));
    }
}
