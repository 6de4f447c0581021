//! Incremental expiry of the location store: each shard keeps a heap of due times, each slot
//! publishes its earliest, and the store its earliest of all, so that an `expire` call with
//! nothing due is one atomic load and one with work touches only what expires (issue 21: no
//! full sweep, the cost seed 002 warns against).

use super::{write, Due, LocationStore, Shard, Slot};
use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl<S: Clone> LocationStore<S> {
    /// When [`Self::expire`] next has work: the earliest expiry (or stale heap entry) stored,
    /// `None` when nothing is stored. Never later than the truth; earlier at times (a binding
    /// refreshed or removed since), which costs one `expire` call that finds little or nothing.
    pub fn next_expiry(&self) -> Option<Instant> {
        match self.earliest.load(Ordering::SeqCst) {
            u32::MAX => None,
            at => self.epoch.get().map(|e| *e + std::time::Duration::from_secs(at.into())),
        }
    }

    /// Publishes `shard`'s earliest heap entry as its slot's due time and, when it is earlier
    /// than the store's, lowers that and rings the alarm. Called under the shard's write lock.
    /// SeqCst, with the loads in `expire`: a pass that reset `earliest` reads every slot after
    /// the reset, so a change is either seen by the pass or lowers `earliest` after it.
    pub(super) fn publish_due(&self, slot: &Slot<S>, shard: &Shard<S>) {
        let at = shard.heap.peek().map_or(u32::MAX, |d| d.0.at);
        slot.next_due.store(at, Ordering::SeqCst);
        // A load first: the usual change (a refresh) expires later and writes nothing shared.
        if at < self.earliest.load(Ordering::SeqCst) && at < self.earliest.fetch_min(at, Ordering::SeqCst) {
            if let (Some(alarm), Some(epoch)) = (self.alarm.get(), self.epoch.get()) {
                alarm(*epoch + std::time::Duration::from_secs(at.into()));
            }
        }
    }

    /// Removes at most `budget` expired bindings, visiting shards round-robin from where the
    /// previous call stopped, and returns how many it removed. Before [`Self::next_expiry`] it
    /// returns at once (one atomic load: nothing is visited, no lock taken). When something is
    /// due, each shard pops its heap only while the top is due, so the work is proportional to
    /// what expires, never to the size of the store; shards with nothing due are skipped
    /// without taking their lock (one load each, which also recomputes the earliest due time).
    /// Meant to be called at [`Self::next_expiry`], again at once while it returns `budget`.
    pub fn expire(&self, now: Instant, budget: usize) -> usize {
        let now_s = self.secs(now);
        if self.earliest.load(Ordering::SeqCst) > now_s {
            return 0;
        }
        // Recomputed below from every slot; a change made meanwhile lowers it again.
        self.earliest.store(u32::MAX, Ordering::SeqCst);
        let n = self.slots.len();
        let start = self.cursor.load(Ordering::Relaxed);
        let mut removed = 0;
        let mut earliest = u32::MAX;
        let mut stopped = None;
        for k in 0..n {
            let i = (start + k) & (n - 1);
            let slot = &self.slots[i];
            let mut due = slot.next_due.load(Ordering::SeqCst);
            if due <= now_s {
                if removed < budget {
                    #[cfg(test)]
                    self.expiry_locks.fetch_add(1, Ordering::Relaxed);
                    let mut shard = write(&slot.shard);
                    removed += self.expire_shard(&mut shard, now_s, budget - removed);
                    due = shard.heap.peek().map_or(u32::MAX, |d| d.0.at);
                    slot.next_due.store(due, Ordering::SeqCst);
                }
                // Out of budget, or this shard used it up: the next call starts here.
                if removed >= budget && stopped.is_none() {
                    stopped = Some(i);
                }
            }
            earliest = earliest.min(due);
        }
        self.earliest.fetch_min(earliest, Ordering::SeqCst);
        self.cursor.store(stopped.unwrap_or(start), Ordering::Relaxed);
        removed
    }

    fn expire_shard(&self, shard: &mut Shard<S>, now_s: u32, budget: usize) -> usize {
        let Shard { table, heap, bindings: stored } = shard;
        let mut removed = 0;
        // Stale heap entries cost a pop and a probe each; bound them like removals.
        let mut stale_left = budget.max(1);
        while removed < budget {
            let Some(&Reverse(due)) = heap.peek() else { break };
            if due.at > now_s {
                break;
            }
            heap.pop();
            let Ok(mut entry) = table.find_entry(due.hash, |r| r.next_check == due.at && r.hash == due.hash) else {
                stale_left -= 1;
                if stale_left == 0 {
                    break;
                }
                continue;
            };
            let rec = entry.get_mut();
            let before = rec.bindings.len();
            let mut allowed = budget - removed;
            rec.bindings.retain(|b| {
                let drop = b.expires_at <= now_s && allowed > 0;
                allowed -= usize::from(drop);
                !drop
            });
            let gone = before - rec.bindings.len();
            removed += gone;
            *stored -= gone;
            match rec.bindings.iter().map(|b| b.expires_at).min() {
                Some(at) => {
                    rec.next_check = at;
                    heap.push(Reverse(Due { at, hash: due.hash }));
                }
                None => {
                    entry.remove();
                }
            }
        }
        // Give memory back after a mass expiry; growth stays automatic.
        if heap.capacity() > 64 && heap.len() < heap.capacity() / 4 {
            heap.shrink_to(heap.len() * 2);
        }
        if table.capacity() > 64 && table.len() < table.capacity() / 4 {
            table.shrink_to(table.len() * 2, |r| r.hash);
        }
        removed
    }
}
