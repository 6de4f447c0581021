//! How long our own callee held each answer that our callers time: the moment the answer was
//! handed to the kernel minus the moment it was due (the request's kernel receive stamp, or the
//! end of the ring). The callers subtract it from what they measure (SRD, SDD, response times),
//! so that a latency is the proxy's and the network's, not the generator's: the event loop may
//! then batch its input on a coarse quantum ([`super::options::DEFAULT_QUANTUM_US`]) without
//! the callee's wait showing up as proxy latency. Both ends are in this process; the Call-ID
//! links an answer to the call that times it.
//!
//! Keys are a keyed hash (herald-core's foldhash, a random seed per run) of the Call-ID, the
//! CSeq method and provisional/final: Call-IDs reach the callee from the proxy, so their
//! collisions are not the sender's to choose. A caller takes each entry when it times the answer.
//! Bounded: past [`MAX_HELD`] entries (answers no caller of ours took, e.g. to calls that are not
//! ours) the table starts over, and the latencies of the calls then in flight simply keep the
//! callee's time in them.

use herald_core::seed::{Seed, TableState};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Entries held at most (as many as the callee holds dialogs).
pub const MAX_HELD: usize = 1 << 20;

/// Which answer of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The first provisional above 100 (what ends the SRD, RFC 6076 §4.2).
    Provisional,
    Final,
}

pub struct Held {
    state: TableState,
    held: HashMap<u64, u64, TableState>,
    limit: usize,
}

impl Default for Held {
    fn default() -> Held {
        let seed = Seed::random();
        Held {
            state: seed.derive("held answers", 0).table_state(),
            held: HashMap::with_hasher(seed.derive("held table", 0).table_state()),
            limit: MAX_HELD,
        }
    }
}

impl Held {
    /// The key of the `answer` to the `method` request of call `call_id` (its bytes as written:
    /// the callee reads them from the request without a UTF-8 check).
    pub fn key(&self, call_id: &(impl AsRef<[u8]> + ?Sized), method: &str, answer: Answer) -> u64 {
        self.answer_key(self.call_key(call_id), method, answer)
    }

    /// The part of [`Held::key`] that is the Call-ID's: each end hashes it once per call and
    /// keeps it (six keys a call were six hashes of Call-ID, method and kind, ~500 instructions,
    /// callgrind).
    pub fn call_key(&self, call_id: &(impl AsRef<[u8]> + ?Sized)) -> u64 {
        self.state.hash_one(call_id.as_ref())
    }

    /// [`Held::key`] of the call whose [`Held::call_key`] is `call`: that key with the method
    /// and kind mixed in (by an odd multiplier, so that no two of them mix in the same bits).
    pub fn answer_key(&self, call: u64, method: &str, answer: Answer) -> u64 {
        let method = match method {
            "INVITE" => 1,
            "BYE" => 2,
            "CANCEL" => 3,
            other => self.state.hash_one(other) | 4,
        };
        let kind = method << 1 | u64::from(answer == Answer::Final);
        call ^ kind.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The answer `key` left `held_us` after it was due (recorded once, when first sent).
    pub fn record(&mut self, key: u64, held_us: u64) {
        if self.held.len() >= self.limit {
            self.held.clear();
        }
        self.held.entry(key).or_insert(held_us);
    }

    /// How long the callee held the answer `key` (0 when it was not ours), forgotten then: each
    /// answer is timed once.
    pub fn take(&mut self, key: u64) -> u64 {
        self.held.remove(&key).unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_told_apart_recorded_once_and_taken_once() {
        let mut h = Held::default();
        let ringing = h.key("c1.1.a@bench", "INVITE", Answer::Provisional);
        let ok = h.key("c1.1.a@bench", "INVITE", Answer::Final);
        let bye = h.key("c1.1.a@bench", "BYE", Answer::Final);
        assert_ne!(ringing, ok);
        assert_ne!(ok, bye);
        assert_ne!(ok, h.key("c1.2.a@bench", "INVITE", Answer::Final));
        h.record(ringing, 700);
        h.record(ringing, 9_000); // a retransmitted answer does not move it
        h.record(ok, 40);
        assert_eq!((h.take(ringing), h.take(ok), h.take(bye)), (700, 40, 0));
        assert_eq!(h.take(ok), 0);
        assert!(h.is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let mut h = Held { limit: 100, ..Held::default() };
        for i in 0..105 {
            h.record(i, 1);
        }
        assert!(h.len() <= 100);
        assert_eq!(h.take(104), 1);
    }
}
