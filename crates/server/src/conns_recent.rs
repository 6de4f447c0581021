//! The connections one sending thread found lately, so that the next send on one of them takes
//! no registry lock, hash lookup and reference count.

use super::{Conn, Registry};
use herald_core::{ConnId, Transport};
use std::net::SocketAddr;
use std::sync::Arc;

/// How many connections a [`RecentConns`] remembers by id.
const RECENT: usize = 4;

/// The connections one sending thread last found by id ([`Registry::get`]), and the one it
/// last found by address ([`Registry::by_addr`]), so that the next send on one of them takes no
/// registry lock, hash lookup and reference count (about 60 instructions a send by id over TCP,
/// callgrind, issue 21: a call's responses go back on the connection its request came in on;
/// about 110 a send by address: the requests a proxy forwards to a phone registered over TCP,
/// or to a trunk, go by its address).
///
/// What a send finds here is what the registry would give:
/// * By id: ids are never reused, and a connection leaves the registry only after it is closed
///   (`stream::task::Guard`), so a remembered one that the registry no longer has refuses the
///   bytes as closed, which counts as not found. It is forgotten then.
/// * By address: the registry's map from address to connection changes when a connection opens
///   (a newer one to the same address replaces the older) or leaves it, and each change moves
///   [`Registry::addr_epoch`]. The memo keeps the epoch read before its lookup and holds only
///   while the epoch still reads the same: no change since, so the lookup would find the same
///   connection (or, read before a change another thread is making, what a lookup made just
///   before it would have found).
///
/// Memory: at most [`RECENT`] + 1 connections kept past their end (with what was still queued on
/// them, up to `tcp_write_queue_bytes` each) per thread.
#[derive(Default)]
pub(crate) struct RecentConns {
    slots: [Option<Arc<Conn>>; RECENT],
    /// The slot the next connection found in the registry takes.
    next: usize,
    /// The connection last found by address, and the registry's address epoch read before.
    pub(in crate::conns) last_by_addr: Option<(Arc<Conn>, u64)>,
}

impl RecentConns {
    /// Connection `id`, remembered or from `registry`; `None` when it is not registered.
    pub(crate) fn get(&mut self, registry: &Registry, id: ConnId) -> Option<&Arc<Conn>> {
        let i = match self.slots.iter().position(|s| s.as_ref().is_some_and(|c| c.id == id)) {
            Some(i) => i,
            None => {
                let conn = registry.get(id)?;
                let i = self.next;
                self.next = (i + 1) % RECENT;
                self.slots[i] = Some(conn);
                i
            }
        };
        self.slots[i].as_ref()
    }

    /// The connection `registry.by_addr(transport, addr)` finds, remembered while the
    /// registry's by-address map has not changed.
    pub(crate) fn by_addr(
        &mut self,
        registry: &Registry,
        transport: Transport,
        addr: SocketAddr,
    ) -> Option<&Arc<Conn>> {
        let epoch = registry.addr_epoch();
        let hit = self
            .last_by_addr
            .as_ref()
            .is_some_and(|(c, at)| *at == epoch && c.peer == addr && c.transport == transport);
        if !hit {
            self.last_by_addr = Some((registry.by_addr(transport, addr)?, epoch));
        }
        self.last_by_addr.as_ref().map(|(c, _)| c)
    }

    /// Forgets connection `id` (found closed).
    pub(crate) fn forget(&mut self, id: ConnId) {
        for s in &mut self.slots {
            if s.as_ref().is_some_and(|c| c.id == id) {
                *s = None;
            }
        }
        if self.last_by_addr.as_ref().is_some_and(|(c, _)| c.id == id) {
            self.last_by_addr = None;
        }
    }
}
