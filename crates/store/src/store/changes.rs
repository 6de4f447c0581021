//! Changes that do not come from a REGISTER: an operator's removals (admin API), a dead NAT
//! keep-alive's removal, and state brought back from a durable copy or another node.

use super::{write, Due, LocationStore, Record, Shard, Slot};
use crate::{Aor, Binding, Removed};
use herald_sip::uri::Uri;
use std::cmp::Reverse;
use std::time::Instant;

impl<S: Clone> LocationStore<S> {
    /// Removes the binding of `aor` whose contact is `contact` (the same text, or an equivalent
    /// URI per RFC 3261 §19.1.4), as an operator or a failed keep-alive asks. Journaled.
    pub fn remove_binding(&self, aor: &Aor, contact: &str, now: Instant) -> Removed {
        self.fault_in(aor, now);
        let now_s = self.secs(now);
        let hash = self.hash(aor.as_bytes());
        let slot = self.slot(hash);
        let mut guard = write(&slot.shard);
        let shard = &mut *guard;
        let Some(rec) = shard.table.find(hash, |r| r.key == *aor) else {
            return Removed { count: 0, ticket: self.journal(aor, &[], now_s) };
        };
        let wanted = Uri::parse(contact.as_bytes()).ok();
        let same = |b: &Binding<S>| {
            *b.contact == *contact
                || matches!((&wanted, Uri::parse(b.contact.as_bytes())), (Some(w), Ok(u)) if w.equivalent(&u))
        };
        let count = rec.bindings.iter().filter(|b| b.expires_at > now_s && same(b)).count();
        let kept: Vec<Binding<S>> = rec.bindings.iter().filter(|b| b.expires_at > now_s && !same(b)).cloned().collect();
        let ticket = self.journal(aor, &kept, now_s);
        put(self, shard, slot, aor, hash, kept);
        Removed { count, ticket }
    }

    /// Removes every binding of `aor` (admin API). Journaled.
    pub fn remove_aor(&self, aor: &Aor, now: Instant) -> Removed {
        let now_s = self.secs(now);
        let hash = self.hash(aor.as_bytes());
        let slot = self.slot(hash);
        let mut guard = write(&slot.shard);
        let shard = &mut *guard;
        let count = match shard.table.find_entry(hash, |r| r.key == *aor) {
            Ok(entry) => {
                let (rec, _) = entry.remove();
                shard.bindings -= rec.bindings.len();
                rec.bindings.iter().filter(|b| b.expires_at > now_s).count()
            }
            Err(_) => 0,
        };
        Removed { count, ticket: self.journal(aor, &[], now_s) }
    }

    /// Brings back the bindings of `aor` read from a durable copy at start-up, *unless* the AoR
    /// holds an unexpired binding: a REGISTER that arrived while the copy was being loaded is
    /// newer than anything stored, and unless the journal holds a newer change of it
    /// ([`crate::Journal::has_newer`]). Returns whether the bindings were inserted. Not journaled
    /// (they came from the journal's copy).
    ///
    /// `bindings` are oldest update first; each one's `expires_at` holds **the seconds it has
    /// left at `now`** (a durable copy keeps wall-clock times; the store reads no clock). Those
    /// with 0 left are dropped, and only the `max_bindings_per_aor` most recent are kept.
    pub fn restore(&self, aor: &Aor, bindings: Vec<Binding<S>>, now: Instant) -> bool {
        self.put_remaining(aor, bindings, now, false)
    }

    /// Sets the bindings of `aor` to `bindings` whatever it held (replication from another
    /// node; an empty list removes the AoR). `expires_at` as in [`Self::restore`]. Not
    /// journaled.
    pub fn replace(&self, aor: &Aor, bindings: Vec<Binding<S>>, now: Instant) {
        self.put_remaining(aor, bindings, now, true);
    }

    fn put_remaining(&self, aor: &Aor, mut bindings: Vec<Binding<S>>, now: Instant, overwrite: bool) -> bool {
        let now_s = self.secs(now);
        bindings.retain(|b| b.expires_at > 0);
        for b in &mut bindings {
            b.expires_at = now_s.saturating_add(b.expires_at);
        }
        let excess = bindings.len().saturating_sub(self.max_bindings);
        bindings.drain(..excess);
        let hash = self.hash(aor.as_bytes());
        let slot = self.slot(hash);
        let mut guard = write(&slot.shard);
        let shard = &mut *guard;
        if !overwrite {
            let held = shard.table.find(hash, |r| r.key == *aor);
            if held.is_some_and(|r| r.bindings.iter().any(|b| b.expires_at > now_s))
                || self.journal.get().is_some_and(|j| j.has_newer(aor))
            {
                return false;
            }
        }
        self.stored(&bindings);
        put(self, shard, slot, aor, hash, bindings);
        true
    }
}

/// Makes `bindings` the record of `aor` (none: no record), keeping the shard's count, the
/// heap invariant (one live entry per record, at its `next_check`) and the due times.
fn put<S: Clone>(
    store: &LocationStore<S>,
    shard: &mut Shard<S>,
    slot: &Slot<S>,
    aor: &Aor,
    hash: u64,
    bindings: Vec<Binding<S>>,
) {
    let Shard { table, heap, bindings: stored } = shard;
    let earliest = bindings.iter().map(|b| b.expires_at).min();
    *stored += bindings.len();
    match (table.find_entry(hash, |r| r.key == *aor), earliest) {
        (Ok(mut entry), Some(at)) => {
            let rec = entry.get_mut();
            *stored -= rec.bindings.len();
            rec.bindings = bindings;
            // As in `apply`: a later expiry keeps the current heap entry, which fires early and
            // reschedules; an earlier one needs its own.
            if at < rec.next_check {
                rec.next_check = at;
                heap.push(Reverse(Due { at, hash }));
            }
        }
        (Ok(entry), None) => {
            let (rec, _) = entry.remove();
            *stored -= rec.bindings.len();
        }
        (Err(_), Some(at)) => {
            let rec = Record { key: aor.clone(), hash, next_check: at, bindings };
            table.insert_unique(hash, Box::new(rec), |r| r.hash);
            heap.push(Reverse(Due { at, hash }));
        }
        (Err(_), None) => {}
    }
    store.publish_due(slot, shard);
}
