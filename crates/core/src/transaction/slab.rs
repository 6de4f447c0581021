//! Values kept in place in one vector, addressed by handles that carry a serial number
//! (ARCHITECTURE.md: handles, not pointers): a handle kept after its value was removed never
//! reaches the value that reuses its slot, whose serial differs.
//!
//! Why (issue 21): the transaction table kept each entry in a box of its own, in a hash map
//! by id; a proxied call starts and ends four or five transactions, each a malloc and a free,
//! and every access hashed the id. Here an access is an index and a comparison, and a new
//! value is written into a slot an ended one left.
//!
//! Slots are reused lowest first: a bitmap marks the occupied slots, and a second level marks
//! the bitmap's full words, so the lowest vacant slot is found in a few word reads even in a
//! slab of a flood's size. After a peak, the load that follows fills the low slots while the
//! high ones empty as the peak's values end, and [`Slab::shrink_after_peak`] cuts the vacant
//! tail off and gives its memory back. (A free list would keep handing out the slots freed
//! last, the peak's highest, and the slab could never shrink.)

/// Slots per bitmap word.
const WORD: usize = u64::BITS as usize;

/// A slab of `T`s; see the module's documentation.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// Bit `i` of word `w`: slot `WORD * w + i` is occupied. One bit per slot, rounded up to
    /// whole words; no bit is set past `slots.len()`.
    occupied: Vec<u64>,
    /// Bit `i` of word `w`: `occupied[WORD * w + i]` is full (all its slots are occupied).
    full: Vec<u64>,
    len: usize,
    /// The serial of the last value inserted. A handle is `serial << 32 | slot`: not reused
    /// before 2^32 more inserts into the slab, far longer than any holder keeps a handle of a
    /// value that ended (the transactions of one shard, minutes at most).
    serial: u32,
}

#[derive(Debug)]
struct Slot<T> {
    /// The serial of the value in the slot, or of the last one while it is vacant.
    serial: u32,
    value: Option<T>,
}

impl<T> Slab<T> {
    /// A slab with room for `values` before it grows.
    pub(crate) fn with_capacity(values: usize) -> Slab<T> {
        Slab {
            slots: Vec::with_capacity(values),
            occupied: Vec::with_capacity(values.div_ceil(WORD)),
            full: Vec::new(),
            len: 0,
            serial: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots the slab has room for without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Writes the value `make` returns into the lowest vacant slot; returns its handle and the
    /// value where it lies. `make` runs once the slot is chosen, so that a large value is
    /// built in place rather than built elsewhere and copied in.
    pub(crate) fn insert(&mut self, make: impl FnOnce() -> T) -> (u64, &mut T) {
        let index = self.lowest_vacant();
        if index == self.slots.len() {
            if index.is_multiple_of(WORD) {
                if self.occupied.len().is_multiple_of(WORD) {
                    self.full.push(0);
                }
                self.occupied.push(0);
            }
            self.slots.push(Slot { serial: 0, value: None });
        }
        let w = index / WORD;
        self.occupied[w] |= 1 << (index % WORD);
        if self.occupied[w] == u64::MAX {
            self.full[w / WORD] |= 1 << (w % WORD);
        }
        self.len += 1;
        self.serial = self.serial.wrapping_add(1);
        let slot = &mut self.slots[index];
        slot.serial = self.serial;
        let value = slot.value.insert(make());
        ((u64::from(self.serial) << 32) | index as u64, value)
    }

    /// The lowest vacant slot: `slots.len()` when all are occupied.
    fn lowest_vacant(&self) -> usize {
        for (f, &full) in self.full.iter().enumerate() {
            if full != u64::MAX {
                let w = f * WORD + full.trailing_ones() as usize;
                // A word past the bitmap's end (the slab's last one was full) has no slot yet.
                let bits = self.occupied.get(w).copied().unwrap_or(0);
                return w * WORD + bits.trailing_ones() as usize;
            }
        }
        self.slots.len()
    }

    fn slot(handle: u64) -> (usize, u32) {
        (handle as u32 as usize, (handle >> 32) as u32)
    }

    pub(crate) fn get(&self, handle: u64) -> Option<&T> {
        let (index, serial) = Self::slot(handle);
        let slot = self.slots.get(index).filter(|s| s.serial == serial)?;
        slot.value.as_ref()
    }

    pub(crate) fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        let (index, serial) = Self::slot(handle);
        let slot = self.slots.get_mut(index).filter(|s| s.serial == serial)?;
        slot.value.as_mut()
    }

    /// Drops the value of `handle` where it lies (moved out first, it was copied: a memcpy of
    /// a transaction table's entry); false if there is none.
    pub(crate) fn remove(&mut self, handle: u64) -> bool {
        self.vacate(handle, |value| *value = None).is_some()
    }

    /// Moves the value of `handle` out of the slab.
    pub(crate) fn take(&mut self, handle: u64) -> Option<T> {
        self.vacate(handle, Option::take).flatten()
    }

    fn vacate<R>(&mut self, handle: u64, empty: impl FnOnce(&mut Option<T>) -> R) -> Option<R> {
        let (index, serial) = Self::slot(handle);
        let slot = self.slots.get_mut(index).filter(|s| s.serial == serial && s.value.is_some())?;
        let taken = empty(&mut slot.value);
        let w = index / WORD;
        self.occupied[w] &= !(1 << (index % WORD));
        self.full[w / WORD] &= !(1 << (w % WORD));
        self.len -= 1;
        Some(taken)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }

    /// Cuts off the vacant slots past the highest occupied one, and when what is left is
    /// under an eighth of a capacity over `min_capacity`, shrinks the capacity to twice that:
    /// O(1) unless slots are cut (paid for by the removals that vacated them) or it shrinks
    /// (which halves the capacity at least, so that it takes a doubling to grow it again).
    pub(crate) fn shrink_after_peak(&mut self, min_capacity: usize) {
        let end = match self.occupied.iter().rposition(|&bits| bits != 0) {
            Some(w) => w * WORD + WORD - self.occupied[w].leading_zeros() as usize,
            None => 0,
        };
        if end < self.slots.len() {
            self.slots.truncate(end);
            self.occupied.truncate(end.div_ceil(WORD));
            self.full.truncate(self.occupied.len().div_ceil(WORD));
        }
        let capacity = self.slots.capacity();
        if capacity > min_capacity && end < capacity / 8 {
            self.slots.shrink_to(end * 2);
            self.occupied.shrink_to((end * 2).div_ceil(WORD));
            self.full.shrink_to((end * 2).div_ceil(WORD * WORD));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_handle_reaches_nothing_in_its_reused_slot() {
        let mut slab = Slab::with_capacity(0);
        let (old, _) = slab.insert(|| "old");
        assert!(slab.remove(old));
        let (new, _) = slab.insert(|| "new");
        assert_eq!(old as u32, new as u32, "the slot is reused");
        assert_ne!(old, new);
        assert_eq!(slab.get(old), None);
        assert_eq!(slab.get_mut(old), None);
        assert!(!slab.remove(old), "nor removes what is there now");
        assert_eq!(slab.take(old), None);
        assert_eq!(slab.get(new), Some(&"new"));
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn a_handle_of_a_cut_off_slot_stays_stale_when_the_slot_comes_back() {
        let mut slab = Slab::with_capacity(0);
        let handles: Vec<u64> = (0..3000).map(|i| slab.insert(|| i).0).collect();
        for &h in &handles {
            assert!(slab.remove(h));
        }
        slab.shrink_after_peak(0);
        assert_eq!(slab.capacity(), 0);
        let again: Vec<u64> = (0..3000).map(|i| slab.insert(|| i + 10_000).0).collect();
        for (old, new) in handles.iter().zip(&again) {
            assert_eq!(*old as u32, *new as u32);
            assert_eq!(slab.get(*old), None);
        }
    }

    /// Every insert takes the lowest vacant slot, across bitmap words and summary words.
    #[test]
    fn slots_are_reused_lowest_first() {
        let mut slab = Slab::with_capacity(0);
        let n = WORD * WORD + 3 * WORD + 5;
        let handles: Vec<u64> = (0..n).map(|i| slab.insert(|| i).0).collect();
        for (i, h) in handles.iter().enumerate() {
            assert_eq!(*h as u32 as usize, i);
        }
        let freed = [n - 1, WORD * WORD + 7, 2 * WORD, WORD - 1, 3];
        for &i in &freed {
            assert!(slab.remove(handles[i]));
        }
        let mut sorted = freed;
        sorted.sort_unstable();
        for &i in &sorted {
            let (h, v) = slab.insert(|| 0);
            assert_eq!(h as u32 as usize, i);
            assert_eq!(*v, 0);
        }
        assert_eq!(slab.insert(|| 0).0 as u32 as usize, n, "then past the end");
        assert_eq!(slab.len(), n + 1);
        assert_eq!(slab.values().count(), n + 1);
    }

    #[test]
    fn the_vacant_tail_is_cut_off_and_a_mostly_empty_slab_shrinks() {
        let mut slab = Slab::with_capacity(0);
        let handles: Vec<u64> = (0..5000).map(|i| slab.insert(|| i).0).collect();
        let grown = slab.capacity();
        // A survivor high up holds the tail: nothing can be cut.
        for &h in &handles[..4990] {
            slab.remove(h);
        }
        slab.shrink_after_peak(1024);
        assert_eq!(slab.capacity(), grown);
        // The load after the peak fills the low slots, not the survivors' neighbours.
        let low: Vec<u64> = (0..10).map(|i| slab.insert(|| i).0).collect();
        assert!(low.iter().all(|&h| (h as u32) < 10));
        for &h in &handles[4990..] {
            slab.remove(h);
        }
        slab.shrink_after_peak(1024);
        assert!(slab.capacity() <= 20, "{grown} -> {}", slab.capacity());
        assert!(low.iter().enumerate().all(|(i, &h)| slab.get(h) == Some(&i)));
        // Small slabs keep their room.
        let mut small = Slab::with_capacity(0);
        let h: Vec<u64> = (0..500).map(|i| small.insert(|| i).0).collect();
        let room = small.capacity();
        for &h in &h[1..] {
            assert!(small.remove(h));
        }
        small.shrink_after_peak(1024);
        assert_eq!(small.capacity(), room);
    }
}
