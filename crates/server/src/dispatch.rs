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
use crate::ingress::{self, Arrival};
use crate::metrics::{BatchClock, MsgType, Wire, WorkerMetrics};
use crate::runtime::{HandedItem, Reader};
use crate::shards::{LoadGauges, Shards};
use crate::shared::{Shared, WorkerCommon};
use crate::source_budget;
use crate::stats::Bump;
use admission::Admission;
use bytes::Bytes;
use herald_core::{inbound, Input, Output, Peer, SipHandler};
use herald_sip::peek::Peek;
use herald_sip::{Framing, HeaderName, Message};
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
                // Reached only where the peek and the parse disagree (`owner_elsewhere`): counted.
                // Nothing is charged on the way: only sources without a per-source budget (trusted,
                // or no `[flood]`) are handed over (`may_hand_over`, admission's `charge`).
                debug_assert!(charge.is_none(), "a request handed over would go uncharged");
                self.shared.stats.workers[self.common.id].udp_handed_parsed.bump();
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
        let started =
            self.shards.handle(shard, Input::Message { from, local, msg }, now, &mut self.out, &mut self.egress);
        let cost = source_budget::Cost::of(&self.out, &from, len, started);
        if !self.shared.budgets.charge(from.addr.ip(), cost, now) {
            tracing::debug!(source = %from.addr.ip(), "per-source budget table full: request not charged");
        }
        self.dispatch(shard, now);
    }

    /// Carries out what engine shard `shard` asked for at `now`. Most timer runs ask for
    /// nothing: they return before the drain (whose set-up and drop cost ~50 instructions).
    /// The outputs are drained in place (not taken out of `self` and put back: the put-back's
    /// drop of the empty vector was one more call per message, callgrind, issue 21).
    ///
    /// A single output (most messages: the one forwarded) is popped: the same order, without a
    /// drain to set up and drop (~35 instructions a message, ~210 per UDP call, callgrind,
    /// issue 21).
    fn dispatch(&mut self, shard: usize, now: Instant) {
        let (shared, common, egress) = (&self.shared, &self.common, &mut self.egress);
        if self.out.len() <= 1 {
            if let Some(o) = self.out.pop() {
                carry_out(shared, common, egress, shard, o, now);
            }
            return;
        }
        for o in self.out.drain(..) {
            carry_out(shared, common, egress, shard, o, now);
        }
    }
}

/// Carries out one output of engine shard `shard` at `now`.
///
/// A send (nearly every output) is carried out here, inline where the output was taken: the
/// usual datagram is queued by `Egress::send`'s inline path. The rarer outputs are
/// [`carry_out_other`]'s, out of line. As one function with a name lookup's task set-up in it,
/// every output was a call with a ~2.9 KB frame to set up and tear down, and the output copied
/// once more to pass it (~90 instructions an output, seven a UDP call, callgrind, issue 21).
#[inline(always)]
fn carry_out(shared: &Shared, common: &WorkerCommon, egress: &mut Egress, shard: usize, o: Output, now: Instant) {
    match o {
        Output::Send { to, bytes } => egress.send(to, bytes, Some(shard), now),
        other => carry_out_other(shared, common, egress, shard, other, now),
    }
}

/// [`carry_out`] of any output, out of line (called with the outputs that are not sends).
#[inline(never)]
fn carry_out_other(shared: &Shared, common: &WorkerCommon, egress: &mut Egress, shard: usize, o: Output, now: Instant) {
    match o {
        Output::Send { to, bytes } => egress.send(to, bytes, Some(shard), now),
        Output::Resolve { token, request } => resolve::spawn(shared, common, shard, token, request),
        Output::PingDone { token, outcome } => shared.pings.deliver(token, outcome),
    }
}

impl<H: SipHandler> Dispatcher<H> {
    /// The worker a busy receiver hands `datagram` to unparsed, if any: only while it hands over,
    /// only a trusted source's, and only when a peek finds its Call-ID ([`Peek`]: the start line
    /// and the header lines up to the first Call-ID, read by the parser's own line reader, so
    /// that the value is the one [`Message::get`] gives for any message that parses) and it
    /// names a shard another worker owns. Everything else is parsed here.
    pub(crate) fn owner_elsewhere(&self, from: &Peer, datagram: &[u8]) -> Option<usize> {
        if !self.balance.as_ref().is_some_and(|b| b.on) || !balance::may_hand_over(&self.shared, from) {
            return None;
        }
        let peek = Peek::new(datagram, &self.shared.limits).ok()?;
        let [call_id] = peek.first_of([HeaderName::CallId]).ok()?;
        let call_id = call_id?;
        let owner = inbound::shard_of(call_id, self.shards.len()) % self.shared.workers;
        (owner != self.common.id).then_some(owner)
    }

    /// Queues a message for worker `owner` (see `Balance::queue`). Called only with an owner
    /// from [`Dispatcher::owner_elsewhere`], which names one only while a balance hands over:
    /// there is always a balance here. Were there none, a release build would lose this one
    /// message rather than stop the receiver thread; debug builds (the tests) stop.
    pub(crate) fn pass_on(&mut self, owner: usize, item: HandedItem) {
        debug_assert!(self.balance.is_some(), "a message handed over without a balance would be lost");
        if let Some(b) = self.balance.as_mut() {
            b.queue(&self.shared, &self.common, owner, item);
        }
    }

    /// A datagram another worker's receiver handed over unparsed ([`HandedItem::Datagram`]),
    /// on the owner's loop: classified, admitted and handled as its receiver would have, but
    /// here. Admission uses the reader's shedding as well as this worker's state.
    /// The peeked Call-ID's shard is this worker's; the parse's is the same for every message
    /// whose Call-ID is valid (the peek reads the value the parse does). When it is not (an
    /// invalid Call-ID, sharded by source address, if the receipt checks let it through), the
    /// message is handled in the parsed shard under that shard's lock, which is safe; only that
    /// odd message's order against the dialog's others is not guaranteed.
    pub(crate) fn handed_datagram(
        &mut self,
        reader: Reader,
        from: Peer,
        local: SocketAddr,
        bytes: Bytes,
        wait_ns: Option<u64>,
        now: Instant,
    ) {
        let mut clock = self.measure.then(BatchClock::start);
        match ingress::receive(&self.shared, reader.worker, bytes, &from, Framing::Datagram, false) {
            Arrival::Message(msg) => {
                let kind = self.measure.then(|| MsgType::of(&msg));
                self.route_as(from, local, msg, now, reader.shedding);
                if let (Some(c), Some(kind)) = (clock.as_mut(), kind) {
                    let (service, _) = c.lap(None);
                    self.metrics().handled(kind, Wire::Udp, service, wait_ns);
                }
            }
            Arrival::Answer { bytes, .. } => self.egress.reply(reader.socket, from.addr, bytes),
            Arrival::Dropped { .. } => {}
        }
    }
}
