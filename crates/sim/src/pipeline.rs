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
use herald_sip::headers::AuthValue;
use herald_sip::{Framing, HeaderName, Limits, Message};
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

    /// `engine`: the bytes come from the engine (else from the runtime's malformed-message
    /// answers, built from a request that failed the checks, so not held to them).
    fn check_send(&mut self, to: Peer, bytes: &Bytes, engine: bool) {
        assert!(!bytes.is_empty(), "empty send to {to:?}");
        self.digest.write(&(self.now - epoch()).as_nanos().to_le_bytes());
        self.digest.write(format!("{to:?}").as_bytes());
        self.digest.write(bytes);
        if trace() {
            let t = self.now - epoch();
            eprintln!(
                "{t:>9.3?} out {} {} {}: {} ({} txs)",
                to.transport,
                to.addr,
                conn_of(&to),
                first_line(bytes),
                self.engine.transactions()
            );
        }
        let text = || String::from_utf8_lossy(bytes).into_owned();
        let msg = Message::parse(bytes.clone(), &self.loose)
            .unwrap_or_else(|e| panic!("herald sent unparseable bytes to {to:?}: {e}\n{}", text()));
        if to.transport.is_reliable() {
            let mut buf = BytesMut::from(&bytes[..]);
            match next_frame(&mut buf, &self.loose) {
                Ok(Some(Frame::Message(m))) if buf.is_empty() => {
                    Message::parse_as(m, &self.loose, Framing::Stream)
                        .unwrap_or_else(|e| panic!("stream send does not parse as a stream message: {e}\n{}", text()));
                }
                other => {
                    panic!("stream send to {to:?} is not exactly one frame ({other:?}, {} left)\n{}", buf.len(), text())
                }
            }
        }
        if engine {
            if let Err(e) = msg.validate() {
                panic!("herald sent a message that fails the receipt checks ({e}) to {to:?}:\n{}", text());
            }
        }
        if let Some(status) = msg.status() {
            if status == 401 || status == 407 {
                let h = if status == 401 { HeaderName::WwwAuthenticate } else { HeaderName::ProxyAuthenticate };
                if let Some(v) = msg.get(h) {
                    if let Some(n) = AuthValue::parse(v).ok().and_then(|a| a.param("nonce")) {
                        self.last_nonce = Some(n.into_owned());
                    }
                }
            }
            return;
        }
        // A CANCEL shares its INVITE's branch but is a transaction of its own (§17.1.3).
        let method = msg.method().map(|m| m.as_str().to_owned()).unwrap_or_default();
        let ours = msg.top_via().ok().and_then(|v| {
            let sent_by_us = v.port == Some(5060) && v.host.to_string() == "192.0.2.10";
            v.branch().filter(|_| sent_by_us).map(|b| format!("{b} {method}"))
        });
        if let Some(b) = ours {
            if self.branches.len() < 1 << 16 && self.branches.insert(b) && method == "INVITE" {
                self.invites_out.push((to, msg.clone()));
            }
        }
        if self.sent_requests.len() == 16 {
            self.sent_requests.pop_front();
        }
        self.sent_requests.push_back((to, msg));
    }

    /// The last idle period: every transaction must end, whatever the peers did or did not
    /// send. With `HERALD_FUZZ_ANSWER_BEFORE_DRAIN=1` every callee first answers each INVITE
    /// herald sent it with 487 (a callee that rang and then vanished no longer counts), and the
    /// check is repeated: what is left then is not waiting for any peer.
    fn drain(&mut self) {
        let until = self.now + DRAIN;
        self.advance_to(until, Duration::from_secs(1));
        let mut left = self.engine.transactions();
        if left > 0 && answer_before_drain() {
            // A connection may hold half a message that never ends: the runtime closes such a
            // connection (its incomplete-message timeout), and the peer answers on a new one.
            for i in 0..4 {
                if self.conns[i].as_ref().is_some_and(|c| !c.buf.is_empty()) {
                    self.close(i);
                }
            }
            for (to, req) in std::mem::take(&mut self.invites_out) {
                let bytes = response_to(&req, to, 487);
                self.receive_from_peer(to, &bytes);
            }
            let until = self.now + DRAIN;
            self.advance_to(until, Duration::from_secs(1));
            left = self.engine.transactions();
            assert_eq!(
                left, 0,
                "transactions left {DRAIN:?} after the last message, although every INVITE was answered"
            );
        }
        assert_eq!(
            left,
            0,
            "transactions left {DRAIN:?} after the last message (active: {}); a forwarded INVITE that got a \
             provisional and then nothing (RFC 3261 §9.1: destroy it 64*T1 after the CANCEL)? \
             HERALD_FUZZ_ANSWER_BEFORE_DRAIN=1 tells that case apart",
            self.engine.active_transactions()
        );
        assert_eq!(self.engine.active_transactions(), 0);
        // The byte budget's accounting balances: nothing is counted as held once nothing is.
        assert_eq!(self.engine.held_bytes(), 0, "held bytes left with no transaction left");
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

fn answer_before_drain() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HERALD_FUZZ_ANSWER_BEFORE_DRAIN").is_some_and(|v| v == "1"))
}

/// A callee's response to `req` (sent to `to`): its Via, From, Call-ID, CSeq and Record-Route,
/// To with a tag, a Contact for 2xx and 3xx.
fn response_to(req: &Message, to: Peer, status: u16) -> Vec<u8> {
    let mut s = format!("SIP/2.0 {status} Whatever\r\n");
    for h in req.headers() {
        let line = &req.as_bytes()[h.line.range()];
        match h.name {
            HeaderName::Via | HeaderName::From | HeaderName::CallId | HeaderName::CSeq | HeaderName::RecordRoute => {
                s.push_str(&String::from_utf8_lossy(line));
            }
            HeaderName::To if status > 100 && req.to_tag().ok().flatten().is_none() => {
                let v = String::from_utf8_lossy(req.value_of(h));
                s.push_str(&format!("To: {v};tag=callee\r\n"));
            }
            HeaderName::To => s.push_str(&String::from_utf8_lossy(line)),
            _ => {}
        }
    }
    if (200..300).contains(&status) || status == 302 {
        s.push_str(&format!("Contact: <sip:callee@{}>\r\n", to.addr));
    }
    s.push_str("Content-Length: 0\r\n\r\n");
    s.into_bytes()
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

/// `payload` edits `msg`: byte 0 picks a line, byte 1 a column in it, byte 2 how many bytes to
/// delete there; the rest is inserted. Shorter payloads leave the message as it is. Positions
/// are line-relative because herald's branches (copied into responses) vary in length from one
/// process to the next: a crash found late in a long run should still replay on its own.
fn splice(msg: &mut Vec<u8>, payload: &[u8]) {
    if payload.len() < 3 {
        return;
    }
    let starts: Vec<usize> =
        std::iter::once(0).chain(msg.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1)).collect();
    let line = usize::from(payload[0]) % starts.len();
    let (start, end) = (starts[line], starts.get(line + 1).copied().unwrap_or(msg.len()));
    let at = start + usize::from(payload[1]) % (end - start + 1);
    let stop = (at + usize::from(payload[2])).min(msg.len());
    msg.splice(at..stop, payload[3..].iter().copied());
}

/// Request templates: (user whose credentials it carries, text). `{T}` transport, `{A}` the
/// sender's address, `{V}` a variant (new branch or retransmission), `{AUTH}` credentials.
const TEMPLATES: &[(usize, &str)] = &[
    // A local caller (challenged when auth is on) calls bob; ACK, BYE, CANCEL of that call.
    (0, "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 INVITE\nContact: <sip:alice@{A}>\n{AUTH}Content-Type: application/sdp\nContent-Length: 5\n\nv=0\n"),
    (0, "ACK sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 1 ACK\nContent-Length: 0\n\n"),
    (0, "ACK sip:bob@192.0.2.2:5062 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-ack{V};rport\nRoute: <sip:192.0.2.10:5060;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 1 ACK\nContent-Length: 0\n\n"),
    (0, "BYE sip:bob@192.0.2.2:5062 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-bye{V};rport\nRoute: <sip:192.0.2.10:5060;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 2 BYE\n{AUTH}Content-Length: 0\n\n"),
    (0, "CANCEL sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 CANCEL\nContent-Length: 0\n\n"),
    // An inbound call from another domain (not challenged), to a forked and a TCP user.
    (2, "INVITE sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dave{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=c2\nTo: <sip:dave@example.com>\nCall-ID: c2\nCSeq: 1 INVITE\nContact: <sip:carol@{A}>\nContent-Length: 0\n\n"),
    (2, "INVITE sip:carol@example.com;transport=tcp SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-carol{V};rport\nMax-Forwards: 70\nFrom: <sip:eve@other.org>;tag=c3\nTo: <sip:carol@example.com>\nCall-ID: c3\nCSeq: 1 INVITE\nContact: <sip:eve@{A}>\nContent-Length: 0\n\n"),
    (2, "CANCEL sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dave{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=c2\nTo: <sip:dave@example.com>\nCall-ID: c2\nCSeq: 1 CANCEL\nContent-Length: 0\n\n"),
    // Registrations: a new binding, a refresh with q and expires, removing all of bob's.
    (0, "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-reg{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=r1\nTo: <sip:alice@example.com>\nCall-ID: reg-a\nCSeq: {V} REGISTER\nContact: <sip:alice@{A}>;q=0.7;expires=120\n{AUTH}Content-Length: 0\n\n"),
    (1, "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-unreg{V};rport\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r2\nTo: <sip:bob@example.com>\nCall-ID: reg-b\nCSeq: {V} REGISTER\nContact: *\nExpires: 0\n{AUTH}Content-Length: 0\n\n"),
    // To the proxy itself, a MESSAGE, and routes: loose to an IP, strict, by DNS, failing DNS.
    (0, "OPTIONS sip:192.0.2.10:5060 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-opt{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=o1\nTo: <sip:192.0.2.10:5060>\nCall-ID: opt\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n"),
    (0, "MESSAGE sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-msg{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=m1\nTo: <sip:dave@example.com>\nCall-ID: msg\nCSeq: 1 MESSAGE\n{AUTH}Content-Type: text/plain\nContent-Length: 2\n\nhi"),
    (0, "INVITE sip:x@elsewhere.org SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-lr{V};rport\nRoute: <sip:192.0.2.10:5060;lr>, <sip:192.0.2.50:5070;lr;transport=tcp>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=l1\nTo: <sip:x@elsewhere.org>\nCall-ID: lr\nCSeq: 1 INVITE\n{AUTH}Contact: <sip:alice@{A}>\nContent-Length: 0\n\n"),
    (0, "INVITE sip:192.0.2.10:5060 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-sr{V};rport\nRoute: <sip:y@192.0.2.51:5071>, <sip:z@far.example.net>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=s1\nTo: <sip:z@far.example.net>\nCall-ID: sr\nCSeq: 1 INVITE\n{AUTH}Contact: <sip:alice@{A}>\nContent-Length: 0\n\n"),
    (2, "INVITE sip:u@resolve.example.net:5080 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dns{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=d1\nTo: <sip:u@resolve.example.net>\nCall-ID: dns\nCSeq: 1 INVITE\nContent-Length: 0\n\n"),
    (2, "SUBSCRIBE sip:u@fail.invalid SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-nx{V};rport\nMax-Forwards: 1\nFrom: <sip:carol@other.org>;tag=n1\nTo: <sip:u@fail.invalid>\nCall-ID: nx\nCSeq: 1 SUBSCRIBE\nEvent: presence\nExpires: 60\nContent-Length: 0\n\n"),
];

/// Status codes a callee answers with.
const STATUSES: [u16; 12] = [100, 180, 183, 200, 202, 302, 404, 407, 486, 487, 503, 603];

impl World {
    fn template(&mut self, who: usize, payload: &[u8], credentials: bool) -> Vec<u8> {
        let Some((&pick, rest)) = payload.split_first() else { return Vec::new() };
        let (user, text) = TEMPLATES[usize::from(pick) % TEMPLATES.len()];
        let peer = self.peer(who);
        let variant = (pick / TEMPLATES.len() as u8 % 4).to_string();
        let mut text = text
            .replace("{T}", peer.transport.as_via_str())
            .replace("{A}", &peer.addr.to_string())
            .replace("{V}", &variant);
        let auth = match (&self.last_nonce, credentials) {
            (Some(nonce), true) => {
                let method = text.split(' ').next().unwrap_or("").to_owned();
                let uri = text.split(' ').nth(1).unwrap_or("").to_owned();
                let header = if method == "REGISTER" { "Authorization" } else { "Proxy-Authorization" };
                self.nc += 1;
                format!("{header}: {}\n", digest(USERS[user], &method, &uri, nonce, self.nc))
            }
            _ => String::new(),
        };
        text = text.replace("{AUTH}", &auth).replace('\n', "\r\n");
        let mut bytes = text.into_bytes();
        splice(&mut bytes, rest);
        bytes
    }

    /// A response to one of the requests herald sent, from where it went.
    fn reply(&mut self, payload: &[u8]) -> Option<(Peer, Vec<u8>)> {
        let (&pick, rest) = payload.split_first()?;
        let n = self.sent_requests.len();
        if n == 0 {
            return None;
        }
        let (to, req) = &self.sent_requests[n - 1 - usize::from(pick) % n];
        let status = STATUSES[usize::from(pick >> 4) % STATUSES.len()];
        let mut bytes = response_to(req, *to, status);
        splice(&mut bytes, rest);
        Some((*to, bytes))
    }

    /// Bytes from `from` (a peer herald sent to): if it is one of ours, over its current
    /// connection (a response may come back on a newer one than its request left on).
    fn receive_from_peer(&mut self, from: Peer, bytes: &[u8]) {
        if let Some(i) = (0..4).find(|i| {
            let p = self.peer(*i);
            p.transport == from.transport && p.addr == from.addr
        }) {
            self.receive(i, bytes);
            return;
        }
        let framing = if from.transport.is_reliable() { Framing::Stream } else { Framing::Datagram };
        // A stream peer that is none of ours: one frame on its own connection.
        let got = inbound::classify(Bytes::copy_from_slice(bytes), &self.limits, framing, false);
        self.inbound(from, got);
    }
}

/// RFC 7616 §3.4.1 with qop=auth, MD5 (herald offers it last, accepts it all the same).
fn digest((user, password): (&str, &str), method: &str, uri: &str, nonce: &str, nc: u32) -> String {
    let answer = herald_credentials::Answer {
        algorithm: Algorithm::Md5,
        sess: false,
        user,
        realm: DOMAIN,
        nonce,
        uri,
        nc: Some(nc),
        cnonce: "fuzzcn",
        opaque: None,
    };
    answer.header_value(method, password)
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
