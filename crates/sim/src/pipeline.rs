//! The fuzz target `engine_pipeline` (fuzz/fuzz_targets/engine_pipeline.rs calls [`run`]): the
//! whole server pipeline on a sequence of messages: bytes in, the runtime's inbound checks
//! ([`herald_core::inbound`]), one `herald_core` engine with a registrar, a location store that already holds users and (per input) digest authentication,
//! a simulated clock with timer ticks, DNS answered like the runtime answers it; outputs out.
//!
//! Input: `[flags] ([op] payload SEP)*`, `SEP` = `ff fe fd`, at most [`MAX_STEPS`] steps.
//! * flags bit 0: digest authentication on; bit 1: sequential forking; bit 2: stateless proxy;
//!   bit 3: record-route never; bit 4: a transaction limit of 8 (the runtime's stateless 503s).
//! * op bits 0-2, what the payload is:
//!   - 0, 1: raw bytes from the peer (a datagram, or the next bytes of its TCP connection),
//!   - 2, 3: a template request (`payload[0]` picks it), spliced with the rest (see [`splice`]),
//!   - 4: the same with digest credentials answering the last challenge herald sent,
//!   - 5, 6: a response to one of the requests herald sent, from where it was sent,
//!   - 7: a long pause (`payload[0]` seconds), or closing the peer's TCP connection.
//! * op bits 3-4: the peer (alice UDP, bob UDP, carol TCP, mallory TCP); bits 5-7: how much
//!   simulated time passes before the step (timers fire in order meanwhile).
//!
//! Invariants (panics are findings):
//! * nothing panics, and every step's outputs settle (no endless DNS or transport-error loop);
//! * every `Output::Send` is non-empty and parses as a SIP message; over a stream it frames as
//!   exactly one message; what the engine itself sends also passes the receipt checks
//!   (`validate`): herald never turns a message it accepted into one the next hop must refuse;
//! * the engine holds no more transactions than requests it was given (server transactions)
//!   plus distinct branches it sent (client transactions);
//! * after a long idle time (Timer C, then Timers B/D/H/J/K) every transaction is gone.
//!
//! Replaying: the engine's seed is fixed ([`SEED`]) and time is simulated, so an input gives
//! the same outputs on every run and in every process; [`run`] returns a digest of every
//! message herald sent (with its virtual time) to show it (crates/sim/tests/replay.rs).
//! `HERALD_FUZZ_TRACE=1` prints every message in and out of a replay;
//! `HERALD_FUZZ_ANSWER_BEFORE_DRAIN=1` relaxes the last check (see [`World::drain`]).
mod checks;
mod inputs;

use crate::net::Digest;
use bytes::{Bytes, BytesMut};
use herald_core::auth::{Algorithm, AuthConfig, AuthPolicy, Authenticator, Credentials, SharedCredentials, UserHa1};
use herald_core::engine::{Engine, EngineConfig, Forking, Listener, RecordRoute};
use herald_core::inbound::{self, Inbound};
use herald_core::proxy::Identity;
use herald_core::registrar::{Registrar, RegistrarConfig};
use herald_core::transaction::Timers;
use herald_core::{
    ConnId, Input, Output, Peer, Resolution, ResolveError, ResolveRequest, Seed, SipHandler, Target, Transport,
};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::{Framing, Limits, Message};
use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The engine's seed in every run: branches, tags and nonces are the same each time.
pub const SEED: u64 = 0x5eed;
const SEP: &[u8] = b"\xff\xfe\xfd";
const MAX_STEPS: usize = 48;
const PROXY: &str = "192.0.2.10:5060";
const DOMAIN: &str = "example.com";
/// Simulated time before a step, by op bits 5-7 (the runtime's timer tick is 10 ms).
const PAUSES_MS: [u64; 8] = [0, 0, 10, 100, 500, 2_000, 8_000, 40_000];
/// The last idle period: Timer C (180 s) then 64*T1 and Timer D (32 s) twice over, with room.
const DRAIN: Duration = Duration::from_secs(400);
/// Handler calls one step may cause (DNS answers and transport errors feed back in).
const MAX_FEEDBACK: usize = 256;
const USERS: [(&str, &str); 3] = [("alice", "secret-a"), ("bob", "secret-b"), ("carol", "secret-c")];

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// One clock for the whole run, so that crashes replay with the same relative times.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Parser limits of a default `herald serve` (`[limits]` defaults are herald-sip's).
fn limits() -> Limits {
    Limits::default()
}

struct Flags {
    auth: bool,
    sequential: bool,
    stateless: bool,
    rr_never: bool,
    tx_limit: Option<usize>,
}

struct Conn {
    base: u64,
    generation: u64,
    buf: BytesMut,
}

struct World {
    engine: Engine,
    now: Instant,
    limits: Limits,
    loose: Limits,
    flags: Flags,
    /// The four peers: alice (UDP), bob (UDP), carol (TCP), mallory (TCP).
    peers: [SocketAddr; 4],
    conns: [Option<Conn>; 4],
    closed: HashSet<ConnId>,
    /// Requests herald sent, newest last, with where they went (responses come from there).
    sent_requests: VecDeque<(Peer, Message)>,
    /// Branch and method of the requests herald sent with its own Via on top: an upper bound
    /// on the client transactions it started.
    branches: HashSet<String>,
    /// Every INVITE herald sent with its own Via (for [`World::drain`]).
    invites_out: Vec<(Peer, Message)>,
    requests_in: usize,
    last_nonce: Option<String>,
    nc: u32,
    /// Every message herald sent, with its virtual time and destination.
    digest: Digest,
}

impl World {
    fn new(flags: Flags) -> World {
        let now = epoch();
        let proxy = addr(PROXY);
        let cfg = EngineConfig {
            identity: Identity::new(vec![proxy], [DOMAIN.to_owned()]),
            listeners: vec![
                Listener { transport: Transport::Udp, addr: proxy },
                Listener { transport: Transport::Tcp, addr: proxy },
            ],
            timers: Timers::default(),
            record_route: if flags.rr_never { RecordRoute::Never } else { RecordRoute::Always },
            forking: if flags.sequential { Forking::Sequential } else { Forking::Parallel },
            stateless: flags.stateless,
            timer_c: Duration::from_secs(180),
            routes: None,
            seed: Seed::fixed(SEED),
            nat: herald_core::nat::NatConfig::default(),
            gateways: Default::default(),
            routing: Default::default(),
        };
        let reg_cfg = RegistrarConfig {
            max_bindings_per_aor: 3,
            seed: Seed::fixed(SEED).derive("registrar", 0),
            ..RegistrarConfig::default()
        };
        let registrar = Registrar::new(reg_cfg.clone());
        let store = Arc::new(registrar.new_store());
        // Users registered before the traffic starts: bob over UDP, carol over TCP, dave at two
        // contacts (a parallel or sequential fork).
        let tcp = |a: &str, c: u64| Peer { transport: Transport::Tcp, addr: addr(a), conn: Some(ConnId(c)) };
        let bindings = [
            ("bob", "192.0.2.2:5062", ">", Peer::udp(addr("192.0.2.2:5062"))),
            ("carol", "192.0.2.3:5063", ";transport=tcp>", tcp("192.0.2.3:5063", 200)),
            ("dave", "192.0.2.4:5064", ">;q=0.9", Peer::udp(addr("192.0.2.4:5064"))),
            ("dave", "192.0.2.5:5065", ";transport=tcp>;q=0.5", tcp("192.0.2.5:5065", 300)),
        ];
        for (i, (user, contact, params, from)) in bindings.iter().enumerate() {
            let text = format!(
                "REGISTER sip:{DOMAIN} SIP/2.0\r\nVia: SIP/2.0/{} {contact};branch=z9hG4bKpre{i}\r\nMax-Forwards: 70\r\nFrom: <sip:{user}@{DOMAIN}>;tag=p{i}\r\nTo: <sip:{user}@{DOMAIN}>\r\nCall-ID: pre-{i}\r\nCSeq: 1 REGISTER\r\nContact: <sip:{user}@{contact}{params}\r\nExpires: 3600\r\nContent-Length: 0\r\n\r\n",
                from.transport
            );
            let msg = Message::parse(Bytes::from(text), &limits()).unwrap();
            let resp = registrar.handle_register(now, &msg, *from, &store);
            let resp = Message::parse(resp.freeze(), &limits()).unwrap();
            assert_eq!(resp.status(), Some(200), "pre-registration of {user}");
        }
        let mut engine = Engine::new(Arc::new(cfg), store, Registrar::new(reg_cfg), 0);
        if flags.auth {
            let mut creds = Credentials::new(DOMAIN);
            for (user, password) in USERS {
                creds.insert(user, UserHa1::from_password(user, DOMAIN, password));
            }
            let cfg = AuthConfig {
                realm: DOMAIN.into(),
                domain_realms: Vec::new(),
                algorithms: Algorithm::ALL.to_vec(),
                nonce_lifetime: Duration::from_secs(300),
                policy: AuthPolicy::default(),
            };
            let auth = Authenticator::new(cfg, Arc::new(SharedCredentials::new(creds)), b"fuzz", 7, now, 1_700_000_000);
            engine = engine.with_auth(Arc::new(auth));
        }
        let l = limits();
        World {
            engine,
            now,
            loose: l.with_relay_room(),
            limits: l,
            flags,
            peers: [addr("192.0.2.1:5061"), addr("192.0.2.2:5062"), addr("192.0.2.3:5063"), addr("198.51.100.7:40000")],
            conns: [
                None,
                None,
                Some(Conn { base: 200, generation: 0, buf: BytesMut::new() }),
                Some(Conn { base: 400, generation: 0, buf: BytesMut::new() }),
            ],
            closed: HashSet::new(),
            sent_requests: VecDeque::new(),
            branches: HashSet::new(),
            invites_out: Vec::new(),
            requests_in: 0,
            last_nonce: None,
            nc: 0,
            digest: Digest::default(),
        }
    }

    fn peer(&self, i: usize) -> Peer {
        match &self.conns[i] {
            None => Peer::udp(self.peers[i]),
            Some(c) => {
                Peer { transport: Transport::Tcp, addr: self.peers[i], conn: Some(ConnId(c.base + c.generation)) }
            }
        }
    }

    /// Runs every timer due up to `until`, in order, no later than the runtime's tick allows.
    fn advance_to(&mut self, until: Instant, min_hop: Duration) {
        while let Some(at) = self.engine.poll_timeout() {
            if at > until {
                break;
            }
            self.now = self.now.max(at).max((self.now + min_hop).min(until));
            let mut out = Vec::new();
            self.engine.handle_timeouts(self.now, &mut out);
            self.settle(out);
        }
        self.now = self.now.max(until);
    }

    /// The bytes of one peer, as the runtime receives them.
    fn receive(&mut self, who: usize, bytes: &[u8]) {
        let from = self.peer(who);
        if self.conns[who].is_none() {
            // A datagram longer than the receive slot arrives truncated (flag set).
            let slot = self.limits.max_message_size.min(65_535) + 1;
            let truncated = bytes.len() >= slot;
            let buf = Bytes::copy_from_slice(&bytes[..bytes.len().min(slot)]);
            let got = inbound::classify(buf, &self.limits, Framing::Datagram, truncated);
            self.inbound(from, got);
            return;
        }
        self.conns[who].as_mut().unwrap().buf.extend_from_slice(bytes);
        loop {
            let conn = self.conns[who].as_mut().unwrap();
            let frame = match next_frame(&mut conn.buf, &self.limits) {
                Ok(None) => break,
                Ok(Some(f)) => f,
                Err(e) => {
                    let got = inbound::answer_unparsed(&conn.buf, &e, &self.limits);
                    self.inbound(from, got);
                    self.close(who);
                    break;
                }
            };
            let Frame::Message(bytes) = frame else { continue };
            match inbound::classify(bytes, &self.limits, Framing::Stream, false) {
                Inbound::Answer { bytes, close: true } => {
                    self.inbound(from, Inbound::Answer { bytes, close: true });
                    self.close(who);
                    break;
                }
                got => self.inbound(from, got),
            }
        }
    }

    fn close(&mut self, who: usize) {
        if let Some(id) = self.peer(who).conn {
            self.closed.insert(id);
        }
        if let Some(c) = self.conns[who].as_mut() {
            c.generation += 1;
            c.buf.clear();
        }
    }

    fn inbound(&mut self, from: Peer, got: Inbound) {
        match got {
            Inbound::Message(msg) => self.route(from, msg),
            Inbound::Answer { bytes, .. } => {
                self.check_send(from, &bytes.freeze(), false);
            }
            Inbound::Drop(_) => {}
        }
    }

    /// What the worker does before the shard (`worker.rs` `route`): the transaction limit's
    /// stateless 503, and absorbing the ACKs of those.
    fn route(&mut self, from: Peer, msg: Message) {
        if msg.is_request() {
            self.requests_in += 1;
            let full = self.flags.tx_limit.is_some_and(|n| self.engine.transactions() >= n);
            if full && inbound::is_new_request(&msg) {
                let bytes = inbound::busy(&msg, 5);
                self.check_send(from, &bytes, true);
                return;
            }
            if inbound::is_ack_of_busy(&msg) {
                return;
            }
        }
        if trace() {
            let t = self.now - epoch();
            eprintln!(
                "{t:>9.3?} in  {} {} {}: {}",
                from.transport,
                from.addr,
                conn_of(&from),
                first_line(msg.as_bytes())
            );
        }
        let mut out = Vec::new();
        self.engine.handle(self.now, Input::Message { from, local: addr(PROXY), msg }, &mut out);
        self.settle(out);
    }

    /// Carries out outputs as the runtime does: checks every send, answers every lookup, tells
    /// the engine about sends on closed connections; until nothing is left.
    fn settle(&mut self, out: Vec<Output>) {
        let mut queue: VecDeque<Output> = out.into();
        let mut feedback = 0;
        while let Some(o) = queue.pop_front() {
            let input = match o {
                Output::Send { to, bytes } => {
                    self.check_send(to, &bytes, true);
                    match to.conn {
                        Some(c) if self.closed.contains(&c) => Input::TransportError { to },
                        _ => continue,
                    }
                }
                Output::Resolve { token, request } => Input::Resolved { token, result: resolve(&request) },
                Output::PingDone { .. } => continue, // the fuzzed engine is sent no pings
            };
            if trace() {
                eprintln!("{:>9.3?} in  {input:?}", self.now - epoch());
            }
            feedback += 1;
            assert!(feedback <= MAX_FEEDBACK, "outputs keep feeding back: {feedback} handler calls for one step");
            let mut more = Vec::new();
            self.engine.handle(self.now, input, &mut more);
            queue.extend(more);
        }
        let txs = self.engine.transactions();
        let bound = self.requests_in + self.branches.len();
        assert!(
            txs <= bound,
            "{txs} transactions held after {} requests in and {} branches out",
            self.requests_in,
            self.branches.len()
        );
    }
}

/// `HERALD_FUZZ_TRACE=1`: print every message in and out, with the simulated time (to read a
/// reproducer).
fn trace() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HERALD_FUZZ_TRACE").is_some_and(|v| v == "1"))
}

fn first_line(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == b'\r' || *c == b'\n').unwrap_or(b.len()).min(100);
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn conn_of(p: &Peer) -> String {
    p.conn.map(|c| format!("conn {}", c.0)).unwrap_or_default()
}

/// The runtime's DNS, deterministic: names with "fail" or ".invalid" do not resolve; others
/// give one target of the transport asked for (UDP by default) and the URI's port.
fn resolve(r: &ResolveRequest) -> Resolution {
    if r.host.contains("fail") || r.host.ends_with(".invalid") {
        return Err(ResolveError::NoSuchName);
    }
    let transport = r.transport.unwrap_or(if r.secure { Transport::Tls } else { Transport::Udp });
    Ok(vec![Target { transport, addr: SocketAddr::new([192, 0, 2, 99].into(), r.port.unwrap_or(5060)) }])
}

/// The input cut at every [`SEP`] (a plain loop, so that comparison tracing sees the bytes).
fn steps(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + SEP.len() <= data.len() && out.len() < MAX_STEPS {
        if data[i] == SEP[0] && data[i + 1] == SEP[1] && data[i + 2] == SEP[2] {
            out.push(&data[start..i]);
            i += SEP.len();
            start = i;
        } else {
            i += 1;
        }
    }
    if out.len() < MAX_STEPS {
        out.push(&data[start..]);
    }
    out
}

/// Runs one fuzz input (panics are findings) and returns the digest of every message herald
/// sent: the same input gives the same digest, run after run.
pub fn run(data: &[u8]) -> u64 {
    let Some((&flags, rest)) = data.split_first() else { return Digest::default().0 };
    let flags = Flags {
        auth: flags & 1 != 0,
        sequential: flags & 2 != 0,
        stateless: flags & 4 != 0,
        rr_never: flags & 8 != 0,
        tx_limit: (flags & 16 != 0).then_some(8),
    };
    let mut w = World::new(flags);
    for step in steps(rest) {
        let Some((&op, payload)) = step.split_first() else { continue };
        let pause = Duration::from_millis(PAUSES_MS[usize::from(op >> 5)]);
        let until = w.now + pause;
        w.advance_to(until, Duration::from_millis(10));
        let who = usize::from(op >> 3) & 3;
        match op & 7 {
            0 | 1 => w.receive(who, payload),
            2..=4 => {
                let bytes = w.template(who, payload, op & 7 == 4);
                w.receive(who, &bytes);
            }
            5 | 6 => {
                if let Some((from, bytes)) = w.reply(payload) {
                    w.receive_from_peer(from, &bytes);
                }
            }
            _ => match payload.first() {
                Some(b) if b & 1 == 1 => w.close(who),
                Some(b) => {
                    let until = w.now + Duration::from_secs(u64::from(*b));
                    w.advance_to(until, Duration::from_millis(10));
                }
                None => {}
            },
        }
    }
    w.drain();
    w.digest.0
}
