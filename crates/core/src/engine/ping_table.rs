//! The pings one engine has in flight (`pings` drives them): a leaf, held by `Engine`. Every
//! entry goes when its transaction ends or its deadline passes, so what it holds is bounded by
//! the pings of the last Timer F (and [`crate::ping::MAX_PINGS_IN_FLIGHT`] unreported ones).

use crate::hash::IdMap;
use crate::ping::Ping;
use crate::transaction::TxId;
use std::collections::BTreeSet;
use std::time::Instant;

/// A ping's client transaction.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The ping's token until its outcome is reported; the transaction lives on after that,
    /// absorbing retransmitted responses.
    token: Option<u64>,
    /// The ping's own deadline, while unreported.
    deadline: Option<Instant>,
}

/// The pings of one engine.
#[derive(Debug, Default)]
pub(super) struct Pings {
    by_tx: IdMap<TxId, Slot>,
    /// DNS token → (ping token, ping), while its target's name is looked up.
    resolving: IdMap<u64, (u64, Ping)>,
    /// The unreported pings' own deadlines.
    deadlines: BTreeSet<(Instant, TxId)>,
    /// Entries of `by_tx` whose outcome is not reported yet.
    unreported: usize,
}

impl Pings {
    /// Whether client transaction `id` is a ping's.
    pub(super) fn owns(&self, id: TxId) -> bool {
        self.by_tx.contains_key(&id)
    }

    /// Whether DNS token `token` is a ping's lookup.
    pub(super) fn is_resolving(&self, token: u64) -> bool {
        self.resolving.contains_key(&token)
    }

    /// The pings' client transactions (for a transport error towards their peer).
    pub(super) fn transactions(&self) -> impl Iterator<Item = TxId> + '_ {
        self.by_tx.keys().copied()
    }

    /// The earliest ping deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// Pings not reported yet (looked up or sent).
    pub(super) fn in_flight(&self) -> usize {
        self.unreported + self.resolving.len()
    }

    /// Ping `token` waits for DNS answer `dns`.
    pub(super) fn resolving(&mut self, dns: u64, token: u64, ping: Ping) {
        self.resolving.insert(dns, (token, ping));
    }

    /// The ping that waited for DNS answer `dns`.
    pub(super) fn resolved(&mut self, dns: u64) -> Option<(u64, Ping)> {
        self.resolving.remove(&dns)
    }

    /// Ping `token` was sent in client transaction `id`, to be reported by `deadline` at the
    /// latest.
    pub(super) fn sent(&mut self, id: TxId, token: u64, deadline: Option<Instant>) {
        self.by_tx.insert(id, Slot { token: Some(token), deadline });
        self.unreported += 1;
        if let Some(at) = deadline {
            self.deadlines.insert((at, id));
        }
    }

    /// Takes the token of transaction `id` to report its outcome: once (then `None`).
    pub(super) fn report(&mut self, id: TxId) -> Option<u64> {
        let slot = self.by_tx.get_mut(&id)?;
        let token = slot.token.take()?;
        self.unreported -= 1;
        if let Some(at) = slot.deadline.take() {
            self.deadlines.remove(&(at, id));
        }
        Some(token)
    }

    /// Transaction `id` ended: forgets it, and returns its token if never reported.
    pub(super) fn forget(&mut self, id: TxId) -> Option<u64> {
        let token = self.report(id);
        self.by_tx.remove(&id);
        token
    }

    /// The first unreported ping whose deadline is due at `now`: forgotten, with its token.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(TxId, u64)> {
        let &(at, id) = self.deadlines.first()?;
        if at > now {
            return None;
        }
        self.forget(id).map(|token| (id, token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ping_is_reported_once_and_forgotten_when_its_transaction_ends() {
        let t = Instant::now();
        let mut p = Pings::default();
        p.sent(TxId(1), 7, Some(t + Duration::from_secs(2)));
        p.sent(TxId(2), 8, None);
        assert_eq!((p.in_flight(), p.next_deadline()), (2, Some(t + Duration::from_secs(2))));
        assert_eq!(p.report(TxId(1)), Some(7));
        assert_eq!(p.report(TxId(1)), None);
        assert_eq!((p.in_flight(), p.next_deadline()), (1, None), "a reported ping has no deadline");
        assert!(p.owns(TxId(1)));
        assert_eq!(p.forget(TxId(1)), None);
        assert!(!p.owns(TxId(1)));
        assert_eq!(p.forget(TxId(2)), Some(8), "ended unreported");
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn due_deadlines_come_in_order() {
        let t = Instant::now();
        let mut p = Pings::default();
        p.sent(TxId(1), 1, Some(t + Duration::from_secs(3)));
        p.sent(TxId(2), 2, Some(t + Duration::from_secs(1)));
        assert_eq!(p.pop_due(t), None);
        assert_eq!(p.pop_due(t + Duration::from_secs(5)), Some((TxId(2), 2)));
        assert_eq!(p.pop_due(t + Duration::from_secs(5)), Some((TxId(1), 1)));
        assert_eq!(p.pop_due(t + Duration::from_secs(5)), None);
        assert!(!p.owns(TxId(1)));
    }
}
