//! The pings one engine has in flight (`pings` drives them): a leaf, held by `Engine`.

use crate::hash::IdMap;
use crate::ping::Ping;
use crate::transaction::TxId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// The pings of one engine.
#[derive(Debug, Default)]
pub(super) struct Pings {
    /// Client transaction → the ping's token; `None` once its outcome was reported (the
    /// transaction lives on to absorb retransmitted responses).
    pub(super) by_tx: IdMap<TxId, Option<u64>>,
    /// DNS token → (ping token, ping), while its target's name is looked up.
    pub(super) resolving: IdMap<u64, (u64, Ping)>,
    /// Pings' own deadlines (shorter than Timer F); stale entries are skipped.
    pub(super) deadlines: BinaryHeap<Reverse<(Instant, TxId)>>,
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
        self.deadlines.peek().map(|Reverse((at, _))| *at)
    }

    pub(super) fn in_flight(&self) -> usize {
        self.by_tx.values().filter(|t| t.is_some()).count() + self.resolving.len()
    }
}
