//! What a durable copy of the location store is told, and when (issue 19: durable
//! registrations, like Kamailio usrloc's `db_mode`).
//!
//! The store calls its [`Journal`] for every change a registrar or an operator makes — `apply`,
//! `remove_all`, `remove_binding`, `remove_aor` — *under the shard lock of the changed AoR*,
//! with the AoR's complete binding list after the change. Two changes of one AoR therefore reach
//! the journal in the order they were made, and a journal that keeps only the latest state of
//! each AoR is always right. Not journaled: expiry (every copy expires its own bindings; a loader
//! drops what expired), and `restore`/`replace` (they bring state *from* a copy).

use crate::{Aor, Binding};

/// Receives every journaled change. Called with the shard's write lock held: it must be quick
/// and must never call back into the store (queue the change; write it on another thread).
pub trait Journal<S>: Send + Sync {
    /// Takes note of `change` and says when it will be durable.
    fn record(&self, change: &AorBindings<'_, S>) -> Ticket;

    /// Every ticket up to this one is durable. The default, for journals that never make
    /// anyone wait, is the largest ticket.
    fn durable(&self) -> Ticket {
        Ticket(u64::MAX)
    }

    /// Whether this journal was told of a change of `aor` that a copy being read back may
    /// predate (it was not yet written when the copy was read). [`crate::LocationStore::restore`]
    /// asks it under the AoR's lock and then leaves the AoR alone: what the store holds is
    /// newer, even when that is nothing (a `Contact: *` during the start-up load).
    fn has_newer(&self, _aor: &Aor) -> bool {
        false
    }
}

/// Where the store reads an AoR it does not hold while a durable copy is still being loaded in
/// the background (start-up with many stored bindings: herald serves at once, and a request for
/// a user not yet loaded reads that user from the copy).
pub trait Backfill<S>: Send + Sync {
    /// Whether the load is still running (checked on every miss: keep it to an atomic load).
    fn loading(&self) -> bool;

    /// The stored bindings of `aor`, oldest update first, each `expires_at` holding the seconds
    /// it has left (as [`crate::LocationStore::restore`] takes them); `None` when there are none.
    fn fetch(&self, aor: &Aor) -> Option<Vec<Binding<S>>>;
}

/// When a change is durable: a sequence number a journal hands out, in increasing order. The
/// runtime holds what must wait for a change (a write-through REGISTER's 200 OK) until its
/// journal reports that every ticket up to this one is committed. [`Ticket::DURABLE`] (0) needs
/// no waiting: no journal, or one that does not make callers wait (write-back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

impl Ticket {
    /// Nothing to wait for.
    pub const DURABLE: Ticket = Ticket(0);

    /// Whether a caller may act at once.
    pub fn is_durable(self) -> bool {
        self == Ticket::DURABLE
    }

    /// The later of two tickets: waiting for it waits for both.
    pub fn max(self, other: Ticket) -> Ticket {
        Ticket(self.0.max(other.0))
    }
}

/// The bindings of one AoR at one moment, as the journal and a scan see them.
///
/// Expiry times in a [`Binding`] are seconds since the store's epoch, which only the store
/// knows; [`AorBindings::expires_in`] turns them into the seconds left at the time of the
/// change, which a durable copy adds to its wall clock.
#[derive(Debug, Clone, Copy)]
pub struct AorBindings<'a, S> {
    pub(crate) aor: &'a Aor,
    pub(crate) bindings: &'a [Binding<S>],
    pub(crate) now_s: u32,
}

impl<'a, S> AorBindings<'a, S> {
    pub fn aor(&self) -> &'a Aor {
        self.aor
    }

    /// The unexpired bindings, oldest update first (the order [`crate::LocationStore::restore`]
    /// takes them back in).
    pub fn live(&self) -> impl Iterator<Item = &'a Binding<S>> + 'a {
        let now_s = self.now_s;
        self.bindings.iter().filter(move |b| b.expires_at > now_s)
    }

    /// No unexpired binding: the AoR is gone (a durable copy deletes it).
    pub fn is_gone(&self) -> bool {
        self.live().next().is_none()
    }

    /// Seconds `binding` had left at the moment of the change (0 if it had expired).
    pub fn expires_in(&self, binding: &Binding<S>) -> u32 {
        binding.expires_at.saturating_sub(self.now_s)
    }
}

/// What [`crate::LocationStore::apply`] did: the AoR's bindings afterwards (ordered as a lookup
/// orders them) and when the change is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied<S> {
    pub bindings: Vec<Binding<S>>,
    pub ticket: Ticket,
}

/// What a removal did: how many unexpired bindings went, and when the change is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub count: usize,
    pub ticket: Ticket,
}
