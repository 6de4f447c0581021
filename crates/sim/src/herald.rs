//! Herald as the simulator runs it: one engine with a registrar, a location store and (when
//! asked) digest authentication, behind the runtime's ingress checks
//! ([`herald_core::inbound::classify`]), with DNS answered from a fixed table, and the stream
//! flows (WebSocket, TCP) the runtime would hold: a UA's datagrams arrive over its open flow's
//! [`Peer`] (with its [`ConnId`]), and a send on a closed flow is a transport error, as the
//! runtime reports it (`Ctl::TransportError`).

use bytes::Bytes;
use herald_core::auth::{Algorithm, AuthConfig, AuthPolicy, Authenticator, Credentials, SharedCredentials, UserHa1};
use herald_core::engine::{Engine, EngineConfig, Forking, Listener, RecordRoute};
use herald_core::inbound::{self, Inbound};
use herald_core::proxy::Identity;
use herald_core::registrar::{Location, Registrar, RegistrarConfig};
use herald_core::transaction::Timers;
use herald_core::{
    ConnId, Input, Output, Peer, Resolution, ResolveError, ResolveRequest, Seed, SipHandler, Target, Transport,
};
use herald_sip::{Framing, Limits, Message};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the simulated herald is set up.
#[derive(Debug, Clone)]
pub struct HeraldConfig {
    pub addr: SocketAddr,
    pub domain: String,
    /// Keys herald's branches, tags and nonces: the same seed, the same bytes.
    pub seed: u64,
    /// Digest users (user, password); empty: nobody is challenged.
    pub users: Vec<(String, String)>,
    pub forking: Forking,
    pub record_route: RecordRoute,
    pub stateless: bool,
    pub timers: Timers,
    pub timer_c: Duration,
    pub max_bindings_per_aor: usize,
    /// Names the simulated DNS knows (anything else: no such name).
    pub dns: Vec<(String, Target)>,
    /// Gateway sets (`[[gateway_set]]`) and the routing table (`[[route]]`) that sends calls
    /// to them; default: none.
    pub gateways: Arc<herald_core::gateways::Gateways>,
    pub routing: Arc<herald_core::routing::RoutingTable>,
}

impl HeraldConfig {
    pub fn new(addr: SocketAddr, domain: &str, seed: u64) -> HeraldConfig {
        HeraldConfig {
            addr,
            domain: domain.to_owned(),
            seed,
            users: Vec::new(),
            forking: Forking::Parallel,
            record_route: RecordRoute::Always,
            stateless: false,
            timers: Timers::default(),
            timer_c: Duration::from_secs(180),
            max_bindings_per_aor: 20,
            dns: Vec::new(),
            gateways: Arc::default(),
            routing: Arc::default(),
        }
    }
}

/// The engine and what the runtime does around it.
pub struct Herald {
    pub engine: Engine,
    pub store: Arc<Location>,
    pub registrar: Registrar,
    pub addr: SocketAddr,
    pub domain: String,
    limits: Limits,
    dns: Vec<(String, Target)>,
    /// Open stream flows by the UA's address.
    streams: BTreeMap<SocketAddr, Peer>,
    /// Flows that were closed: a send on one fails.
    closed: BTreeSet<ConnId>,
    next_conn: u64,
}

impl Herald {
    /// `now`: the simulation's start (anchors the nonces' wall clock).
    pub fn new(cfg: &HeraldConfig, now: Instant) -> Herald {
        let seed = Seed::fixed(cfg.seed);
        let engine_cfg = EngineConfig {
            identity: Identity::new(vec![cfg.addr], [cfg.domain.clone()]),
            listeners: vec![
                Listener { transport: Transport::Udp, addr: cfg.addr },
                Listener { transport: Transport::Tcp, addr: cfg.addr },
                Listener { transport: Transport::Ws, addr: cfg.addr },
            ],
            timers: cfg.timers,
            record_route: cfg.record_route,
            forking: cfg.forking,
            stateless: cfg.stateless,
            timer_c: cfg.timer_c,
            routes: None,
            seed,
            nat: herald_core::nat::NatConfig::default(),
            gateways: cfg.gateways.clone(),
            routing: cfg.routing.clone(),
        };
        let reg_cfg = RegistrarConfig {
            max_bindings_per_aor: cfg.max_bindings_per_aor,
            seed: seed.derive("registrar", 0),
            ..RegistrarConfig::default()
        };
        let registrar = Registrar::new(reg_cfg);
        let store = Arc::new(registrar.new_store());
        let mut engine = Engine::new(Arc::new(engine_cfg), store.clone(), registrar.clone(), 0);
        if !cfg.users.is_empty() {
            let mut creds = Credentials::new(&cfg.domain);
            for (user, password) in &cfg.users {
                creds.insert(user, UserHa1::from_password(user, &cfg.domain, password));
            }
            let auth_cfg = AuthConfig {
                realm: cfg.domain.clone(),
                domain_realms: Vec::new(),
                algorithms: Algorithm::ALL.to_vec(),
                nonce_lifetime: Duration::from_secs(300),
                policy: AuthPolicy::default(),
            };
            let secret = seed.derive("auth secret", 0).keys();
            let secret: Vec<u8> = secret.iter().flat_map(|k| k.to_le_bytes()).collect();
            let salt = seed.derive("nonce salt", 0).keys()[0];
            let shared = Arc::new(SharedCredentials::new(creds));
            let auth = Authenticator::new(auth_cfg, shared, &secret, salt, now, 1_700_000_000);
            engine = engine.with_auth(Arc::new(auth));
        }
        Herald {
            engine,
            store,
            registrar,
            addr: cfg.addr,
            domain: cfg.domain.clone(),
            limits: Limits::default(),
            dns: cfg.dns.clone(),
            streams: BTreeMap::new(),
            closed: BTreeSet::new(),
            next_conn: 0,
        }
    }

    /// Opens a stream flow of `transport` from `addr` (the UA connected): what arrives from
    /// `addr` from now on comes over it. Returns the flow's peer.
    pub fn open_stream(&mut self, addr: SocketAddr, transport: Transport) -> Peer {
        self.next_conn += 1;
        let peer = Peer { transport, addr, conn: Some(ConnId(self.next_conn)) };
        self.streams.insert(addr, peer);
        peer
    }

    /// Closes the stream flow from `addr` (the connection died): sends on it fail from now on.
    pub fn close_stream(&mut self, addr: SocketAddr) {
        if let Some(c) = self.streams.remove(&addr).and_then(|p| p.conn) {
            self.closed.insert(c);
        }
    }

    /// A datagram for herald: the runtime's ingress, then the engine. Returns what to send.
    pub fn receive(&mut self, now: Instant, from: SocketAddr, bytes: Bytes) -> Vec<(SocketAddr, Bytes)> {
        let truncated = bytes.len() > self.limits.max_message_size;
        match inbound::classify(bytes, &self.limits, Framing::Datagram, truncated) {
            Inbound::Message(msg) => {
                let peer = self.streams.get(&from).copied().unwrap_or(Peer::udp(from));
                self.handle(now, peer, msg)
            }
            Inbound::Answer { bytes, .. } => vec![(from, bytes.freeze())],
            Inbound::Drop(_) => Vec::new(),
        }
    }

    /// One parsed message into the engine, its outputs carried out.
    pub fn handle(&mut self, now: Instant, from: Peer, msg: Message) -> Vec<(SocketAddr, Bytes)> {
        let mut out = Vec::new();
        self.engine.handle(now, Input::Message { from, local: self.addr, msg }, &mut out);
        self.settle(now, out)
    }

    /// Runs the timers due at `now`.
    pub fn timeouts(&mut self, now: Instant) -> Vec<(SocketAddr, Bytes)> {
        let mut out = Vec::new();
        self.engine.handle_timeouts(now, &mut out);
        self.settle(now, out)
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    /// Sends become datagrams (a send on a closed flow becomes a transport error); lookups are
    /// answered at once from the table (feeding back until nothing is left).
    fn settle(&mut self, now: Instant, out: Vec<Output>) -> Vec<(SocketAddr, Bytes)> {
        let mut sends = Vec::new();
        let mut queue = std::collections::VecDeque::from(out);
        while let Some(o) = queue.pop_front() {
            match o {
                Output::Send { to, .. } if to.conn.is_some_and(|c| self.closed.contains(&c)) => {
                    let mut more = Vec::new();
                    self.engine.handle(now, Input::TransportError { to }, &mut more);
                    queue.extend(more);
                }
                Output::Send { to, bytes } => sends.push((to.addr, bytes)),
                Output::PingDone { .. } => {} // the simulated herald sends no pings
                Output::Resolve { token, request } => {
                    let mut more = Vec::new();
                    let result = resolve(&self.dns, &request);
                    self.engine.handle(now, Input::Resolved { token, result }, &mut more);
                    queue.extend(more);
                }
            }
        }
        sends
    }
}

/// The simulated DNS: a name in the table resolves to its target; any other name does not exist.
pub fn resolve(table: &[(String, Target)], r: &ResolveRequest) -> Resolution {
    let found: Vec<Target> = table.iter().filter(|(n, _)| n.eq_ignore_ascii_case(&r.host)).map(|(_, t)| *t).collect();
    if found.is_empty() {
        return Err(ResolveError::NoSuchName);
    }
    Ok(found)
}
