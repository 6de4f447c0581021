//! The sharded location store and its incremental expiry.

use crate::journal::{AorBindings, Backfill, Journal, Ticket};
use crate::ordered::OrderedBindings;
use crate::plan::Plan;
use crate::{Aor, Applied, Binding, Removed, StoreError, Update};
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use siphasher::sip::SipHasher13;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

mod changes;
mod expiry;
mod scan;

/// Tuning that has a sensible default; nothing here sizes a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Most bindings one address-of-record may hold (policy: RFC 3261 sets no limit). A
    /// REGISTER that would exceed it fails with [`StoreError::TooManyBindings`].
    pub max_bindings_per_aor: usize,
    /// Number of shards, rounded up to a power of two. More shards than worker threads makes
    /// two workers rarely meet on one lock; an empty shard costs one cache-line-aligned slot
    /// (256 shards: tens of KiB).
    pub shards: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { max_bindings_per_aor: 20, shards: 256 }
    }
}

/// The location service: address-of-record → bindings. See the crate documentation.
pub struct LocationStore<S> {
    slots: Box<[Slot<S>]>,
    mask: u64,
    /// SipHash-1-3 keys of the shard and table hash: secret, since peers choose the AoRs (hash
    /// flooding); fixed by a seeded engine so that a run replays exactly.
    hash_keys: [u64; 2],
    /// Times are stored as seconds since this instant: the first `now` the store is given.
    epoch: OnceLock<Instant>,
    /// Next shard [`LocationStore::expire`] looks at.
    cursor: AtomicUsize,
    /// No slot's `next_due` is earlier than this (seconds since `epoch`; `u32::MAX`: nothing
    /// stored): lowered by every change that stores an earlier expiry, recomputed by the
    /// `expire` pass that finds something due. While it lies ahead, `expire` costs one load.
    earliest: AtomicU32,
    /// Told when `earliest` moves earlier (see [`LocationStore::set_expiry_alarm`]).
    alarm: OnceLock<ExpiryAlarm>,
    /// Told of an AoR's bindings after a change stored some (see
    /// [`LocationStore::set_binding_alarm`]).
    stored_alarm: OnceLock<BindingAlarm<S>>,
    /// Shard locks `expire` took, for the tests that show its work follows what expires.
    #[cfg(test)]
    pub(crate) expiry_locks: AtomicUsize,
    max_bindings: usize,
    /// Told of every change (see [`Journal`]); set once, before serving.
    journal: OnceLock<Arc<dyn Journal<S>>>,
    /// Reads AoRs not yet loaded from a durable copy (see [`Backfill`]); set once.
    backfill: OnceLock<Arc<dyn Backfill<S>>>,
}

/// Called with the instant of the store's new earliest expiry, under the lock of the shard that
/// stored it: it must not call back into the store.
pub type ExpiryAlarm = Box<dyn Fn(Instant) + Send + Sync>;

/// Called with an AoR's bindings after a change that stored some, under the lock of its shard:
/// it must not call back into the store.
pub type BindingAlarm<S> = Box<dyn Fn(&[Binding<S>]) + Send + Sync>;

/// One shard and, readable without its lock, the earliest time its expiry heap holds, so that
/// `expire` skips shards with nothing due. Cache-line aligned: slots are written by different
/// threads.
#[repr(align(64))]
struct Slot<S> {
    shard: RwLock<Shard<S>>,
    next_due: AtomicU32,
}

struct Shard<S> {
    /// Boxed records: a table slot is one pointer, so the half-empty slots a growing table
    /// always has cost 8 bytes each, not a whole record.
    table: HashTable<Box<Record<S>>>,
    /// When each record must be looked at next. Entries are not removed when a record changes
    /// ("lazy deletion"): an entry whose time differs from its record's `next_check`, or whose
    /// record is gone, is skipped when popped.
    heap: BinaryHeap<Reverse<Due>>,
    /// Bindings stored (expired ones included until `expire` removes them).
    bindings: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: u32,
    /// The record's key hash: finds it in the table without keeping a second copy of the key.
    hash: u64,
}

struct Record<S> {
    key: Aor,
    /// `hash(key)`, kept: the expiry heap, table growth and the scan order need it, and
    /// SipHash of a key costs more than the 8 bytes.
    hash: u64,
    /// Time of this record's live heap entry: never later than its earliest binding expiry.
    /// Invariant: every record has exactly one heap entry with this time that it answers to.
    next_check: u32,
    /// Oldest update first: the order gives "most recent" for equal q-values.
    bindings: Vec<Binding<S>>,
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // Nothing in this crate panics while holding a lock; if a caller's clone of `S` did, the
    // data is still structurally valid, so keep serving.
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Clone> Default for LocationStore<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Clone> LocationStore<S> {
    /// A store with [`StoreConfig::default`].
    pub fn new() -> Self {
        Self::with_config(StoreConfig::default())
    }

    /// A store whose hash keys are random (drawn from std's per-process randomness).
    pub fn with_config(config: StoreConfig) -> Self {
        let random = RandomState::new();
        Self::with_hash_keys(config, [random.hash_one(0u8), random.hash_one(1u8)])
    }

    /// A store that hashes with the given SipHash keys (a seeded engine derives them from its
    /// seed: same keys, same shard of every AoR, same expiry order).
    pub fn with_hash_keys(config: StoreConfig, hash_keys: [u64; 2]) -> Self {
        let n = config.shards.clamp(1, 1 << 16).next_power_of_two();
        let slots = (0..n)
            .map(|_| Slot {
                shard: RwLock::new(Shard { table: HashTable::new(), heap: BinaryHeap::new(), bindings: 0 }),
                next_due: AtomicU32::new(u32::MAX),
            })
            .collect();
        LocationStore {
            slots,
            mask: n as u64 - 1,
            hash_keys,
            epoch: OnceLock::new(),
            cursor: AtomicUsize::new(0),
            earliest: AtomicU32::new(u32::MAX),
            alarm: OnceLock::new(),
            stored_alarm: OnceLock::new(),
            #[cfg(test)]
            expiry_locks: AtomicUsize::new(0),
            max_bindings: config.max_bindings_per_aor.max(1),
            journal: OnceLock::new(),
            backfill: OnceLock::new(),
        }
    }

    /// Installs the journal told of every change (see [`Journal`]). Once only, before the
    /// store serves: a journal installed later would miss the changes made before. Returns the
    /// journal back if one is already installed.
    pub fn set_journal(&self, journal: Arc<dyn Journal<S>>) -> Result<(), Arc<dyn Journal<S>>> {
        self.journal.set(journal)
    }

    /// [`Self::set_journal`] for a store being built.
    pub fn with_journal(self, journal: Arc<dyn Journal<S>>) -> Self {
        let _ = self.journal.set(journal);
        self
    }

    /// Installs the alarm told whenever a change stores a binding that expires before every
    /// other (see [`Self::next_expiry`]): how a runtime that sleeps until its next deadline
    /// learns that the store's came earlier, whichever thread stored it (a REGISTER through any
    /// engine, a durable copy's load, replication). Once only; returns the alarm back if one is
    /// installed.
    pub fn set_expiry_alarm(&self, alarm: ExpiryAlarm) -> Result<(), ExpiryAlarm> {
        self.alarm.set(alarm)
    }

    /// Installs the alarm told of an AoR's bindings after every change that stores some (a
    /// REGISTER, a durable copy's load, replication), whichever thread made it: how a runtime
    /// loop that has nothing to do until a certain kind of binding exists (NAT keep-alives)
    /// sleeps until one does instead of looking on a period. Once only; returns the alarm back
    /// if one is installed.
    pub fn set_binding_alarm(&self, alarm: BindingAlarm<S>) -> Result<(), BindingAlarm<S>> {
        self.stored_alarm.set(alarm)
    }

    /// Rings the binding alarm, if any, with `bindings` (an AoR's, after a change). Called under
    /// the shard's write lock.
    fn stored(&self, bindings: &[Binding<S>]) {
        if let Some(alarm) = self.stored_alarm.get().filter(|_| !bindings.is_empty()) {
            alarm(bindings);
        }
    }

    /// Whether a journal is installed.
    pub fn has_journal(&self) -> bool {
        self.journal.get().is_some()
    }

    /// Every ticket up to this one is durable (the journal's [`Journal::durable`]; without a
    /// journal, every ticket).
    pub fn durable(&self) -> Ticket {
        self.journal.get().map_or(Ticket(u64::MAX), |j| j.durable())
    }

    /// Installs the source of AoRs not yet loaded (see [`Backfill`]). Once only; returns the
    /// source back if one is installed.
    pub fn set_backfill(&self, backfill: Arc<dyn Backfill<S>>) -> Result<(), Arc<dyn Backfill<S>>> {
        self.backfill.set(backfill)
    }

    /// While a durable copy is loading: brings `aor` in from it if the store does not hold it,
    /// so that a lookup sees a user not yet loaded, and a change to that user starts from its
    /// stored bindings. One atomic load once the load is over.
    fn fault_in(&self, aor: &Aor, now: Instant) {
        let Some(backfill) = self.backfill.get().filter(|b| b.loading()) else { return };
        let hash = self.hash(aor.as_bytes());
        if read(&self.slot(hash).shard).table.find(hash, |r| r.key == *aor).is_some() {
            return;
        }
        // Read outside every lock: the copy is on disk. `restore` re-checks under the lock.
        if let Some(bindings) = backfill.fetch(aor) {
            self.restore(aor, bindings, now);
        }
    }

    /// Tells the journal, if any, that `aor` now holds `bindings`. Called under the AoR's
    /// shard write lock.
    fn journal(&self, aor: &Aor, bindings: &[Binding<S>], now_s: u32) -> Ticket {
        match self.journal.get() {
            Some(j) => j.record(&AorBindings { aor, bindings, now_s }),
            None => Ticket::DURABLE,
        }
    }

    pub fn max_bindings_per_aor(&self) -> usize {
        self.max_bindings
    }

    pub fn shard_count(&self) -> usize {
        self.slots.len()
    }

    /// Seconds since the epoch; an instant before the epoch counts as 0.
    fn secs(&self, now: Instant) -> u32 {
        let epoch = *self.epoch.get_or_init(|| now);
        u32::try_from(now.saturating_duration_since(epoch).as_secs()).unwrap_or(u32::MAX)
    }

    fn hash(&self, key: &[u8]) -> u64 {
        // What `RandomState::hash_one` does, with our keys: length prefix, then the bytes.
        let mut h = SipHasher13::new_with_keys(self.hash_keys[0], self.hash_keys[1]);
        key.hash(&mut h);
        h.finish()
    }

    fn slot(&self, hash: u64) -> &Slot<S> {
        // Bits 32.. pick the shard: hashbrown uses the low bits for the bucket and the top 7
        // bits as the in-group tag, and both must still vary inside one shard.
        &self.slots[((hash >> 32) & self.mask) as usize]
    }

    /// Seconds left before `binding` expires, as seen at `now` (0 if it has expired).
    pub fn expires_in(&self, binding: &Binding<S>, now: Instant) -> u32 {
        binding.expires_at.saturating_sub(self.secs(now))
    }

    /// The unexpired bindings of `aor`, highest q first, most recently updated first among
    /// equal q-values (RFC 3261 §16.6 and §10.3: the order a proxy tries them in).
    pub fn lookup(&self, aor: &Aor, now: Instant) -> Vec<Binding<S>> {
        self.lookup_with(aor, now, |bindings| bindings.cloned().collect())
    }

    /// What `f` makes of the unexpired bindings of `aor`, in [`Self::lookup`]'s order, borrowed
    /// where they are stored: for a caller that needs a few fields of each, not copies. `f` runs
    /// under the read lock of the AoR's shard (a REGISTER to that shard waits for it): it must
    /// not call back into the store.
    pub fn lookup_with<R>(&self, aor: &Aor, now: Instant, f: impl FnOnce(OrderedBindings<'_, S>) -> R) -> R {
        self.lookup_key_with(aor.as_bytes(), now, f)
    }

    /// [`Self::lookup_with`] by the key's bytes (an [`crate::AorKey`] built on the stack): the
    /// [`Aor`] a start-up load needs is made only while one runs.
    pub fn lookup_key_with<R>(&self, key: &[u8], now: Instant, f: impl FnOnce(OrderedBindings<'_, S>) -> R) -> R {
        if self.backfill.get().is_some_and(|b| b.loading()) {
            self.fault_in(&Aor::from_canonical(key), now);
        }
        let now_s = self.secs(now);
        let hash = self.hash(key);
        let shard = read(&self.slot(hash).shard);
        let bindings = shard.table.find(hash, |r| r.key.as_bytes() == key).map_or(&[][..], |rec| &rec.bindings);
        f(OrderedBindings::new(bindings, now_s))
    }

    /// Applies every contact of one REGISTER atomically under the shard lock (RFC 3261 §10.3
    /// steps 6-8): each contact adds, refreshes or (with `expires` 0) removes the binding it
    /// matches. Returns the AoR's bindings afterwards, ordered as [`Self::lookup`] orders them.
    ///
    /// A contact matches a binding by `+sip.instance` and `reg-id` when it has both (RFC 5626
    /// §6), else by RFC 3261 §19.1.4 URI equivalence. If a contact appears twice, the later one
    /// wins. On error nothing is changed. Every successful update is journaled, even one that
    /// changed nothing here: during a start-up load, a removal of a binding not yet restored
    /// must still reach the durable copy.
    pub fn apply(&self, aor: &Aor, now: Instant, update: &Update<'_, S>) -> Result<Applied<S>, StoreError> {
        self.fault_in(aor, now);
        let now_s = self.secs(now);
        let key = aor.as_bytes();
        let hash = self.hash(key);
        let slot = self.slot(hash);
        let mut guard = write(&slot.shard);
        let Shard { table, heap, bindings: stored } = &mut *guard;
        let entry = table.entry(hash, |r| r.key.as_bytes() == key, |r| r.hash);
        let old: &[Binding<S>] = match &entry {
            Entry::Occupied(o) => &o.get().bindings,
            Entry::Vacant(_) => &[],
        };
        let plan = Plan::make(old, now_s, update, self.max_bindings)?;
        let result = match entry {
            Entry::Occupied(mut o) => {
                let rec = o.get_mut();
                *stored -= rec.bindings.len();
                plan.execute(&mut rec.bindings, now_s, update);
                *stored += rec.bindings.len();
                self.stored(&rec.bindings);
                let ticket = self.journal(aor, &rec.bindings, now_s);
                let result = Applied { bindings: ordered(&rec.bindings, now_s), ticket };
                match rec.bindings.iter().map(|b| b.expires_at).min() {
                    // A later earliest expiry needs no new heap entry: the current one fires
                    // early and reschedules (see `expire_shard`).
                    Some(at) if at < rec.next_check => {
                        rec.next_check = at;
                        heap.push(Reverse(Due { at, hash }));
                    }
                    Some(_) => {}
                    // The removed record's heap entry is skipped when it comes due.
                    None => drop(o.remove()),
                }
                result
            }
            Entry::Vacant(v) => {
                let mut bindings = Vec::new();
                plan.execute(&mut bindings, now_s, update);
                *stored += bindings.len();
                self.stored(&bindings);
                let ticket = self.journal(aor, &bindings, now_s);
                let result = Applied { bindings: ordered(&bindings, now_s), ticket };
                if let Some(at) = bindings.iter().map(|b| b.expires_at).min() {
                    v.insert(Box::new(Record { key: aor.clone(), hash, next_check: at, bindings }));
                    heap.push(Reverse(Due { at, hash }));
                }
                result
            }
        };
        self.publish_due(slot, &guard);
        Ok(result)
    }

    /// `Contact: *` with `Expires: 0` (RFC 3261 §10.3 step 6): removes every binding of `aor`,
    /// unless one of them was updated by this Call-ID with a CSeq not lower than `cseq`, in
    /// which case nothing is removed. Returns how many unexpired bindings were removed. Journaled
    /// even when the AoR held nothing here (see [`Self::apply`]).
    pub fn remove_all(&self, aor: &Aor, call_id: &str, cseq: u32, now: Instant) -> Result<Removed, StoreError> {
        self.fault_in(aor, now);
        let now_s = self.secs(now);
        let key = aor.as_bytes();
        let hash = self.hash(key);
        let slot = self.slot(hash);
        let mut guard = write(&slot.shard);
        let shard = &mut *guard;
        let Ok(entry) = shard.table.find_entry(hash, |r| r.key.as_bytes() == key) else {
            return Ok(Removed { count: 0, ticket: self.journal(aor, &[], now_s) });
        };
        let live = || entry.get().bindings.iter().filter(|b| b.expires_at > now_s);
        if let Some(b) = live().find(|b| *b.call_id == *call_id && cseq <= b.cseq) {
            return Err(StoreError::OutOfOrder { contact: b.contact.clone(), stored_cseq: b.cseq, request_cseq: cseq });
        }
        let count = live().count();
        let (rec, _) = entry.remove();
        shard.bindings -= rec.bindings.len();
        Ok(Removed { count, ticket: self.journal(aor, &[], now_s) })
    }

    /// Bindings stored, including expired ones that [`Self::expire`] has not removed yet.
    /// Takes every shard's read lock in turn: for metrics, not for the call path.
    pub fn len(&self) -> usize {
        self.slots.iter().map(|s| read(&s.shard).bindings).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Addresses-of-record with at least one stored binding.
    pub fn aor_count(&self) -> usize {
        self.slots.iter().map(|s| read(&s.shard).table.len()).sum()
    }
}

/// Unexpired bindings in [`LocationStore::lookup`]'s order, cloned.
fn ordered<S: Clone>(bindings: &[Binding<S>], now_s: u32) -> Vec<Binding<S>> {
    OrderedBindings::new(bindings, now_s).cloned().collect()
}
