//! Visiting every AoR a page at a time (admin listings, NAT keep-alive rounds, resyncs between
//! nodes) without stalling the workers: each page holds one shard's *read* lock, which only
//! delays writers of that shard, and for no longer than the page takes.

use super::{read, LocationStore, Record};
use crate::{Aor, AorBindings, ScanCursor};
use std::time::Instant;

impl<S: Clone> LocationStore<S> {
    /// Calls `f` with the bindings `aor` holds now (none: an empty view), under its shard's read
    /// lock: how a durable copy's writer reads the state it writes (the journal only noted that
    /// the AoR changed). Never reads a [`crate::Backfill`].
    pub fn read_bindings<R>(&self, aor: &Aor, now: Instant, f: impl FnOnce(&AorBindings<'_, S>) -> R) -> R {
        let now_s = self.secs(now);
        let hash = self.hash(aor.as_bytes());
        let shard = read(&self.slot(hash).shard);
        let bindings = shard.table.find(hash, |r| r.key == *aor).map_or(&[][..], |r| &r.bindings[..]);
        f(&AorBindings { aor, bindings, now_s })
    }

    /// Calls `f` for up to `max_aors` AoRs (at least one, when any is left) from `cursor` on,
    /// under the read lock of their shard, and returns where to resume, or `None` when every
    /// shard has been visited. `f` runs with a lock held: copy what you need and return.
    ///
    /// A page costs a pass over the pointers of each shard it touches (to pick the next hashes
    /// in order), not over the bindings: with the default 256 shards and 1,000,000 AoRs that
    /// is ~4,000 pointers per page.
    pub fn scan(
        &self,
        cursor: ScanCursor,
        max_aors: usize,
        now: Instant,
        mut f: impl FnMut(&AorBindings<'_, S>),
    ) -> Option<ScanCursor> {
        let now_s = self.secs(now);
        let mut budget = max_aors.max(1);
        let mut cursor = cursor;
        while cursor.shard < self.slots.len() {
            let shard = read(&self.slots[cursor.shard].shard);
            let mut next: Vec<&Record<S>> =
                shard.table.iter().map(|r| &**r).filter(|r| cursor.after.is_none_or(|h| r.hash > h)).collect();
            let more = next.len() > budget;
            if more {
                next.select_nth_unstable_by_key(budget, |r| r.hash);
                next.truncate(budget);
            }
            next.sort_unstable_by_key(|r| r.hash);
            for rec in &next {
                f(&AorBindings { aor: &rec.key, bindings: &rec.bindings, now_s });
            }
            budget -= next.len();
            if more || (budget == 0 && cursor.shard + 1 < self.slots.len()) {
                // Two keys with one 64-bit hash in one shard would make the second be skipped
                // (keyed SipHash: about 2^-64 per pair).
                match next.last() {
                    Some(last) if more => return Some(ScanCursor { shard: cursor.shard, after: Some(last.hash) }),
                    _ => return Some(ScanCursor { shard: cursor.shard + 1, after: None }),
                }
            }
            cursor = ScanCursor { shard: cursor.shard + 1, after: None };
        }
        None
    }
}
