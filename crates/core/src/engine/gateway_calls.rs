//! What one engine remembers of its gateway attempts between messages (`failover`): their
//! per-attempt deadlines, and the established calls that count as active at a destination
//! until their BYE. A leaf: `Engine` holds it, `failover` drives it.

use crate::gateways::Health;
use crate::transaction::TxId;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an established gateway call stays counted as active without a BYE seen.
pub const ESTABLISHED_TTL: Duration = Duration::from_secs(4 * 3600);
/// Established gateway calls one engine remembers at most.
pub const MAX_ESTABLISHED: usize = 65_536;

#[derive(Debug, Default)]
pub(super) struct GatewayCalls {
    /// Per-attempt timeouts: (deadline, server transaction, branch). Stale entries (the
    /// attempt was answered, the context is gone) are skipped by the caller.
    deadlines: BinaryHeap<Reverse<(Instant, TxId, usize)>>,
    /// Established gateway calls by Call-ID: the destination's health and the call's key in
    /// `expiry`. Keyed by text peers choose: std's hasher (SipHash, randomly keyed).
    established: HashMap<String, (Arc<Health>, (Instant, u64))>,
    /// (forget at, sequence) → Call-ID: the same calls in the order they expire, so that both
    /// stay bounded by [`MAX_ESTABLISHED`] (a call that ends leaves both).
    expiry: BTreeMap<(Instant, u64), String>,
    /// Tells apart calls that expire at the same instant.
    seq: u64,
}

impl GatewayCalls {
    /// Arms the per-attempt timeout of branch `idx` of `sid`.
    pub(super) fn arm(&mut self, at: Instant, sid: TxId, idx: usize) {
        self.deadlines.push(Reverse((at, sid, idx)));
    }

    /// The next attempt whose deadline is due at `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(TxId, usize)> {
        let Reverse((at, sid, idx)) = *self.deadlines.peek()?;
        if at > now {
            return None;
        }
        self.deadlines.pop();
        Some((sid, idx))
    }

    /// The earliest instant something here is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Remembers the call `call_id`, established at the destination of `health` (which
    /// already counts it active). False when it is not remembered - a dialog of that Call-ID
    /// is counted already, or [`MAX_ESTABLISHED`] are - and the caller must uncount it.
    pub(super) fn established(&mut self, now: Instant, call_id: &str, health: &Arc<Health>) -> bool {
        if self.established.contains_key(call_id) || self.established.len() >= MAX_ESTABLISHED {
            return false;
        }
        self.seq += 1;
        let key = (now + ESTABLISHED_TTL, self.seq);
        self.established.insert(call_id.to_owned(), (health.clone(), key));
        self.expiry.insert(key, call_id.to_owned());
        true
    }

    /// The call `call_id` ended (its BYE): the health that counted it, if it was remembered.
    pub(super) fn ended(&mut self, call_id: &str) -> Option<Arc<Health>> {
        if self.established.is_empty() {
            return None;
        }
        let (health, key) = self.established.remove(call_id)?;
        self.expiry.remove(&key);
        Some(health)
    }

    /// Forgets the calls remembered for [`ESTABLISHED_TTL`] by `now`, uncounting them.
    pub(super) fn expire(&mut self, now: Instant) {
        while let Some(entry) = self.expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let call_id = entry.remove();
            if let Some((health, _)) = self.established.remove(&call_id) {
                health.active_dec();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_calls_end_by_bye_or_expire_and_are_bounded_per_call_id() {
        let t = Instant::now();
        let h = Arc::new(Health::new(t));
        let mut c = GatewayCalls::default();
        for _ in 0..2 {
            h.active_inc();
        }
        assert!(c.established(t, "a", &h));
        assert!(!c.established(t, "a", &h), "one dialog per Call-ID");
        assert!(c.established(t, "b", &h));
        assert!(Arc::ptr_eq(&c.ended("a").unwrap(), &h));
        assert!(c.ended("a").is_none());
        c.expire(t + ESTABLISHED_TTL - Duration::from_secs(1));
        assert_eq!(h.active(), 2, "the caller uncounts what it ended");
        c.expire(t + ESTABLISHED_TTL);
        assert_eq!(h.active(), 1, "b expired");
        assert!(c.ended("b").is_none());
        assert!(c.established.is_empty() && c.expiry.is_empty(), "nothing left behind");
    }

    #[test]
    fn deadlines_come_due_in_order() {
        let t = Instant::now();
        let mut c = GatewayCalls::default();
        c.arm(t + Duration::from_secs(2), TxId(1), 0);
        c.arm(t + Duration::from_secs(1), TxId(2), 1);
        assert_eq!(c.next_due(), Some(t + Duration::from_secs(1)));
        assert_eq!(c.pop_due(t), None);
        assert_eq!(c.pop_due(t + Duration::from_secs(3)), Some((TxId(2), 1)));
        assert_eq!(c.pop_due(t + Duration::from_secs(3)), Some((TxId(1), 0)));
        assert_eq!(c.pop_due(t + Duration::from_secs(3)), None);
    }
}
