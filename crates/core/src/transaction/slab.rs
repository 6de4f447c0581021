//! Values kept in place in chunks of slots, addressed by handles that carry a serial number
//! (ARCHITECTURE.md: handles, not pointers): a handle kept after its value was removed never
//! reaches the value that reuses its slot, whose serial differs.
//!
//! Why (issue 21): the transaction table kept each entry in a box of its own, in a hash map
//! by id; a proxied call starts and ends four or five transactions, each a malloc and a free,
//! and every access hashed the id. Here an access is two indexes and a comparison, and a new
//! value is written into a slot an ended one left.
//!
//! The slots come in chunks of [`CHUNK`], each allocated once and never moved. One vector of
//! all slots, doubled as it grew, held 35-45% more memory per held call than the boxes had
//! (`scripts/memory-per-call.sh`: 4.3-4.6 KB a call with boxes, 5.9-6.6 KB with the vector):
//! each doubling copied the slots into a new block and the old blocks stayed with the
//! allocator, and a reserved vector was memory an idle herald held.
//!
//! Slots are reused lowest first: a bitmap marks the occupied slots (one word per chunk), and a
//! second level marks the bitmap's full words, so the lowest vacant slot is found in a few word
//! reads even in a slab of a flood's size. After a peak, the load that follows fills the low
//! chunks while the high ones empty as the peak's values end, and
//! [`Slab::release_vacant_tail`] frees the chunks past the last occupied one. (A free list
//! would keep handing out the slots freed last, the peak's highest, and no chunk would empty.)

/// Slots per bitmap word, and per chunk: chunk `c`'s slots are marked in bitmap word `c`.
const WORD: usize = u64::BITS as usize;
const CHUNK: usize = WORD;

/// A slab of `T`s; see the module's documentation.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    /// Slot `i` is `chunks[i / CHUNK][i % CHUNK]`.
    chunks: Vec<Box<[Slot<T>; CHUNK]>>,
    /// Bit `i` of word `w`: slot `WORD * w + i` is occupied. One word per chunk.
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
    /// A slab with room for the chunk pointers of `values` before that list grows; no slot is
    /// allocated before the first insert.
    pub(crate) fn with_capacity(values: usize) -> Slab<T> {
        let chunks = values.div_ceil(CHUNK);
        Slab {
            chunks: Vec::with_capacity(chunks),
            occupied: Vec::with_capacity(chunks),
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

    /// Slots allocated.
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    /// Writes the value `make` returns into the lowest vacant slot; returns its handle and the
    /// value where it lies. `make` runs once the slot is chosen, so that a large value is
    /// built in place rather than built elsewhere and copied in.
    pub(crate) fn insert(&mut self, make: impl FnOnce() -> T) -> (u64, &mut T) {
        let index = self.lowest_vacant();
        let c = index / CHUNK;
        if c == self.chunks.len() {
            if self.occupied.len().is_multiple_of(WORD) {
                self.full.push(0);
            }
            self.occupied.push(0);
            self.chunks.push(vacant_chunk());
        }
        self.occupied[c] |= 1 << (index % CHUNK);
        if self.occupied[c] == u64::MAX {
            self.full[c / WORD] |= 1 << (c % WORD);
        }
        self.len += 1;
        self.serial = self.serial.wrapping_add(1);
        let slot = &mut self.chunks[c][index % CHUNK];
        slot.serial = self.serial;
        let value = slot.value.insert(make());
        ((u64::from(self.serial) << 32) | index as u64, value)
    }

    /// The lowest vacant slot: `capacity()` when all are occupied.
    fn lowest_vacant(&self) -> usize {
        for (f, &full) in self.full.iter().enumerate() {
            if full != u64::MAX {
                let w = f * WORD + full.trailing_ones() as usize;
                // A word past the bitmap's end (the slab's last chunk was full) has no slot yet.
                let bits = self.occupied.get(w).copied().unwrap_or(0);
                return w * WORD + bits.trailing_ones() as usize;
            }
        }
        self.capacity()
    }

    fn slot(handle: u64) -> (usize, u32) {
        (handle as u32 as usize, (handle >> 32) as u32)
    }

    pub(crate) fn get(&self, handle: u64) -> Option<&T> {
        let (index, serial) = Self::slot(handle);
        let slot = &self.chunks.get(index / CHUNK)?[index % CHUNK];
        if slot.serial != serial {
            return None;
        }
        slot.value.as_ref()
    }

    pub(crate) fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        let (index, serial) = Self::slot(handle);
        let slot = &mut self.chunks.get_mut(index / CHUNK)?[index % CHUNK];
        if slot.serial != serial {
            return None;
        }
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
        let slot = &mut self.chunks.get_mut(index / CHUNK)?[index % CHUNK];
        if slot.serial != serial || slot.value.is_none() {
            return None;
        }
        let taken = empty(&mut slot.value);
        let c = index / CHUNK;
        self.occupied[c] &= !(1 << (index % CHUNK));
        self.full[c / WORD] &= !(1 << (c % WORD));
        self.len -= 1;
        Some(taken)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter()).filter_map(|s| s.value.as_ref())
    }

    /// Frees the chunks past the last one with an occupied slot but one (kept so that a slab
    /// whose use goes back and forth across a chunk's edge does not allocate and free a chunk
    /// each time), and shrinks the chunk list when it is mostly empty. O(1) unless chunks are
    /// freed: the look stops at the last word with a bit set, and all words past it are freed.
    pub(crate) fn release_vacant_tail(&mut self) {
        let used = self.occupied.iter().rposition(|&bits| bits != 0).map_or(0, |c| c + 1);
        let keep = used + 1;
        if keep >= self.chunks.len() {
            return;
        }
        self.chunks.truncate(keep);
        self.occupied.truncate(keep);
        self.full.truncate(keep.div_ceil(WORD));
        if self.chunks.capacity() > 4 * keep {
            self.chunks.shrink_to(2 * keep);
            self.occupied.shrink_to(2 * keep);
            self.full.shrink_to((2 * keep).div_ceil(WORD));
        }
    }
}

/// A chunk of vacant slots, built where it stays (an array of this size built on the stack and
/// moved into its box would be a copy of some 30 KB for a transaction table's entries).
fn vacant_chunk<T>() -> Box<[Slot<T>; CHUNK]> {
    let slots: Box<[Slot<T>]> = (0..CHUNK).map(|_| Slot { serial: 0, value: None }).collect();
    match slots.try_into() {
        Ok(chunk) => chunk,
        Err(_) => unreachable!("the iterator yields CHUNK slots"),
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
        slab.release_vacant_tail();
        assert_eq!(slab.capacity(), CHUNK, "one vacant chunk is kept");
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
    fn the_chunks_past_the_last_occupied_slot_are_freed_but_one() {
        let mut slab = Slab::with_capacity(0);
        assert_eq!(slab.capacity(), 0, "nothing allocated before the first insert");
        let handles: Vec<u64> = (0..5000).map(|i| slab.insert(|| i).0).collect();
        let grown = slab.capacity();
        assert_eq!(grown, 5000usize.div_ceil(CHUNK) * CHUNK);
        // A survivor high up holds the tail: nothing can be freed.
        for &h in &handles[..4990] {
            slab.remove(h);
        }
        slab.release_vacant_tail();
        assert_eq!(slab.capacity(), grown);
        // The load after the peak fills the low slots, not the survivors' neighbours.
        let low: Vec<u64> = (0..10).map(|i| slab.insert(|| i).0).collect();
        assert!(low.iter().all(|&h| (h as u32) < 10));
        for &h in &handles[4990..] {
            slab.remove(h);
        }
        slab.release_vacant_tail();
        assert_eq!(slab.capacity(), 2 * CHUNK, "the low load's chunk and one spare");
        assert!(low.iter().enumerate().all(|(i, &h)| slab.get(h) == Some(&i)));
        // The chunks freed come back as the load grows again, lowest slots first.
        let more: Vec<u64> = (0..3 * CHUNK).map(|i| slab.insert(|| i).0).collect();
        assert!(more.iter().enumerate().all(|(i, &h)| h as u32 as usize == 10 + i));
        assert_eq!(slab.len(), 10 + 3 * CHUNK);
        assert_eq!(slab.values().count(), 10 + 3 * CHUNK);
        // Releasing again with nothing to free changes nothing.
        let before = slab.capacity();
        slab.release_vacant_tail();
        assert_eq!(slab.capacity(), before);
    }
}
