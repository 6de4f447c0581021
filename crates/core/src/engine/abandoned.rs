//! Client transactions that still live although no branch waits for them any more: a gateway
//! attempt given up by its per-attempt timeout (`failover`), and an INVITE branch still pending
//! when its response context ended (`cancel::orphan_pending_branches`). RFC 3261 §9.1 forbids a
//! CANCEL before a provisional, so such a transaction gets its CANCEL at its first provisional
//! (which is not relayed); a late 2xx is relayed like any 2xx (§16.7 step 4), any other final
//! response is absorbed; a CANCELled one is dropped 64*T1 after its CANCEL if no final response
//! came, since in Proceeding an INVITE client transaction has no timer of its own. A leaf:
//! `Engine` holds it, `cancel` drives it.

use crate::hash::IdMap;
use crate::transaction::TxId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

#[derive(Debug, Default)]
pub(super) struct Abandoned {
    /// The transactions, until they end: true once a CANCEL went (an INVITE that sent a
    /// provisional).
    live: IdMap<TxId, bool>,
    /// When a CANCELled one is dropped if no final response came (64*T1 after the CANCEL).
    give_up: BinaryHeap<Reverse<(Instant, TxId)>>,
}

impl Abandoned {
    /// Client transaction `id` no longer has a branch waiting for it.
    pub(super) fn abandon(&mut self, id: TxId) {
        self.live.insert(id, false);
    }

    /// Whether `id` is abandoned, and whether it was CANCELled.
    pub(super) fn get(&self, id: TxId) -> Option<bool> {
        self.live.get(&id).copied()
    }

    /// A CANCEL went for abandoned `id`: drop it at `give_up_at` unless it ends before.
    pub(super) fn cancelled(&mut self, id: TxId, give_up_at: Instant) {
        if let Some(c) = self.live.get_mut(&id) {
            *c = true;
            self.give_up.push(Reverse((give_up_at, id)));
        }
    }

    /// Transaction `id` ended.
    pub(super) fn ended(&mut self, id: TxId) {
        self.live.remove(&id);
    }

    /// The next CANCELled transaction to drop at `now` (forgotten here).
    pub(super) fn pop_give_up(&mut self, now: Instant) -> Option<TxId> {
        while let Some(&Reverse((at, id))) = self.give_up.peek() {
            if at > now {
                return None;
            }
            self.give_up.pop();
            if self.live.remove(&id).is_some() {
                return Some(id);
            }
        }
        None
    }

    /// The earliest instant a transaction here is due to be dropped.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.give_up.peek().map(|Reverse((at, _))| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_abandoned_transaction_is_given_up_only_once_cancelled_and_still_there() {
        let t = Instant::now();
        let mut c = Abandoned::default();
        c.abandon(TxId(1));
        c.abandon(TxId(2));
        assert_eq!(c.get(TxId(1)), Some(false));
        c.cancelled(TxId(1), t + Duration::from_secs(32));
        c.cancelled(TxId(2), t + Duration::from_secs(30));
        c.ended(TxId(2)); // its final response came
        assert_eq!(c.next_due(), Some(t + Duration::from_secs(30)));
        assert_eq!(c.pop_give_up(t + Duration::from_secs(31)), None);
        assert_eq!(c.pop_give_up(t + Duration::from_secs(32)), Some(TxId(1)));
        assert_eq!(c.get(TxId(1)), None);
        assert_eq!(c.next_due(), None);
    }
}
