//! A bounded table of entries that expire (bans, locks, known pairs), with an index by expiry so
//! that lifting what expired costs O(log n) per entry lifted and nothing when nothing did: every
//! lift is seen when it happens (and logged), not whenever the key shows up again.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::Instant;

#[derive(Debug)]
pub(super) struct Expiring<K, V> {
    capacity: usize,
    entries: HashMap<K, (Instant, V)>,
    by_expiry: BTreeSet<(Instant, K)>,
}

impl<K: Hash + Eq + Ord + Copy, V> Expiring<K, V> {
    pub(super) fn new(capacity: usize) -> Expiring<K, V> {
        Expiring { capacity, entries: HashMap::new(), by_expiry: BTreeSet::new() }
    }

    /// The entry of `key` if it has not expired by `now`.
    pub(super) fn get(&self, key: &K, now: Instant) -> Option<&V> {
        self.entries.get(key).filter(|(until, _)| *until > now).map(|(_, v)| v)
    }

    /// When `key`'s entry expires (expired or not).
    pub(super) fn expiry(&self, key: &K) -> Option<Instant> {
        self.entries.get(key).map(|(until, _)| *until)
    }

    /// Inserts or replaces `key`'s entry until `until`. False when the table is full of live
    /// entries (call [`Expiring::lift_expired`] first to make room).
    pub(super) fn insert(&mut self, key: K, until: Instant, value: V) -> bool {
        if let Some((old, _)) = self.entries.get(&key) {
            self.by_expiry.remove(&(*old, key));
        } else if self.entries.len() >= self.capacity {
            return false;
        }
        self.entries.insert(key, (until, value));
        self.by_expiry.insert((until, key));
        true
    }

    /// Inserts or replaces `key`'s entry; when the table is full of live entries, the one that
    /// expires first makes room. For tables where forgetting an old entry is safer than not
    /// recording a new one (an attacker filling the table must not switch a limit off).
    pub(super) fn insert_evicting(&mut self, key: K, until: Instant, value: V) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            if let Some((_, first)) = self.by_expiry.pop_first() {
                self.entries.remove(&first);
            }
        }
        self.insert(key, until, value);
    }

    pub(super) fn remove(&mut self, key: &K) -> Option<V> {
        let (until, v) = self.entries.remove(key)?;
        self.by_expiry.remove(&(until, *key));
        Some(v)
    }

    /// Removes the entries expired by `now`, handing each to `lifted`.
    pub(super) fn lift_expired(&mut self, now: Instant, mut lifted: impl FnMut(K, V)) {
        while let Some(&(until, key)) = self.by_expiry.first() {
            if until > now {
                break;
            }
            self.by_expiry.pop_first();
            if let Some((_, v)) = self.entries.remove(&key) {
                lifted(key, v);
            }
        }
    }

    /// When the first entry expires.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.by_expiry.first().map(|(until, _)| *until)
    }

    /// Entries live at `now`.
    pub(super) fn live(&self, now: Instant) -> usize {
        self.by_expiry.iter().rev().take_while(|(until, _)| *until > now).count()
    }

    /// The entries live at `now` with their expiry, latest expiry first (the admin listing).
    pub(super) fn iter_live(&self, now: Instant) -> impl Iterator<Item = (&K, Instant, &V)> + '_ {
        self.by_expiry
            .iter()
            .rev()
            .take_while(move |(until, _)| *until > now)
            .filter_map(|(until, k)| self.entries.get(k).map(|(_, v)| (k, *until, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_expire_in_order_and_are_bounded() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut e = Expiring::new(2);
        assert!(e.insert(1u32, t0 + s(10), "a"));
        assert!(e.insert(2, t0 + s(5), "b"));
        assert!(!e.insert(3, t0 + s(5), "c"), "full");
        assert!(e.insert(1, t0 + s(20), "a2"), "replacing needs no room");
        assert_eq!(e.get(&2, t0 + s(4)), Some(&"b"));
        assert_eq!(e.expiry(&2), Some(t0 + s(5)));
        assert_eq!(e.get(&2, t0 + s(5)), None, "expired at its instant");
        assert_eq!(e.live(t0 + s(6)), 1);
        let mut lifted = Vec::new();
        e.lift_expired(t0 + s(6), |k, v| lifted.push((k, v)));
        assert_eq!(lifted, [(2, "b")]);
        assert!(e.insert(3, t0 + s(7), "c"), "room again");
        assert_eq!(e.remove(&3), Some("c"));
        lifted.clear();
        e.lift_expired(t0 + s(100), |k, v| lifted.push((k, v)));
        assert_eq!(lifted, [(1, "a2")], "the replaced expiry is the one that counts");
        assert_eq!(e.live(t0), 0);
    }

    #[test]
    fn insert_evicting_drops_the_first_to_expire() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut e = Expiring::new(2);
        e.insert_evicting(1u32, t0 + s(10), ());
        e.insert_evicting(2, t0 + s(5), ());
        e.insert_evicting(3, t0 + s(7), ());
        assert_eq!((e.get(&1, t0), e.get(&2, t0), e.get(&3, t0)), (Some(&()), None, Some(&())));
        e.insert_evicting(3, t0 + s(20), ());
        assert_eq!(e.live(t0), 2, "replacing evicts nothing");
    }
}
