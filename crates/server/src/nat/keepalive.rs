//! Keep-alives to registered phones behind NAT (Kamailio's `nat_keepalive`, RFC 5626 §3.5.1
//! style): every `[nat] keepalive_interval_s`, each UDP binding that `herald_core::nat` takes for
//! one behind NAT gets a datagram from herald's SIP port at the address its REGISTER came from,
//! so that the NAT keeps the mapping (and calls to the phone still get through).
//!
//! * `"crlf"`: a "\r\n\r\n" datagram (herald's own ingress drops such keep-alives, and so do
//!   phones), sent with sendmmsg a page of bindings at a time, never waiting for room.
//! * `"options"`: an OPTIONS of herald's own through the engine (`crate::pings`: a real client
//!   transaction, from the listening socket). Any final response is an answer; a binding whose
//!   OPTIONS went unanswered `keepalive_max_failures` times in a row is removed from the
//!   location store (`LocationStore::remove_binding`, journaled like any change), which is how
//!   a phone that left without unregistering stops taking calls that would ring nowhere.
//!
//! The loop runs on the main thread's runtime, off the workers; it reads the store a page of
//! AoRs at a time (`LocationStore::scan`: one shard's read lock per page, yielding in between),
//! never the whole store under one lock. Its state is bounded by the store: one entry per NATed
//! binding at most (misses), and pings in flight are capped ([`MAX_IN_FLIGHT`]).

use super::wake::Wake;
use crate::config::{Keepalive, Nat};
use crate::pings::{PingReport, Pinger};
use crate::udp::{send_batch, Outgoing};
use bytes::Bytes;
use herald_core::nat::{binding_behind_nat, EdgeFlows, NatDetect};
use herald_core::registrar::{Aor, Location};
use herald_core::{Peer, PingOutcome, PingTarget, Transport};
use herald_store::{Binding, ScanCursor};
use prometheus_client::metrics::counter::Counter;
use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// AoRs read under one shard lock.
const PAGE: usize = 256;
/// OPTIONS keep-alives waiting for their outcome at most; bindings past it wait for the next
/// round (the engines refuse more than `herald_core::ping::MAX_PINGS_IN_FLIGHT` each anyway).
pub(crate) const MAX_IN_FLIGHT: usize = 16_384;
/// RFC 5626 §3.5.1: a CRLF keep-alive is a double CRLF.
const CRLF: &[u8] = b"\r\n\r\n";

/// The keep-alive counters (each a shared atomic; clones count together).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeepaliveCounters {
    pub sent: Counter,
    pub answered: Counter,
    pub dropped: Counter,
    /// Rounds run (none while there is nothing to keep alive).
    pub rounds: Counter,
}

/// Whether `b` is due keep-alives: UDP, behind NAT, and not behind a Path (a proxy in front of
/// the phone keeps its own NAT open, and the source is that proxy, not the phone).
pub(crate) fn needs_keepalive(b: &Binding<Peer>, detect: NatDetect) -> bool {
    b.source.transport == Transport::Udp && b.path.is_none() && binding_behind_nat(&b.contact, b.source, detect)
}

/// One binding: its AoR and contact (what `remove_binding` needs).
type Key = (Aor, Box<str>);

/// The keep-alive state: which bindings are due, what is in flight, who missed how often.
pub(crate) struct Keepalives {
    mode: Keepalive,
    detect: NatDetect,
    max_failures: u32,
    /// How long an OPTIONS may stay unanswered: shorter than the interval, so that the next
    /// round does not find it still in flight.
    timeout: Duration,
    /// The round period; a round spreads its pages over half of it ([`Keepalives::round`]).
    interval: Duration,
    /// Pages the last round read (0 before the first).
    last_pages: u32,
    store: Arc<Location>,
    /// Flows of phones behind NAT herald registered elsewhere as their edge proxy: CRLF
    /// keep-alives in every mode (no binding here to drop).
    edge: Option<Arc<EdgeFlows>>,
    /// Herald's UDP sockets (copies of one worker's), by bound address.
    senders: Vec<(SocketAddr, UdpSocket)>,
    pinger: Option<Pinger>,
    /// OPTIONS in flight: token → (binding, when sent), and the bindings they are for (one
    /// OPTIONS per binding at a time).
    in_flight: HashMap<u64, (Key, Instant)>,
    flying: HashSet<Key>,
    /// Unanswered OPTIONS in a row, per binding that has missed at least one.
    misses: HashMap<Key, u32>,
    counters: KeepaliveCounters,
}

impl Keepalives {
    /// `pinger`: the engine's ping client, needed for `"options"` only.
    pub(crate) fn new(
        nat: &Nat,
        store: Arc<Location>,
        edge: Option<Arc<EdgeFlows>>,
        senders: Vec<(SocketAddr, UdpSocket)>,
        pinger: Option<Pinger>,
        counters: KeepaliveCounters,
    ) -> Keepalives {
        let interval = Duration::from_secs(nat.keepalive_interval_s.max(1));
        Keepalives {
            mode: nat.keepalive,
            detect: nat.engine().detect,
            max_failures: nat.keepalive_max_failures.max(1),
            timeout: (interval / 2).clamp(Duration::from_millis(500), Duration::from_secs(16)),
            interval,
            last_pages: 0,
            store,
            edge,
            senders,
            pinger,
            in_flight: HashMap::new(),
            flying: HashSet::new(),
            misses: HashMap::new(),
            counters,
        }
    }

    /// The bindings of one page that are due a keep-alive ([`needs_keepalive`]).
    fn page(&self, cursor: ScanCursor, now: Instant) -> (Vec<(Key, Peer)>, Option<ScanCursor>) {
        let mut due = Vec::new();
        let next = self.store.scan(cursor, PAGE, now, |aor| {
            for b in aor.live().filter(|b| needs_keepalive(b, self.detect)) {
                due.push(((aor.aor().clone(), b.contact.clone()), b.source));
            }
        });
        (due, next)
    }

    /// One round over the whole store, a page at a time. The pages are spread over half the
    /// interval (paced by the last round's page count), so that a large store sends its
    /// keep-alives as a steady trickle rather than a burst every interval (for OPTIONS: fewer
    /// in flight at once than the engines' cap). Returns how many bindings and edge flows it
    /// found due (0: nothing to keep alive).
    pub(crate) async fn round(&mut self) -> usize {
        let started = Instant::now();
        self.expire_in_flight(started);
        let mut seen: HashSet<Key> = HashSet::new();
        let mut cursor = Some(ScanCursor::START);
        let pause = (self.last_pages > 1).then(|| (self.interval / 2) / self.last_pages);
        let mut pages = 0u32;
        let mut found = 0;
        while let Some(c) = cursor {
            pages = pages.saturating_add(1);
            let now = Instant::now();
            let (due, next) = self.page(c, now);
            cursor = next;
            found += due.len();
            match self.mode {
                Keepalive::Off => return found,
                Keepalive::Crlf => self.send_crlf(due.iter().map(|(_, p)| p.addr)),
                Keepalive::Options => {
                    for (key, peer) in due {
                        seen.insert(key.clone());
                        self.send_options(key, peer, now);
                    }
                }
            }
            match pause {
                Some(p) if cursor.is_some() => tokio::time::sleep(p).await,
                _ => tokio::task::yield_now().await,
            }
        }
        self.last_pages = pages;
        if let Some(edge) = &self.edge {
            let flows = edge.due(Instant::now());
            found += flows.len();
            self.send_crlf(flows.into_iter());
        }
        // A binding that is gone (expired, unregistered, registered again from elsewhere)
        // forgets its misses.
        if self.mode == Keepalive::Options {
            self.misses.retain(|k, _| seen.contains(k));
        }
        self.counters.rounds.inc();
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, found, "NAT keep-alive round done");
        found
    }

    /// Whether anything needs keep-alives now (a NATed UDP binding, an edge flow), sending
    /// none: how the loop learns at its start that it may sleep, without waiting an interval
    /// for a round to tell it. Stops at the first one found; yields between pages.
    pub(crate) async fn anything_due(&self) -> bool {
        if self.edge.as_ref().is_some_and(|e| !e.is_empty()) {
            return true;
        }
        let mut cursor = Some(ScanCursor::START);
        while let Some(c) = cursor {
            let (due, next) = self.page(c, Instant::now());
            if !due.is_empty() {
                return true;
            }
            cursor = next;
            tokio::task::yield_now().await;
        }
        false
    }

    fn send_crlf(&self, due: impl Iterator<Item = SocketAddr> + Clone) {
        for (local, socket) in &self.senders {
            let batch: Vec<Outgoing> = due
                .clone()
                .filter(|to| to.is_ipv4() == local.is_ipv4())
                .map(|to| Outgoing { to, bytes: Bytes::from_static(CRLF), origin: None })
                .collect();
            if batch.is_empty() {
                continue;
            }
            let (sent, err) = send_batch(socket, &batch);
            self.counters.sent.inc_by(sent as u64);
            if let Some(e) = err {
                tracing::debug!(error = %e, unsent = batch.len() - sent, "NAT keep-alives not sent");
            }
        }
    }

    fn send_options(&mut self, key: Key, peer: Peer, now: Instant) {
        let Some(pinger) = &self.pinger else { return };
        if self.in_flight.len() >= MAX_IN_FLIGHT || self.flying.contains(&key) {
            return;
        }
        // The Request-URI is the registered contact: the phone takes the OPTIONS as its own.
        let Some(token) = pinger.ping(PingTarget::Peer(peer), Some(key.1.to_string()), 1, Some(self.timeout)) else {
            return;
        };
        self.counters.sent.inc();
        self.flying.insert(key.clone());
        self.in_flight.insert(token, (key, now));
    }

    /// An OPTIONS keep-alive ended. Any final response is an answer; no answer (timeout,
    /// ICMP error) is a miss; a ping herald could not send counts as neither.
    pub(crate) fn on_report(&mut self, report: PingReport, now: Instant) {
        let Some((key, _)) = self.in_flight.remove(&report.token) else { return };
        self.flying.remove(&key);
        match report.outcome {
            PingOutcome::Answered(_) => {
                self.counters.answered.inc();
                self.misses.remove(&key);
            }
            PingOutcome::TimedOut | PingOutcome::TransportError => self.missed(key, now),
            PingOutcome::Unresolved(_) | PingOutcome::NotSent(_) => {}
        }
    }

    /// Pings whose report never came (the report channel was full) count as missed once they
    /// are well past their timeout.
    fn expire_in_flight(&mut self, now: Instant) {
        let limit = self.timeout + Duration::from_secs(2);
        let lost: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) > limit)
            .map(|(t, _)| *t)
            .collect();
        for token in lost {
            if let Some((key, _)) = self.in_flight.remove(&token) {
                self.flying.remove(&key);
                self.missed(key, now);
            }
        }
    }

    fn missed(&mut self, key: Key, now: Instant) {
        let n = self.misses.entry(key.clone()).or_insert(0);
        *n += 1;
        if *n < self.max_failures {
            return;
        }
        self.misses.remove(&key);
        let removed = self.store.remove_binding(&key.0, &key.1, now);
        if removed.count > 0 {
            self.counters.dropped.inc_by(removed.count as u64);
            tracing::info!(target: "herald::registrar", aor = %key.0, contact = %key.1, misses = self.max_failures, "registration removed: NAT keep-alive unanswered");
        }
    }
}

/// Runs keep-alive rounds every `interval` until dropped (the task is aborted at the drain),
/// the first an interval after the start (bindings registered at start-up are fresh). With
/// nothing to keep alive, at the start or after a round that found nothing, it waits for an
/// arrival instead (`wake`: a REGISTER, or a durable copy still loading), and the next round
/// comes an interval after that (the REGISTER just opened the NAT's mapping).
pub(crate) async fn run(
    mut ka: Keepalives,
    interval: Duration,
    wake: Arc<Wake>,
    mut reports: Option<mpsc::Receiver<PingReport>>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate
    wake.watch();
    let mut idle = !ka.anything_due().await && wake.can_idle();
    if !idle {
        wake.unwatch();
    }
    loop {
        tokio::select! {
            _ = tick.tick(), if !idle => {
                wake.watch();
                idle = ka.round().await == 0 && wake.can_idle();
                if !idle {
                    wake.unwatch();
                }
            }
            _ = wake.arrival(), if idle => {
                wake.unwatch();
                idle = false;
                tick.reset();
            }
            Some(r) = async { match reports.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                ka.on_report(r, Instant::now());
            }
        }
    }
}
