//! A simulated user agent (RFC 3261 §8, §12-§15) over UDP, or over a stream flow (WebSocket,
//! RFC 7118: its Via and Contact name a `.invalid` host; with [`Ua::set_outbound`] it registers
//! an RFC 5626 flow with `+sip.instance` and `reg-id`): as a client it registers (answering
//! digest challenges, RFC 7616 with MD5), calls, acknowledges every 2xx, cancels and hangs up;
//! as a server it answers by a script and retransmits its 2xx until the ACK (§13.3.1.4). Its
//! transactions are herald-core's own ([`TransactionTable`]), so request retransmissions,
//! Timers B and F (a timeout counts as 408, §8.1.3.1) and absorbing retransmitted requests are
//! the same code herald runs.

mod client;
mod server;

use bytes::Bytes;
use herald_core::transaction::{BranchGen, TransactionTable, TuEvent, TxAction, TxId};
use herald_core::{Peer, Seed, Transport};
use herald_sip::{Limits, Message};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What a UA does with an INVITE it receives (times from its arrival).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 180 after `ring` (if any), then the final `status` after `after` (if any).
    Script { ring: Option<Duration>, after: Option<(Duration, u16)> },
    /// Nothing at all, to any request (a phone that is gone).
    Silent,
}

impl Answer {
    /// Rings at once, answers 200 after `after`.
    pub fn pick_up(after: Duration) -> Answer {
        Answer::Script { ring: Some(Duration::ZERO), after: Some((after, 200)) }
    }

    /// Rings and never answers.
    pub fn ring_forever() -> Answer {
        Answer::Script { ring: Some(Duration::ZERO), after: None }
    }
}

/// The final answer to a request this UA sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub call_id: String,
    pub method: String,
    pub status: u16,
    /// Time since the start of the simulation.
    pub at: Duration,
}

/// A message this UA received.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Duration,
    pub from: SocketAddr,
    pub msg: Message,
}

impl Received {
    /// `INVITE`, `ACK`... for requests; the CSeq method for responses.
    pub fn method(&self) -> String {
        match self.msg.method() {
            Some(m) => m.as_str().to_owned(),
            None => self.msg.cseq().map(|c| c.method.as_str().to_owned()).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone)]
enum Timer {
    /// A scripted response to the INVITE of server transaction `tx`.
    Respond { tx: TxId, status: u16 },
    /// §13.3.1.4: the 2xx of `call_id` again, until its ACK; the interval doubles up to T2.
    Resend2xx { call_id: String, interval: Duration, give_up: Instant },
}

/// One call (dialog) or registration, by Call-ID.
#[derive(Debug, Default)]
struct Call {
    local_tag: String,
    cseq: u32,
    /// The last request sent out of dialog (INVITE or REGISTER): resent with credentials, and
    /// the source of the CANCEL.
    request: Option<Message>,
    challenged: bool,
    /// Established by a 2xx: the To header with the remote tag, remote target, route set.
    remote_to: Option<String>,
    remote_target: Option<String>,
    route_set: Vec<String>,
    /// UAS side: the 2xx sent, its ACK seen, the INVITE's server transaction.
    ok: Option<(Bytes, SocketAddr)>,
    acked: bool,
    invite_tx: Option<TxId>,
}

pub struct Ua {
    pub name: String,
    pub user: String,
    pub domain: String,
    pub addr: SocketAddr,
    /// Where requests outside a dialog go (herald).
    pub proxy: SocketAddr,
    pub answer: Answer,
    /// UDP, or the transport of its flow to herald (the simulator carries it as datagrams;
    /// [`crate::Sim::connect`] opens the flow on herald's side).
    pub transport: Transport,
    /// RFC 5626: `+sip.instance` URN and `reg-id` of the flow it registers.
    outbound: Option<(String, u32)>,
    password: Option<String>,
    start: Instant,
    txs: TransactionTable,
    branches: BranchGen,
    /// Client transaction → (Call-ID, method).
    clients: BTreeMap<TxId, (String, String)>,
    /// Server transaction → the request it answers (a server transaction keeps no copy).
    servers: BTreeMap<TxId, Message>,
    calls: BTreeMap<String, Call>,
    timers: BTreeMap<(Instant, u64), Timer>,
    seq: u64,
    next_call: u64,
    nc: u32,
    received: Vec<Received>,
    outcomes: Vec<Outcome>,
}

/// Datagrams a UA wants sent: (to, bytes).
pub type Sends = Vec<(SocketAddr, Bytes)>;

impl Ua {
    /// A UA named (and, until [`Ua::set_user`], registering as) `name` at `addr`. Its branches
    /// and transaction keys come from `seed` and its address: every run with the seed is the
    /// same, and no two UAs of a run share a branch.
    pub fn new(name: &str, domain: &str, addr: SocketAddr, proxy: SocketAddr, start: Instant, seed: u64) -> Ua {
        // Keyed by the whole address: two UAs on one port of different hosts differ too.
        let own = Seed::fixed(seed).derive(&format!("ua {addr}"), 0);
        Ua {
            name: name.to_owned(),
            user: name.to_owned(),
            domain: domain.to_owned(),
            addr,
            proxy,
            answer: Answer::pick_up(Duration::from_millis(500)),
            transport: Transport::Udp,
            outbound: None,
            password: None,
            start,
            txs: TransactionTable::seeded(Default::default(), own.derive("transactions", 0)),
            branches: BranchGen::new(own, addr.port()),
            clients: BTreeMap::new(),
            servers: BTreeMap::new(),
            calls: BTreeMap::new(),
            timers: BTreeMap::new(),
            seq: 0,
            next_call: 0,
            nc: 0,
            received: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    /// The user part of its AoR, when it differs from its name (two phones of one user).
    pub fn set_user(&mut self, user: &str) -> &mut Ua {
        self.user = user.to_owned();
        self
    }

    /// Answers digest challenges with this password.
    pub fn set_password(&mut self, password: &str) -> &mut Ua {
        self.password = Some(password.to_owned());
        self
    }

    /// Speaks over a stream flow of `transport` (set by [`crate::Sim::connect`]): reliable, so
    /// its transactions do not retransmit; a WebSocket UA's Via and Contact name a `.invalid`
    /// host (RFC 7118 §5).
    pub fn set_transport(&mut self, transport: Transport) -> &mut Ua {
        self.transport = transport;
        self
    }

    /// Registers as flow `reg_id` of instance `instance` (a URN) with `Supported: outbound`,
    /// and puts `ob` in its Contact (RFC 5626 §4.2, §4.3).
    pub fn set_outbound(&mut self, instance: &str, reg_id: u32) -> &mut Ua {
        self.outbound = Some((instance.to_owned(), reg_id));
        self
    }

    /// How it answers the INVITEs it receives.
    pub fn set_answer(&mut self, answer: Answer) -> &mut Ua {
        self.answer = answer;
        self
    }

    pub fn received(&self) -> &[Received] {
        &self.received
    }

    /// Status codes received in responses to `method`, in order (retransmissions included).
    pub fn statuses(&self, method: &str) -> Vec<u16> {
        self.received
            .iter()
            .filter(|r| r.msg.status().is_some() && r.method() == method)
            .filter_map(|r| r.msg.status())
            .collect()
    }

    /// Requests of `method` received (retransmissions included).
    pub fn requests(&self, method: &str) -> Vec<&Received> {
        self.received.iter().filter(|r| r.msg.is_request() && r.method() == method).collect()
    }

    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// The final answer to the last `method` sent in `call_id`.
    pub fn outcome(&self, call_id: &str, method: &str) -> Option<&Outcome> {
        self.outcomes.iter().rev().find(|o| o.call_id == call_id && o.method == method)
    }

    /// Whether the 2xx this UA sent in `call_id` was acknowledged.
    pub fn acked(&self, call_id: &str) -> bool {
        self.calls.get(call_id).is_some_and(|c| c.acked)
    }

    pub fn next_timeout(&self) -> Option<Instant> {
        let own = self.timers.keys().next().map(|(at, _)| *at);
        [own, self.txs.next_timeout()].into_iter().flatten().min()
    }

    fn new_call_id(&mut self) -> String {
        self.next_call += 1;
        format!("{}-{}@{}", self.name, self.next_call, self.addr.ip())
    }

    fn aor(&self) -> String {
        format!("sip:{}@{}", self.user, self.domain)
    }

    fn contact(&self) -> String {
        let ob = if self.outbound.is_some() { ";ob" } else { "" };
        match self.transport {
            Transport::Ws | Transport::Wss => {
                format!("<sip:{}@{}.invalid;transport={}{ob}>", self.user, self.name, self.transport.as_param())
            }
            Transport::Udp => format!("<sip:{}@{}{ob}>", self.user, self.addr),
            t => format!("<sip:{}@{};transport={}{ob}>", self.user, self.addr, t.as_param()),
        }
    }

    /// The sent-by of its Vias: a `.invalid` name over WebSocket (RFC 7118 §5), else its address.
    fn sent_by(&self) -> String {
        match self.transport {
            Transport::Ws | Transport::Wss => format!("{}.invalid", self.name),
            _ => self.addr.to_string(),
        }
    }

    /// A peer over this UA's transport (its transactions are reliable over a stream).
    fn peer(&self, addr: SocketAddr) -> Peer {
        Peer { transport: self.transport, addr, conn: None }
    }

    fn schedule(&mut self, at: Instant, timer: Timer) {
        self.seq += 1;
        self.timers.insert((at, self.seq), timer);
    }

    /// A datagram for this UA.
    pub fn receive(&mut self, now: Instant, from: SocketAddr, bytes: Bytes) -> Sends {
        let Ok(msg) = Message::parse(bytes, &Limits::default()) else { return Vec::new() };
        self.received.push(Received { at: now - self.start, from, msg: msg.clone() });
        if self.answer == Answer::Silent {
            return Vec::new();
        }
        let mut sends = Sends::new();
        if msg.is_request() {
            self.on_request(now, from, msg, &mut sends);
        } else if let Some(id) = self.txs.find_client(&msg) {
            let actions = self.txs.on_message(now, id, msg);
            for a in actions {
                self.on_action(now, id, a, &mut sends);
            }
        } else if msg.status().is_some_and(|s| (200..300).contains(&s)) {
            // A 2xx retransmission after the transaction ended: acknowledge it again (§13.2.2.4).
            self.on_2xx(&msg, &mut sends);
        }
        sends
    }

    /// Runs the UA's timers due at `now`.
    pub fn timeouts(&mut self, now: Instant) -> Sends {
        let mut sends = Sends::new();
        for (id, a) in self.txs.handle_timeouts(now) {
            self.on_action(now, id, a, &mut sends);
        }
        while let Some((&key, _)) = self.timers.iter().next().filter(|((at, _), _)| *at <= now) {
            let timer = self.timers.remove(&key).expect("key just seen");
            self.on_timer(now, timer, &mut sends);
        }
        sends
    }

    fn on_action(&mut self, now: Instant, id: TxId, action: TxAction, sends: &mut Sends) {
        match action {
            TxAction::Send(bytes) => {
                if let Some(p) = self.txs.peer(id) {
                    sends.push((p.addr, bytes));
                }
            }
            TxAction::ToTu(TuEvent::Response(resp)) => self.on_response(now, id, resp, sends),
            TxAction::ToTu(TuEvent::Timeout) => self.finish(now, id, 408),
            TxAction::ToTu(TuEvent::TransportError) => self.finish(now, id, 503),
            TxAction::ToTu(_) => {}
        }
    }

    fn finish(&mut self, now: Instant, id: TxId, status: u16) {
        if let Some((call_id, method)) = self.clients.get(&id).cloned() {
            self.outcomes.push(Outcome { call_id, method, status, at: now - self.start });
        }
    }

    fn on_timer(&mut self, now: Instant, timer: Timer, sends: &mut Sends) {
        match timer {
            Timer::Respond { tx, status } => self.respond(now, tx, status, sends),
            Timer::Resend2xx { call_id, interval, give_up } => {
                let Some(call) = self.calls.get(&call_id) else { return };
                if call.acked || now >= give_up {
                    return;
                }
                if let Some((bytes, to)) = call.ok.clone() {
                    sends.push((to, bytes));
                }
                let next = (interval * 2).min(self.txs.timers().t2);
                self.schedule(now + next, Timer::Resend2xx { call_id, interval: next, give_up });
            }
        }
    }
}
