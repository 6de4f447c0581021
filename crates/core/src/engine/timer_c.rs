//! Timer C (RFC 3261 §16.6 step 11, §16.8): each pending INVITE branch's deadline, and the
//! engine's queue of them.
//!
//! A branch's deadline ([`BranchTimerC`], a field of `context::Branch`) can only be changed
//! through the queue ([`TimerC`]), so the queue sees every change that can make one of its
//! entries stale, and keeps its memo of a live front ([`TimerC::drop_stale`]) right by itself.

use crate::transaction::TxId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// A queued Timer C: (deadline, server transaction, branch index).
pub(super) type Entry = (Instant, TxId, usize);

/// A branch's Timer C deadline, if it has one. Read-only outside this module: it is set and
/// cleared by [`TimerC`], which must see every change.
#[derive(Debug, Default, Clone, Copy)]
pub struct BranchTimerC(Option<Instant>);

impl BranchTimerC {
    pub fn at(self) -> Option<Instant> {
        self.0
    }
}

/// The Timer C entries of an engine's branches, earliest first, with lazy deletion: an entry is
/// live while its branch is pending with a deadline at or after it (a later one: reset by a
/// provisional since it was queued). Entries that went stale stay queued until they reach the
/// front ([`Self::drop_stale`]) or fire (the engine's `on_timer_c` skips them).
#[derive(Debug, Default)]
pub(super) struct TimerC {
    heap: BinaryHeap<Reverse<Entry>>,
    /// The front is known live, so that [`Self::drop_stale`] need not look its branch up again
    /// after every message (a context lookup, three a call; issue 21). Only a new front or a
    /// change to the front's branch can end that, and every one comes through this type: a
    /// push or pop that moves the front, [`Self::disarm`], [`Self::context_ended`], or
    /// [`Self::arm`] moving a deadline earlier.
    front_live: bool,
}

impl TimerC {
    /// Sets branch `idx` of `sid`'s Timer C (`slot`, the branch's) to `at` and queues it: a new
    /// branch's (§16.6 step 11) or the give-up time of a CANCELled one (§9.1). `pending`: the
    /// branch is pending (`Branch::is_pending`). A deadline moved earlier leaves the branch's
    /// later entries stale.
    #[inline(always)]
    pub(super) fn arm(&mut self, slot: &mut BranchTimerC, pending: bool, (at, sid, idx): Entry) {
        if slot.0.replace(at).is_some_and(|t| t > at) {
            self.forget_branch(sid, idx);
        }
        let entry = (at, sid, idx);
        self.heap.push(Reverse(entry));
        // Live when its branch is pending: when it is the new front, the next `drop_stale`
        // need not look it up (the usual new INVITE branch on an idle engine).
        if self.heap.peek() == Some(&Reverse(entry)) {
            self.front_live = pending;
        }
    }

    /// Resets branch `idx` of `sid`'s Timer C to `at` on a provisional response (§16.7 step 2).
    /// The branch's queued entry, due no later, stays where it is and stays live: when it
    /// fires, the engine finds the deadline moved and queues it again then. One entry per
    /// ringing branch instead of one per provisional (issue 21: a push and a pop of the heap
    /// per proxied call). A deadline moved earlier (a clock gone back) is queued ([`Self::arm`]).
    pub(super) fn reset(&mut self, slot: &mut BranchTimerC, pending: bool, entry: Entry) {
        match slot.0 {
            Some(t) if t <= entry.0 => slot.0 = Some(entry.0),
            _ => self.arm(slot, pending, entry),
        }
    }

    /// Clears branch `idx` of `sid`'s Timer C: the branch ended (a final status, its
    /// abandonment), and its queued entries with it.
    pub(super) fn disarm(&mut self, slot: &mut BranchTimerC, sid: TxId, idx: usize) {
        slot.0 = None;
        self.forget_branch(sid, idx);
    }

    /// The response context of `sid` ended: its entries no longer apply.
    pub(super) fn context_ended(&mut self, sid: TxId) {
        if self.front_live && self.heap.peek().is_some_and(|Reverse((_, s, _))| *s == sid) {
            self.front_live = false;
        }
    }

    /// Queues `entry` again, its branch's deadline unchanged (one that fired and found its
    /// deadline moved later).
    pub(super) fn requeue(&mut self, entry: Entry) {
        self.heap.push(Reverse(entry));
        if self.heap.peek() == Some(&Reverse(entry)) {
            self.front_live = false;
        }
    }

    /// The earliest queued deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes the front entry if it is due at `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Entry> {
        let &Reverse(entry) = self.heap.peek()?;
        if entry.0 > now {
            return None;
        }
        self.heap.pop();
        self.front_live = false;
        Some(entry)
    }

    /// Pops the entries that no longer apply off the front (`live` says whether one does: its
    /// branch is pending with a deadline at or after it), so that the engine's `poll_timeout`
    /// does not wake the worker for them: every INVITE's would, 180 s after it was answered.
    ///
    /// The engine asks after every call: inlined, the usual answer (a front remembered live,
    /// or no entry at all) is a test or two, without a call (issue 21: ~30 instructions a call).
    #[inline]
    pub(super) fn drop_stale(&mut self, live: impl Fn(Entry) -> bool) {
        if self.front_live {
            debug_assert!(
                self.heap.peek().is_some_and(|&Reverse(front)| live(front)),
                "a Timer C entry remembered live went stale"
            );
            return;
        }
        if !self.heap.is_empty() {
            self.drop_stale_front(live);
        }
    }

    /// [`Self::drop_stale`] when the front is not known live.
    #[inline(never)]
    fn drop_stale_front(&mut self, live: impl Fn(Entry) -> bool) {
        while let Some(&Reverse(front)) = self.heap.peek() {
            if live(front) {
                self.front_live = true;
                return;
            }
            self.heap.pop();
        }
    }

    /// The branch's entries may have gone stale: forget the front if it is one of them.
    fn forget_branch(&mut self, sid: TxId, idx: usize) {
        if self.front_live && self.heap.peek().is_some_and(|Reverse((_, s, i))| (*s, *i) == (sid, idx)) {
            self.front_live = false;
        }
    }

    /// Forgets the memo, for a test's queue that looks every front up.
    #[cfg(test)]
    pub(super) fn forget_front(&mut self) {
        self.front_live = false;
    }

    /// The queued entries, earliest first, for tests.
    #[cfg(test)]
    pub(super) fn entries(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.heap.iter().map(|Reverse(e)| *e).collect();
        v.sort();
        v
    }
}
