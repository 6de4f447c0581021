//! The simulation: herald, the UAs and the network on one virtual clock (quinn-proto's `Pair`,
//! with more than two endpoints). Nothing reads the real clock or the operating system's
//! randomness after [`Sim::new`]: the same seed and the same calls give the same datagrams at
//! the same virtual times ([`Network::digest`]).

use crate::herald::{Herald, HeraldConfig};
use crate::net::{Datagram, Network};
use crate::ua::{Sends, Ua};
use bytes::Bytes;
use herald_core::{Peer, Transport};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A UA's place in [`Sim::uas`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UaId(pub usize);

pub struct Sim {
    pub start: Instant,
    pub now: Instant,
    pub herald: Herald,
    pub uas: Vec<Ua>,
    pub net: Network,
    seed: u64,
}

impl Sim {
    /// herald as `cfg` says; the network's latency is 5 ms each way, its loss decided by `cfg.seed`.
    pub fn new(cfg: HeraldConfig) -> Sim {
        // The one real instant: every time in the run is an offset from it, and nothing in herald
        // depends on its absolute value (nonces and the store count from the first `now`).
        let start = Instant::now();
        Sim {
            start,
            now: start,
            herald: Herald::new(&cfg, start),
            uas: Vec::new(),
            net: Network::new(start, cfg.seed ^ 0x6e65_7477_6f72_6b00, Duration::from_millis(5)),
            seed: cfg.seed,
        }
    }

    /// Adds a UA of herald's domain at `addr`, sending its requests to herald.
    pub fn add_ua(&mut self, name: &str, addr: &str) -> UaId {
        let addr: SocketAddr = addr.parse().expect("a socket address");
        let domain = self.herald.domain.clone();
        self.uas.push(Ua::new(name, &domain, addr, self.herald.addr, self.start, self.seed));
        UaId(self.uas.len() - 1)
    }

    /// `id` connects to herald over a stream flow of `transport` (WebSocket, TCP): its requests
    /// arrive over that flow and herald's sends on it fail once [`Sim::disconnect`] closed it.
    pub fn connect(&mut self, id: UaId, transport: Transport) -> Peer {
        self.uas[id.0].set_transport(transport);
        let addr = self.uas[id.0].addr;
        self.herald.open_stream(addr, transport)
    }

    /// `id`'s flow to herald dies (no close handshake reaches anyone: herald learns it when a
    /// send fails).
    pub fn disconnect(&mut self, id: UaId) {
        let addr = self.uas[id.0].addr;
        self.herald.close_stream(addr);
    }

    pub fn ua(&self, id: UaId) -> &Ua {
        &self.uas[id.0]
    }

    pub fn ua_mut(&mut self, id: UaId) -> &mut Ua {
        &mut self.uas[id.0]
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Lets `id` act now (`register`, `invite`, `bye`...) and puts what it sends on the wire.
    pub fn act<T>(&mut self, id: UaId, f: impl FnOnce(&mut Ua, Instant) -> (T, Sends)) -> T {
        let now = self.now;
        let (value, sends) = f(&mut self.uas[id.0], now);
        let from = self.uas[id.0].addr;
        self.send(from, sends);
        value
    }

    fn send(&mut self, from: SocketAddr, sends: Sends) {
        for (to, bytes) in sends {
            self.net.send(self.now, Datagram { from, to, bytes });
        }
    }

    /// The earliest thing that happens next: a delivery or a timer of herald or a UA.
    fn next_event(&self) -> Option<Instant> {
        let uas = self.uas.iter().filter_map(Ua::next_timeout);
        [self.net.next_delivery(), self.herald.poll_timeout()].into_iter().flatten().chain(uas).min()
    }

    /// Runs everything that happens within `d` of now, in order of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        while let Some(at) = self.next_event().filter(|at| *at <= until) {
            self.now = self.now.max(at);
            self.tick();
        }
        self.now = until;
    }

    /// Runs until `done` holds (checked after each event) or `limit` has passed; says which.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let until = self.now + limit;
        while !done(self) {
            match self.next_event().filter(|at| *at <= until) {
                Some(at) => {
                    self.now = self.now.max(at);
                    self.tick();
                }
                None => {
                    self.now = until;
                    return done(self);
                }
            }
        }
        true
    }

    /// Everything due at `now`: deliveries first (in sending order), then timers.
    fn tick(&mut self) {
        let now = self.now;
        while let Some(d) = self.net.deliver(now) {
            self.deliver(d);
        }
        if self.herald.poll_timeout().is_some_and(|at| at <= now) {
            let sends = self.herald.timeouts(now);
            self.send(self.herald.addr, sends);
        }
        for i in 0..self.uas.len() {
            if self.uas[i].next_timeout().is_some_and(|at| at <= now) {
                let sends = self.uas[i].timeouts(now);
                let from = self.uas[i].addr;
                self.send(from, sends);
            }
        }
    }

    fn deliver(&mut self, d: Datagram) {
        let now = self.now;
        if d.to == self.herald.addr {
            let sends = self.herald.receive(now, d.from, d.bytes);
            self.send(self.herald.addr, sends);
        } else if let Some(i) = self.uas.iter().position(|u| u.addr == d.to) {
            let sends = self.uas[i].receive(now, d.from, d.bytes);
            let from = self.uas[i].addr;
            self.send(from, sends);
        }
        // Anything else goes to an address nobody has: lost, as on a real network.
    }

    /// Datagrams herald sent to `to` whose first line starts with `start` (e.g. "INVITE",
    /// "SIP/2.0 200").
    pub fn herald_sent(&self, to: SocketAddr, start: &str) -> Vec<(Duration, Bytes)> {
        self.net
            .log()
            .iter()
            .filter(|s| s.datagram.from == self.herald.addr && s.datagram.to == to)
            .filter(|s| s.datagram.first_line().starts_with(start))
            .map(|s| (s.at, s.datagram.bytes.clone()))
            .collect()
    }
}
