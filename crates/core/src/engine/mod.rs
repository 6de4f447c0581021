//! The engine: one per shard of the runtime, used by one thread at a time (docs/design/serve.md).
//! It drives the transaction layer (RFC 3261 §17), the proxy core (§16) and the registrar (§10.3)
//! as one `SipHandler`: messages, DNS answers and time in; sends and lookups out.
//!
//! `Engine`'s state is defined here and its methods are spread over one file per step:
//! a request enters in `requests` and passes `validate` (§16.3) and `auth_gate` (§22); `targets`
//! (§16.5, with `delivery` for registered contacts, `flows` for RFC 5626 flow tokens and
//! `route_rules` for the `[[route]]` table) says where it goes, or `local_answers` answer
//! it; `fork` sends its branches (`record_route`, `forward_edits`), `responses` collects their
//! answers (§16.7) with `timer_c` keeping each INVITE branch's Timer C (§16.8), `cancel` handles
//! CANCEL (§16.10) and `stateless` forwards without state (§16.11). They depend on this file,
//! on leaf modules (`context`, `hop`, `config`, `timer_c`) and on one another one way only
//! (scripts/module_cycles.py finds no cycle).

mod abandoned;
mod auth_gate;
mod cancel;
mod config;
mod config_updates;
mod contact_facts;
mod context;
mod decisions;
mod delivery;
mod durable;
mod durable_waits;
mod failover;
mod flows;
mod fork;
mod forward_edits;
mod gateway_calls;
mod gateway_plan;
mod hop;
mod local_answers;
mod nat_edits;
mod ping_table;
mod pings;
mod record_route;
mod requests;
mod response_vias;
mod responses;
mod route_rules;
mod stateless;
mod stats;
mod targets;
#[cfg(test)]
mod tests;
mod timer_c;
mod trace;
mod validate;

pub use config::{EngineConfig, Forking, Listener, RecordRoute, SourceRoute};
pub use config_updates::ConfigUpdates;
pub use hop::{hop_for, Hop};
pub use stats::ResponseStats;

use crate::auth::Authenticator;
use crate::hash::{fnv1a_parts, IdMap};
use crate::io::{Input, Output, SipHandler, TimeoutWaker};
use crate::peer::Peer;
use crate::proxy::flow_token::FlowTokens;
use crate::proxy::own_values::OwnTexts;
use crate::registrar::Registrar;
use crate::transaction::{Actions, BranchGen, TransactionTable, TxAction, TxId};
use contact_facts::ContactCache;
use context::Context;
use herald_sip::{Message, ResponseBuilder};
use herald_store::LocationStore;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;
use timer_c::TimerC;

/// Expired registrations are removed incrementally: at most this many per `handle_timeouts`
/// (ARCHITECTURE.md: never a full sweep); while more are due, `poll_timeout` stays due.
const EXPIRE_BUDGET: usize = 512;

/// Transactions an engine's tables have room for from the start (and response contexts and
/// branches, half as many each): about what each of a runtime's 64 shards holds at 50 calls/s,
/// a transaction living 32 s after it ends (`TransactionTable::with_room`).
const ROOM: usize = 128;

pub struct Engine {
    cfg: Arc<EngineConfig>,
    store: Arc<LocationStore<Peer>>,
    registrar: Registrar,
    txs: TransactionTable,
    /// Response contexts, keyed by their server transaction. Boxed for the same reason as the
    /// transaction table's entries: a compacted INVITE context lingers 64*T1.
    contexts: IdMap<TxId, Box<Context>>,
    /// Client transaction → (server transaction, branch index).
    clients: IdMap<TxId, (TxId, usize)>,
    /// DNS token → (server transaction, branch index).
    resolving: IdMap<u64, (TxId, usize)>,
    /// The sum of the contexts' `held_bytes()` (the transactions' is the table's).
    context_bytes: usize,
    /// Timer C deadlines of the branches (§16.8).
    timer_c: TimerC,
    /// This engine removes the shared store's expired bindings (index 0: one engine of a
    /// runtime does, at the store's next expiry - not every engine on a period).
    expires_store: bool,
    next_token: u64,
    /// Keys the local tags (from the config's seed and this engine's index).
    tag_seed: u64,
    /// Branches of the requests this engine sends (from the same seed).
    branches: BranchGen,
    /// Our Via and Record-Route texts per listener, written once (`crate::proxy::own_values`).
    own_texts: OwnTexts,
    /// Digest authentication (RFC 3261 §22), shared by all engines; `None`: nobody is challenged.
    auth: Option<Arc<Authenticator>>,
    /// The responses this engine builds itself, by status (shared by the shards when given).
    responses: Arc<ResponseStats>,
    /// Mints and reads the flow tokens of herald's Path and Record-Route values (RFC 5626 §5.2),
    /// keyed from the config's seed: every shard reads every other's.
    flows: FlowTokens,
    /// OPTIONS of herald's own in flight (`pings`).
    pings: ping_table::Pings,
    /// Gateway attempts' timeouts and established calls (`gateway_calls`, driven by `failover`).
    gateway_calls: gateway_calls::GatewayCalls,
    /// Client transactions no branch waits for any more (`abandoned`).
    abandoned: abandoned::Abandoned,
    /// REGISTER answers waiting for their change to be durable (write-through location).
    durable: durable_waits::DurableWaits,
    /// Where a reloaded configuration comes from, and the generation of it this engine has.
    updates: Option<(Arc<ConfigUpdates>, u64)>,
    /// Registered contacts' URIs as read for delivery (`plan_location` runs under `&self`).
    contact_facts: RefCell<ContactCache>,
}

impl Engine {
    /// `index` tells engines of one process apart (the runtime's shard index): with the config's
    /// seed it keys local tags and branches, and it is the top 16 bits of this engine's DNS
    /// tokens and branch counter.
    pub fn new(cfg: Arc<EngineConfig>, store: Arc<LocationStore<Peer>>, registrar: Registrar, index: usize) -> Engine {
        let txs = TransactionTable::with_room(cfg.timers, cfg.seed.derive("transactions", index as u64), ROOM);
        let tag_seed = cfg.seed.derive("local tag", index as u64).keys()[0];
        let branches = BranchGen::new(cfg.seed, index as u16);
        let flows = FlowTokens::new(cfg.seed);
        Engine {
            cfg,
            store,
            registrar,
            txs,
            contexts: IdMap::with_capacity_and_hasher(ROOM / 2, Default::default()),
            clients: IdMap::with_capacity_and_hasher(ROOM / 2, Default::default()),
            resolving: IdMap::default(),
            context_bytes: 0,
            timer_c: TimerC::default(),
            expires_store: index == 0,
            next_token: (index as u64) << 48,
            tag_seed,
            branches,
            own_texts: OwnTexts::default(),
            auth: None,
            responses: Arc::default(),
            flows,
            pings: ping_table::Pings::default(),
            gateway_calls: gateway_calls::GatewayCalls::default(),
            abandoned: abandoned::Abandoned::default(),
            durable: durable_waits::DurableWaits::default(),
            updates: None,
            contact_facts: RefCell::default(),
        }
    }

    /// Takes the configuration `updates` publishes from the next call on (config reload);
    /// transactions and contexts are kept. The timers, seed and flow-token key of the
    /// configuration the engine was built with stay: they key state that is running.
    pub fn with_config_updates(mut self, updates: Arc<ConfigUpdates>) -> Engine {
        let seen = updates.generation();
        self.updates = Some((updates, seen));
        self
    }

    /// Switches to a newly published configuration, if any (one atomic load when none).
    /// Inlined into `handle` and `handle_timeouts`, the switch itself out of line: as a call
    /// of its own the usual "nothing new" cost about 14 instructions, most of them saving and
    /// restoring the registers the switch needs (issue 21).
    #[inline(always)]
    fn refresh_config(&mut self) {
        if let Some((updates, seen)) = &self.updates {
            if updates.has_newer_than(*seen) {
                self.switch_config();
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn switch_config(&mut self) {
        if let Some((updates, seen)) = &mut self.updates {
            if let Some((generation, cfg)) = updates.newer_than(*seen) {
                *seen = generation;
                self.cfg = cfg;
                // The kept texts' verdicts (`OwnTexts::is_own_route`) are for the old identity.
                self.own_texts = OwnTexts::default();
            }
        }
    }

    /// Challenges requests as `auth`'s policy says (RFC 3261 §22).
    pub fn with_auth(mut self, auth: Arc<Authenticator>) -> Engine {
        self.auth = Some(auth);
        self
    }

    /// Counts the responses this engine builds itself in `stats` (one table for all shards,
    /// exported as `herald_local_responses_total`).
    pub fn with_response_stats(mut self, stats: Arc<ResponseStats>) -> Engine {
        self.responses = stats;
        self
    }

    /// A To tag for responses herald generates itself (§8.2.6.2), stable for one request.
    fn local_tag(&self, req: &Message) -> String {
        let from_tag = req.from_tag().ok().flatten().unwrap_or("");
        let h =
            fnv1a_parts([req.call_id().unwrap_or("").as_bytes(), from_tag.as_bytes(), &self.tag_seed.to_le_bytes()]);
        let mut tag = String::with_capacity(18);
        tag.push_str("hr");
        herald_sip::text::push_hex(&mut tag, h, 12);
        tag
    }

    /// Carries out a transaction's actions. `peer` is the transaction's peer, read before the
    /// call that produced the actions (a transaction that terminated is already gone).
    /// `actions` is taken by reference: the hot paths have the table fill it in place
    /// (`TransactionTable::on_message_into`), and a move of it is a memcpy of 136 bytes.
    fn apply(&mut self, now: Instant, id: TxId, peer: Option<Peer>, actions: &mut Actions, out: &mut Vec<Output>) {
        actions.drain(|a| match a {
            TxAction::Send(bytes) => {
                if let Some(to) = peer {
                    out.push(Output::Send { to, bytes });
                }
            }
            TxAction::ToTu(event) => self.on_tu_event(now, id, event, out),
        });
    }

    /// Answers server transaction `id` with a locally built response.
    fn respond(
        &mut self,
        now: Instant,
        id: TxId,
        req: &Message,
        (status, reason): (u16, &str),
        headers: &[(&str, String)],
        out: &mut Vec<Output>,
    ) {
        let tag = self.local_tag(req);
        let mut b = ResponseBuilder::new(req, status, reason).to_tag(&tag);
        for (name, value) in headers {
            b = b.header(name, value.as_bytes());
        }
        let bytes = b.build().freeze();
        self.responses.count(status);
        let (mut peer, mut actions) = (None, Actions::new());
        self.txs.on_tu_response_into(now, id, (bytes, status), &mut peer, &mut actions);
        self.apply(now, id, peer, &mut actions, out);
    }

    /// A response sent without a transaction (to a request that could not get one).
    fn respond_stateless(&self, req: &Message, from: Peer, status: u16, reason: &str, out: &mut Vec<Output>) {
        self.respond_stateless_with(req, from, (status, reason), &[], out);
    }

    /// [`Engine::respond_stateless`] with extra headers.
    fn respond_stateless_with(
        &self,
        req: &Message,
        from: Peer,
        (status, reason): (u16, &str),
        headers: &[(&str, String)],
        out: &mut Vec<Output>,
    ) {
        if req.top_via().is_err() {
            return; // nowhere to send it (RFC 3261 §18.2.2 needs the Via)
        }
        let tag = self.local_tag(req);
        let mut b = ResponseBuilder::new(req, status, reason).to_tag(&tag);
        for (name, value) in headers {
            b = b.header(name, value.as_bytes());
        }
        let bytes = b.build().freeze();
        self.responses.count(status);
        let to = crate::proxy::respond::response_destination(req, from);
        out.push(Output::Send { to, bytes });
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }
}

impl SipHandler for Engine {
    fn handle(&mut self, now: Instant, input: Input, out: &mut Vec<Output>) {
        self.refresh_config();
        match input {
            Input::Message { from, local, msg } => {
                // RFC-level feedback for operators (issue 15): at debug, one line per message.
                let traced = trace::enabled().then(|| (msg.clone(), out.len()));
                if msg.is_request() {
                    self.on_request(now, from, local, msg, out);
                } else {
                    self.on_response(now, msg, out);
                }
                if let Some((msg, first)) = traced {
                    trace::message(&msg, from, out, first);
                }
            }
            Input::Resolved { token, result } if self.pings.is_resolving(token) => {
                self.on_ping_resolved(now, token, result, out)
            }
            Input::Resolved { token, result } => self.on_resolved(now, token, result, out),
            Input::Ping { token, ping } => self.on_ping(now, token, ping, out),
            Input::TransportError { to } => {
                let ids: Vec<TxId> = (self.clients.keys().copied().chain(self.pings.transactions()))
                    .filter(|id| self.txs.peer(*id) == Some(to))
                    .collect();
                for id in ids {
                    let peer = self.txs.peer(id);
                    let mut actions = self.txs.on_transport_error(id);
                    self.apply(now, id, peer, &mut actions, out);
                }
            }
        }
        self.drop_stale_timer_c();
    }

    fn handle_timeouts(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.refresh_config();
        let mut fired = self.txs.handle_timeouts(now);
        for (id, action) in fired.drain(..) {
            match action {
                TxAction::Send(bytes) => {
                    if let Some(to) = self.txs.peer(id) {
                        out.push(Output::Send { to, bytes });
                    }
                }
                TxAction::ToTu(event) => self.on_tu_event(now, id, event, out),
            }
        }
        self.txs.recycle(fired);
        while let Some((at, sid, idx)) = self.timer_c.pop_due(now) {
            self.on_timer_c(now, at, sid, idx, out);
        }
        self.drop_stale_timer_c();
        self.ping_timeouts(now, out);
        self.gateway_timeouts(now, out);
        self.abandoned_timeouts(now);
        self.release_durable(now, out);
        if self.expires_store {
            // One atomic load when nothing is due.
            self.store.expire(now, EXPIRE_BUDGET);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // The runtime asks after every call. Each source taken into one running minimum as it
        // is read: folded from an array of the six (~100 bytes on the stack) it cost ~80
        // instructions a call (issue 21; a chain of the arrays flattened to their minimum,
        // before that, stayed an iterator).
        let mut next = self.txs.next_timeout();
        take_earlier(&mut next, self.timer_c.next_deadline());
        if self.expires_store {
            take_earlier(&mut next, self.store.next_expiry());
        }
        take_earlier(&mut next, self.durable.next_deadline());
        take_earlier(&mut next, self.pings.next_deadline());
        take_earlier(&mut next, self.gateway_calls.next_due());
        take_earlier(&mut next, self.abandoned.next_due());
        next
    }

    fn set_timeout_waker(&mut self, wake: TimeoutWaker) {
        // The store's next expiry is in this engine's `poll_timeout`, and other engines' REGISTERs
        // (or a durable copy's load) bring it earlier.
        if self.expires_store {
            let _ = self.store.set_expiry_alarm(wake);
        }
    }

    fn active_transactions(&self) -> usize {
        self.txs.unfinished()
    }

    fn transactions(&self) -> usize {
        self.txs.len()
    }

    fn held_bytes(&self) -> usize {
        self.txs.held_bytes() + self.context_bytes + self.durable.bytes()
    }
}

/// Lowers `next` to `at` when `at` is a deadline before it (`None`: no deadline): taken for
/// each source in turn, `next` ends as the earliest of them all.
#[inline(always)]
fn take_earlier(next: &mut Option<Instant>, at: Option<Instant>) {
    if let Some(at) = at {
        if next.is_none_or(|n| at < n) {
            *next = Some(at);
        }
    }
}
