//! What the threads of a worker do with a message once it is read: admission (module
//! `admission`: the runtime's protections and the engine shard it belongs to), the engine
//! shard's `handle`, and carrying out its outputs (module `egress` for sends, module `resolve`
//! for name lookups). Busy UDP receivers hand messages of other workers' shards to their owners
//! (module `balance`).
//!
//! A worker has a UDP receiver thread per UDP socket (module `udp_receiver`: blocking recvmmsg,
//! no event loop) and a tokio thread for TCP, control messages and timers (module `worker`).
//! Each owns a [`Dispatcher`]; the two share the worker's sockets, resolver and load state.
//! Both run inside the worker's runtime context (the receivers enter it), so outputs that need a
//! task - a TCP connect, a DNS lookup - start one on the worker's runtime.
//!
//! Admission runs here, where the message is handled, not where it was read: a connection's
//! task reads several requests before its worker handles the first, and each must pass the
//! flood guard after its predecessors were handled (an authentication failure bans before the
//! next guess is admitted).

mod admission;
mod balance;
mod resolve;

pub(crate) use balance::Balance;

use crate::egress::Egress;
use crate::metrics::WorkerMetrics;
use crate::runtime::HandedItem;
use crate::shards::{LoadGauges, Shards};
use crate::shared::{Shared, WorkerCommon};
use crate::source_budget;
use admission::Admission;
use herald_core::{inbound, Input, Output, Peer, SipHandler};
use herald_sip::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

pub(crate) struct Dispatcher<H> {
    pub shared: Arc<Shared>,
    pub shards: Arc<Shards<H>>,
    pub common: Arc<WorkerCommon>,
    /// `[metrics] listen` is set: time every message handled.
    pub measure: bool,
    /// A UDP receiver's, when there are other workers to balance with.
    pub balance: Option<Balance>,
    /// Where everything this thread sends leaves.
    pub egress: Egress,
    /// This thread's refresh of the worker's load gauges (asked by admission).
    gauges: LoadGauges,
    out: Vec<Output>,
}

impl<H: SipHandler> Dispatcher<H> {
    pub(crate) fn new(shared: Arc<Shared>, shards: Arc<Shards<H>>, common: Arc<WorkerCommon>) -> Dispatcher<H> {
        let measure = shared.config.metrics.listen.is_some();
        let egress = Egress::new(shared.clone(), common.clone());
        Dispatcher {
            shared,
            shards,
            common,
            measure,
            balance: None,
            egress,
            gauges: LoadGauges::new(),
            out: Vec::new(),
        }
    }

    pub(crate) fn id(&self) -> usize {
        self.common.id
    }

    pub(crate) fn metrics(&self) -> &WorkerMetrics {
        &self.shared.stats.metrics[self.common.id]
    }

    /// Hands `input` to engine shard `shard` (under its lock) at `now` (when the caller read
    /// it, or later: see `Shards::guarded`) and carries out what it asks for.
    pub(crate) fn handle(&mut self, shard: usize, input: Input, now: Instant) {
        self.shards.handle(shard, input, now, &mut self.out, &mut self.egress);
        self.dispatch(shard, now);
    }

    /// Runs shard `shard`'s due timers and carries out what they ask for.
    pub(crate) fn handle_timeouts(&mut self, shard: usize, now: Instant) {
        self.shards.handle_timeouts(shard, now, &mut self.out, &mut self.egress);
        self.dispatch(shard, now);
    }

    /// Admits a message ([`admission::admit`]) and handles it in its engine shard. One peer's
    /// messages reach one thread (the reuseport hash for UDP, the owning worker for a TCP
    /// connection) and are handled in arrival order - there, or, from a backed-up UDP receiver,
    /// by the shard's owner (module `balance`) - so each dialog keeps its per-direction order.
    /// `now`: when the message's batch was read (one clock read per batch, not per message).
    pub(crate) fn route(&mut self, from: Peer, local: SocketAddr, msg: Message, now: Instant) {
        self.route_as(from, local, msg, now, false);
    }

    /// [`Dispatcher::route`] of a message another worker's receiver read: `shedding`, that
    /// worker shed new requests when it handed the message over (module `balance`).
    pub(crate) fn route_as(&mut self, from: Peer, local: SocketAddr, msg: Message, now: Instant, shedding: bool) {
        let (shards, common, gauges) = (&self.shards, &self.common, &mut self.gauges);
        let refresh = || gauges.refresh(shards, common, now);
        let charge = match admission::admit(&self.shared, common, &from, &msg, now, shedding, refresh) {
            Admission::Handle { charge } => charge,
            // Back to where the request came from, as rport (RFC 3581) would have it: the
            // request's Via is not worth a DNS lookup for a stateless refusal.
            Admission::Refuse(bytes) => return self.egress.send(from, bytes, None, now),
            Admission::Drop => return,
        };
        let shard = inbound::shard(&msg, &from.addr, self.shards.len());
        if let Some(b) = self.balance.as_mut().filter(|b| b.on) {
            // Inside the branch: a division per message otherwise (~11 instructions).
            let owner = shard % self.shared.workers;
            if owner != self.common.id && balance::may_hand_over(&self.shared, &from) {
                // In the same batch as the datagrams handed over unparsed: one way per owner,
                // so that a dialog's messages keep their order whichever way they were read.
                b.queue(&self.shared, &self.common, owner, HandedItem::Parsed { from, local, msg, shard });
                return;
            }
        }
        if charge.is_none() {
            self.handle(shard, Input::Message { from, local, msg }, now);
            return;
        }
        // What the engine made of the request is in `out` before it is carried out: charge it.
        let len = msg.as_bytes().len();
        self.shards.handle(shard, Input::Message { from, local, msg }, now, &mut self.out, &mut self.egress);
        let cost = source_budget::Cost::of(&self.out, &from, len);
        if !self.shared.budgets.charge(from.addr.ip(), cost, now) {
            tracing::debug!(source = %from.addr.ip(), "per-source budget table full: request not charged");
        }
        self.dispatch(shard, now);
    }

    /// Carries out what engine shard `shard` asked for at `now`. Most timer runs ask for
    /// nothing: they return before the drain (whose set-up and drop cost ~50 instructions).
    /// The outputs are drained in place (not taken out of `self` and put back: the put-back's
    /// drop of the empty vector was one more call per message, callgrind, issue 21).
    fn dispatch(&mut self, shard: usize, now: Instant) {
        if self.out.is_empty() {
            return;
        }
        let (shared, common, egress) = (&self.shared, &self.common, &mut self.egress);
        for o in self.out.drain(..) {
            match o {
                Output::Send { to, bytes } => egress.send(to, bytes, Some(shard), now),
                Output::Resolve { token, request } => resolve::spawn(shared, common, shard, token, request),
                Output::PingDone { token, outcome } => shared.pings.deliver(token, outcome),
            }
        }
    }
}
