//! Slot storage with generations: calls and callee dialogs live here, everything else holds a
//! `(slot, generation)` handle, so a stale timer or a late response for a finished call finds
//! nothing instead of a reused slot's new occupant.

pub struct Slab<T> {
    entries: Vec<Option<T>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { entries: Vec::new(), generations: Vec::new(), free: Vec::new(), live: 0 }
    }
}

impl<T> Slab<T> {
    /// Stores `value`; returns its handle.
    pub fn insert(&mut self, value: T) -> (u32, u32) {
        self.live += 1;
        if let Some(slot) = self.free.pop() {
            let i = slot as usize;
            self.generations[i] = self.generations[i].wrapping_add(1);
            self.entries[i] = Some(value);
            return (slot, self.generations[i]);
        }
        self.entries.push(Some(value));
        self.generations.push(0);
        ((self.entries.len() - 1) as u32, 0)
    }

    pub fn get_mut(&mut self, slot: u32, generation: u32) -> Option<&mut T> {
        let i = slot as usize;
        if self.generations.get(i) != Some(&generation) {
            return None;
        }
        self.entries[i].as_mut()
    }

    /// The entry in `slot` whatever its generation, with that generation (for owners that
    /// identify their timers by something finer than the slot generation).
    pub fn get_slot_mut(&mut self, slot: u32) -> Option<(&mut T, u32)> {
        let i = slot as usize;
        let generation = *self.generations.get(i)?;
        self.entries[i].as_mut().map(|v| (v, generation))
    }

    pub fn remove(&mut self, slot: u32, generation: u32) -> Option<T> {
        let i = slot as usize;
        if self.generations.get(i) != Some(&generation) {
            return None;
        }
        let value = self.entries[i].take()?;
        self.free.push(slot);
        self.live -= 1;
        Some(value)
    }

    /// Room for `n` more entries without growing (nor copying those held) on the way.
    pub fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
        self.generations.reserve(n);
        self.free.reserve(n);
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Handles of every live entry.
    pub fn handles(&self) -> Vec<(u32, u32)> {
        (0..self.entries.len())
            .filter(|&i| self.entries[i].is_some())
            .map(|i| (i as u32, self.generations[i]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_slots_get_new_generations() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.remove(a.0, a.1), Some("a"));
        assert_eq!(s.remove(a.0, a.1), None);
        let c = s.insert("c");
        assert_eq!(c.0, a.0);
        assert_ne!(c.1, a.1);
        assert!(s.get_mut(a.0, a.1).is_none());
        assert_eq!(s.get_mut(c.0, c.1).map(|v| *v), Some("c"));
        assert_eq!(s.len(), 2);
        assert_eq!(s.handles(), vec![c, b]);
    }
}
