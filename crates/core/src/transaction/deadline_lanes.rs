//! The transaction table's timer queue: a FIFO lane per timer duration, and a heap for the rest.
//!
//! Each timer kind is armed for one duration per transport (RFC 3261 Table 4: B, F, H, J, L, M
//! 64*T1; D 32 s; I, K T4; the zero-length ones of reliable transports end the transaction at
//! once and are never queued), the table's `now` only moves forward, and the absorb grid rounds
//! deadlines up the same way for every one: so the deadlines pushed into the lane of one
//! duration arrive already in order, and a push or a pop is O(1) with no comparison but against
//! the lanes' first items (the binary heap this replaces sifted on both; its pops were ~700
//! instructions per proxied call, issue 21). What does not arrive in order goes to a small heap
//! beside the lanes (`spill`): the retransmission timers A, E and G, whose interval doubles; a
//! transaction whose next-earliest timer was armed before others were (F under a re-armed E);
//! a caller whose `now` went backwards (two threads' clocks). Order is therefore always exact;
//! only the cost depends on the traffic.
//!
//! The queue knows nothing of liveness: the table's lazy deletion (a generation per entry)
//! skips stale items when they come to the front, as it did with the heap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// Lanes at most: the `nonempty` mask has a bit for each.
const MAX_LANES: usize = 16;

/// Where the earliest item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Lane(u8),
    Spill,
}

/// Items `(deadline, T)` in lanes the caller picks, popped earliest first. Equal deadlines come
/// in no promised order between lanes (the spill's first, then by lane), in push order within one.
#[derive(Debug)]
pub(crate) struct DeadlineLanes<T> {
    lanes: Box<[VecDeque<(Instant, T)>]>,
    /// Bit `i`: lane `i` holds something (the search for the next front visits only those).
    nonempty: u16,
    spill: BinaryHeap<Reverse<(Instant, T)>>,
    /// The earliest item and its place (it is the first of that place), kept by every push and
    /// pop: the table peeks after every change, and the runtime after every call.
    front: Option<(Instant, T, Place)>,
    /// The longest a lane or the spill has been since [`Self::shrink_after_peak`] last looked,
    /// and whether it then left one larger than its `min_capacity`: nothing can have grown past
    /// that since unless something held half of it (each grows by doubling when full), so the
    /// look is skipped (it read every lane's capacity on every timer run: ~50 instructions).
    longest: usize,
    large: bool,
}

impl<T: Copy + Ord> DeadlineLanes<T> {
    #[cfg(test)]
    pub(crate) fn new(lanes: usize) -> DeadlineLanes<T> {
        Self::with_room(lanes, 0)
    }

    /// [`Self::new`] with room for `items` in each lane: a lane grown one doubling at a time
    /// copies its items at each (a shard's lanes grow to its steady load once).
    pub(crate) fn with_room(lanes: usize, items: usize) -> DeadlineLanes<T> {
        assert!(lanes <= MAX_LANES, "at most {MAX_LANES} lanes");
        DeadlineLanes {
            lanes: (0..lanes).map(|_| VecDeque::with_capacity(items)).collect(),
            nonempty: 0,
            spill: BinaryHeap::new(),
            front: None,
            longest: 0,
            // Room given at the start may be over any `min_capacity`: the first look is made.
            large: true,
        }
    }

    /// Queues `item` due at `at` in `lane` (or, when it would come before that lane's last
    /// item, in the spill heap).
    pub(crate) fn push(&mut self, lane: usize, at: Instant, item: T) {
        let queue = &mut self.lanes[lane];
        match queue.back() {
            Some(&(last, _)) if last > at => {
                self.spill.push(Reverse((at, item)));
                self.longest = self.longest.max(self.spill.len());
                // The spill's first may have changed (ties go by item there): re-read it.
                let Some(&Reverse((first, first_item))) = self.spill.peek() else { return };
                if self.front.is_none_or(|(front, _, place)| place == Place::Spill || first < front) {
                    self.front = Some((first, first_item, Place::Spill));
                }
            }
            // Behind the lane's first item, so not the earliest.
            Some(_) => {
                queue.push_back((at, item));
                self.longest = self.longest.max(queue.len());
            }
            None => {
                queue.push_back((at, item));
                self.nonempty |= 1 << lane;
                if self.front.is_none_or(|(first, _, _)| at < first) {
                    self.front = Some((at, item, Place::Lane(lane as u8)));
                }
            }
        }
    }

    /// The earliest item.
    pub(crate) fn peek(&self) -> Option<(Instant, T)> {
        self.front.map(|(at, item, _)| (at, item))
    }

    /// Removes the earliest item.
    pub(crate) fn pop(&mut self) -> Option<(Instant, T)> {
        let (at, item, place) = self.front?;
        match place {
            Place::Lane(i) => {
                let queue = &mut self.lanes[usize::from(i)];
                queue.pop_front();
                if queue.is_empty() {
                    self.nonempty &= !(1 << i);
                }
            }
            Place::Spill => {
                self.spill.pop();
            }
        }
        self.front = self.find_front();
        Some((at, item))
    }

    /// The earliest item, looking at the first of every lane that holds one.
    fn find_front(&self) -> Option<(Instant, T, Place)> {
        let mut best = self.spill.peek().map(|&Reverse((at, item))| (at, item, Place::Spill));
        let mut mask = self.nonempty;
        while mask != 0 {
            let i = mask.trailing_zeros() as u8;
            mask &= mask - 1;
            if let Some(&(at, item)) = self.lanes[usize::from(i)].front() {
                if best.is_none_or(|(first, _, _)| at < first) {
                    best = Some((at, item, Place::Lane(i)));
                }
            }
        }
        best
    }

    /// Items queued, stale ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum::<usize>() + self.spill.len()
    }

    /// Items the lanes and the spill have room for.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.lanes.iter().map(VecDeque::capacity).sum::<usize>() + self.spill.capacity()
    }

    /// Shrinks each lane (and the spill) to twice its length when it has more than
    /// `min_capacity` room and uses under an eighth of it (the table's rule for its hash tables).
    pub(crate) fn shrink_after_peak(&mut self, min_capacity: usize) {
        // A capacity over `min_capacity` that the last look did not leave was reached by
        // doubling a full one of over half of it.
        if !self.large && self.longest <= min_capacity / 4 {
            return;
        }
        self.longest = 0;
        let mostly_empty = |len: usize, capacity: usize| capacity > min_capacity && len < capacity / 8;
        for queue in self.lanes.iter_mut() {
            if mostly_empty(queue.len(), queue.capacity()) {
                queue.shrink_to(queue.len() * 2);
            }
        }
        if mostly_empty(self.spill.len(), self.spill.capacity()) {
            self.spill.shrink_to(self.spill.len() * 2);
        }
        self.large = self.spill.capacity() > min_capacity || self.lanes.iter().any(|q| q.capacity() > min_capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Pops come out as a heap of all the pushes would give them: earliest first, whatever
    /// lanes they went to and in whatever order, interleaved with pops at any point; every item
    /// once.
    #[test]
    fn pops_come_in_deadline_order_as_from_one_heap() {
        let t0 = Instant::now();
        let mut lanes: DeadlineLanes<u64> = DeadlineLanes::new(12);
        let mut model: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
        let (mut pushed, mut popped) = (Vec::new(), Vec::new());
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut now_ms = 0u64;
        for n in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lane = (x % 12) as usize;
            let at = match (x >> 8) % 8 {
                // Mostly a fixed duration per lane from a clock that moves forward...
                0..=3 => {
                    now_ms += (x >> 16) % 3;
                    Some(t0 + Duration::from_millis(now_ms + 100 * lane as u64))
                }
                // ... sometimes anything (a doubled interval, a clock gone backwards).
                4 => Some(t0 + Duration::from_millis((x >> 20) % 5_000)),
                _ => None,
            };
            if let Some(at) = at {
                lanes.push(lane, at, n);
                model.push(Reverse((at, n)));
                pushed.push(n);
                continue;
            }
            let want = model.pop().map(|Reverse((at, _))| at);
            assert_eq!(lanes.peek().map(|(at, _)| at), want);
            let got = lanes.pop();
            assert_eq!(got.map(|(at, _)| at), want);
            popped.extend(got.map(|(_, n)| n));
            assert_eq!(lanes.len(), model.len());
        }
        while let Some((at, n)) = lanes.pop() {
            assert_eq!(Some(at), model.pop().map(|Reverse((at, _))| at));
            popped.push(n);
        }
        assert!(model.is_empty());
        popped.sort_unstable();
        assert_eq!(popped, pushed, "every item comes out once");
    }

    #[test]
    fn in_order_pushes_stay_in_their_lane_and_a_lane_keeps_push_order() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut lanes: DeadlineLanes<u32> = DeadlineLanes::new(3);
        lanes.push(2, t0 + ms(5), 1);
        lanes.push(2, t0 + ms(5), 0); // in order (equal): FIFO within the lane
        lanes.push(0, t0 + ms(6), 2);
        lanes.push(1, t0 + ms(1), 3);
        assert!(lanes.spill.is_empty(), "nothing came out of order");
        lanes.push(1, t0, 4); // before lane 1's last: spilled
        assert_eq!(lanes.spill.len(), 1);
        lanes.push(0, t0 + ms(2), 5); // spilled again, behind the spill's first
        assert_eq!(lanes.peek(), Some((t0, 4)));
        let order: Vec<u32> = std::iter::from_fn(|| lanes.pop().map(|(_, i)| i)).collect();
        assert_eq!(order, [4, 3, 5, 1, 0, 2]);
        assert_eq!((lanes.len(), lanes.nonempty), (0, 0));
    }

    #[test]
    fn lanes_shrink_after_a_peak() {
        let t0 = Instant::now();
        let mut lanes: DeadlineLanes<u32> = DeadlineLanes::new(2);
        for i in 0..10_000 {
            lanes.push(1, t0 + Duration::from_micros(u64::from(i)), i);
        }
        let grown = lanes.capacity();
        assert!(grown >= 10_000);
        lanes.shrink_after_peak(1024);
        assert_eq!(lanes.capacity(), grown, "full: kept");
        while lanes.len() > 100 {
            lanes.pop();
        }
        lanes.shrink_after_peak(1024);
        assert!(lanes.capacity() <= 1024, "{grown} -> {}", lanes.capacity());
        assert_eq!(lanes.pop().map(|(_, i)| i), Some(9_900));
    }
}
