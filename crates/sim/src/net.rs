//! The in-memory network: datagrams between addresses, a fixed one-way latency, seeded random
//! loss and scripted drops, and a log of every datagram with what became of it.

use crate::rng::SimRng;
use bytes::Bytes;
use herald_sip::{Limits, Message};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// One datagram on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub bytes: Bytes,
}

impl Datagram {
    /// The datagram parsed as SIP (`None` for bytes that do not parse).
    pub fn message(&self) -> Option<Message> {
        Message::parse(self.bytes.clone(), &Limits::default()).ok()
    }

    /// The first line, for assertions and traces.
    pub fn first_line(&self) -> String {
        let end = self.bytes.iter().position(|c| *c == b'\r' || *c == b'\n').unwrap_or(self.bytes.len());
        String::from_utf8_lossy(&self.bytes[..end]).into_owned()
    }
}

/// What became of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Queued for delivery after the latency.
    InFlight,
    /// Lost at random ([`Network::set_loss`]).
    Lost,
    /// Dropped by a scripted rule ([`Network::drop_next`]).
    Dropped,
}

/// A log line: when a datagram was sent (time since the start) and what became of it.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Duration,
    pub datagram: Datagram,
    pub fate: Fate,
}

type Rule = Box<dyn FnMut(&Datagram) -> bool>;

pub struct Network {
    start: Instant,
    latency: Duration,
    loss_per_mille: u32,
    rng: SimRng,
    /// (delivery time, sequence number) → datagram: equal times keep their sending order.
    queue: BTreeMap<(Instant, u64), Datagram>,
    seq: u64,
    /// One-shot drops: the first datagram a rule matches is dropped and the rule removed.
    rules: Vec<Rule>,
    log: Vec<Sent>,
}

impl Network {
    /// `seed` drives the loss decisions; `latency` is one-way, for every datagram.
    pub fn new(start: Instant, seed: u64, latency: Duration) -> Network {
        Network {
            start,
            latency,
            loss_per_mille: 0,
            rng: SimRng::new(seed),
            queue: BTreeMap::new(),
            seq: 0,
            rules: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Every datagram is lost with probability `per_mille` / 1000 (decided by the seeded PRNG,
    /// one draw per datagram, in sending order).
    pub fn set_loss(&mut self, per_mille: u32) {
        self.loss_per_mille = per_mille.min(1000);
    }

    /// Drops the next datagram that `rule` matches (once).
    pub fn drop_next(&mut self, rule: impl FnMut(&Datagram) -> bool + 'static) {
        self.rules.push(Box::new(rule));
    }

    pub fn send(&mut self, now: Instant, datagram: Datagram) {
        let fate = if let Some(i) = self.rules.iter_mut().position(|r| r(&datagram)) {
            drop(self.rules.remove(i));
            Fate::Dropped
        } else if self.loss_per_mille > 0 && self.rng.chance(self.loss_per_mille) {
            Fate::Lost
        } else {
            Fate::InFlight
        };
        if fate == Fate::InFlight {
            self.seq += 1;
            self.queue.insert((now + self.latency, self.seq), datagram.clone());
        }
        self.log.push(Sent { at: now - self.start, datagram, fate });
    }

    /// When the next datagram arrives.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.keys().next().map(|(at, _)| *at)
    }

    /// The next datagram due at or before `now`.
    pub fn deliver(&mut self, now: Instant) -> Option<Datagram> {
        let (&(at, seq), _) = self.queue.iter().next()?;
        (at <= now).then(|| self.queue.remove(&(at, seq)).expect("key just seen"))
    }

    /// Every datagram sent so far, in order.
    pub fn log(&self) -> &[Sent] {
        &self.log
    }

    /// A 64-bit FNV-1a digest of the whole log (times, addresses, bytes, fates): two runs
    /// that agree on it sent the same datagrams at the same virtual times.
    pub fn digest(&self) -> u64 {
        let mut d = Digest::default();
        for s in &self.log {
            d.write(&s.at.as_nanos().to_le_bytes());
            d.write(s.datagram.from.to_string().as_bytes());
            d.write(s.datagram.to.to_string().as_bytes());
            d.write(&s.datagram.bytes);
            d.write(&[s.fate as u8]);
        }
        d.0
    }
}

/// FNV-1a over length-prefixed fields (so that field boundaries cannot shift).
#[derive(Debug, Clone, Copy)]
pub struct Digest(pub u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    pub fn write(&mut self, bytes: &[u8]) {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
