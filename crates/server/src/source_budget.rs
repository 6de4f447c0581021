//! Per-source budgets of held transactions and bytes (`limits.max_transactions_per_source`,
//! `limits.max_held_bytes_per_source`; issue 16 item 3).
//!
//! The global budgets (`max_transactions`, `max_held_bytes`) bound memory, but not who holds
//! it: sixteen addresses, each under the flood threshold, sending 60 KB OPTIONS to a target that
//! never answers filled `max_held_bytes`, and everyone else got 503 for as long as the held
//! requests lived. A source must not take more than its share.
//!
//! # Design: charges that expire after the longest life a transaction can have
//!
//! The transactions live in the engine shards, keyed by branch and spread by Call-ID; the
//! runtime does not see them end (a timer or another peer's response ends them). What it does
//! see is what handling a request produced, under the shard's lock, before anything else runs,
//! and whether the shard then holds more transactions than before. A request that left it
//! holding no more holds nothing and is charged nothing: an answer sent statelessly (the digest
//! challenge of an unauthenticated request, so that a forged flood of them, one request per
//! forged address, fills neither this table nor memory), a request forwarded without state (the
//! ACK for a 2xx and stateless mode, RFC 3261 §16.11: its copy leaves at once, and a stateless
//! forward never waits for a name lookup), a retransmission absorbed by a running transaction
//! (nothing sent, or a provisional response again: a phone retransmitting over UDP is not
//! charged again). A request that started one is charged by its outputs: forwarded copies
//! (`Output::Send` of a request to another peer, or a name lookup that will lead to one) mean a
//! server transaction, its own bytes, and a client transaction with each copy; a final response
//! sent back alone means a server transaction that keeps it for retransmissions. That is an
//! exact count of what the request made, at the moment it made it.
//!
//! The charge is then held for [`horizon`], the longest a transaction started now can hold
//! anything without new input: a non-INVITE sent to a silent target lives 64*T1 (Timer F) and
//! its server side 64*T1 more after the 408 (Timer J); an INVITE 64*T1 (Timer B), then Timer D
//! (32 s) or H (64*T1). Charges live in time slots per source, so the cost is O(1) per request
//! and a few hundred bytes per source, and nothing must be told when a transaction ends. It
//! over-counts (a call answered in a second stays charged for the horizon), which only matters
//! for a source near its budget, and the default budgets are 1/64 of the global ones, far above
//! what `[flood] max_requests` lets one source start in a horizon with ordinary messages. It
//! under-counts one case: an INVITE that the callee keeps alive with provisional responses
//! (Timer C, RFC 3261 §16.6 step 11) outlives the horizon; the global budgets still bound those.
//! An exact count would need the engine to report each transaction's source when it ends.
//! The check (before handling) and the charge (after) take the source's lock separately, so
//! requests of one source handled at the same moment by several workers may pass together:
//! the budget can be overshot by one request per worker, as the global budgets, sampled every
//! 10 ms, by what arrives in 10 ms.
//!
//! # Bounds
//!
//! A source is an IPv4 address or an IPv6 /64, as for the flood guard. At most `max_sources`
//! (`[flood] max_sources`) are tracked, in shards; a full shard drops its expired entries (at
//! most once a slot), and a source that still finds no room goes uncharged and unlimited, like
//! an untracked source of the flood guard: refusing it would let whoever fills the table deny
//! service to everyone else. The global budgets still hold.

use herald_core::Output;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SHARDS: usize = 64;
/// Time slots per horizon: a charge is held for between `SLOTS - 1` and `SLOTS` slots.
const SLOTS: usize = 9;
/// Timer D over unreliable transports (RFC 3261 §17.1.1.2: "at least 32 seconds").
const TIMER_D: Duration = Duration::from_secs(32);

/// The longest a transaction started now may hold memory without further input (module docs).
pub(crate) fn horizon(t1: Duration, t4: Duration) -> Duration {
    t1 * 128 + TIMER_D.max(t4)
}

/// What handling one request made the engine hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub transactions: u32,
    pub bytes: u64,
}

impl Cost {
    /// The cost of a request of `len` bytes from `from` whose handling produced `out`;
    /// `started`: its shard holds more transactions than before it (module docs).
    pub(crate) fn of(out: &[Output], from: &herald_core::Peer, len: usize, started: bool) -> Cost {
        if !started {
            return Cost::default();
        }
        let mut branches = 0u32;
        let mut copies = 0u64;
        let mut answered = 0u64;
        for o in out {
            match o {
                Output::Send { to, bytes } if to.addr != from.addr && !is_response(bytes) => {
                    branches += 1;
                    copies += bytes.len() as u64;
                }
                Output::Send { to, bytes } if to.addr == from.addr && is_final(bytes) => answered += bytes.len() as u64,
                Output::Send { .. } => {}
                // A name lookup: the copy is forwarded when it answers.
                Output::Resolve { .. } => {
                    branches += 1;
                    copies += len as u64;
                }
                Output::PingDone { .. } => {}
            }
        }
        if branches > 0 {
            Cost { transactions: 1 + branches, bytes: len as u64 + copies }
        } else if answered > 0 {
            Cost { transactions: 1, bytes: answered }
        } else {
            Cost::default()
        }
    }
}

fn is_response(bytes: &[u8]) -> bool {
    bytes.starts_with(b"SIP/2.0 ")
}

fn is_final(bytes: &[u8]) -> bool {
    is_response(bytes) && bytes.get(8).is_some_and(|d| (b'2'..=b'6').contains(d))
}

/// The unit a budget applies to: an IPv4 address (IPv4-mapped IPv6 included), or the /64 of an
/// IPv6 address (RFC 4291 §2.5.1: one host may use a whole /64), as the flood guard counts.
fn source_net(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(a) & !((1u128 << 64) - 1)).into()),
        },
        v4 => v4,
    }
}

/// One source's charges, per time slot (slot `n` lives in `tx[n % SLOTS]`).
#[derive(Debug, Default)]
struct Entry {
    /// The newest slot written; the others hold slots `newest - SLOTS + 1 ..= newest`.
    newest: u64,
    tx: [u32; SLOTS],
    bytes: [u64; SLOTS],
}

impl Entry {
    /// Forgets the slots that are more than a horizon old at slot `now`.
    fn advance(&mut self, now: u64) {
        if now <= self.newest {
            return;
        }
        if now - self.newest >= SLOTS as u64 {
            *self = Entry { newest: now, ..Entry::default() };
            return;
        }
        for s in self.newest + 1..=now {
            let i = (s % SLOTS as u64) as usize;
            self.tx[i] = 0;
            self.bytes[i] = 0;
        }
        self.newest = now;
    }

    fn totals(&self) -> (u64, u64) {
        (self.tx.iter().map(|t| u64::from(*t)).sum(), self.bytes.iter().sum())
    }

    fn expired(&self, now: u64) -> bool {
        now.saturating_sub(self.newest) >= SLOTS as u64
    }
}

#[derive(Debug, Default)]
struct Shard {
    sources: HashMap<IpAddr, Entry>,
    /// The slot of the last sweep of expired entries.
    swept: u64,
}

/// The budgets, shared by all workers.
#[derive(Debug)]
pub(crate) struct SourceBudgets {
    max_transactions: u64,
    max_bytes: u64,
    slot: Duration,
    per_shard: usize,
    epoch: Instant,
    shards: Box<[Mutex<Shard>]>,
}

impl SourceBudgets {
    /// Budgets of `max_transactions` and `max_bytes` per source, each charge held for at least
    /// `horizon`, with at most `max_sources` sources tracked.
    pub(crate) fn new(
        max_transactions: usize,
        max_bytes: usize,
        horizon: Duration,
        max_sources: usize,
    ) -> SourceBudgets {
        let slot = (horizon / (SLOTS as u32 - 1)).max(Duration::from_millis(1));
        SourceBudgets {
            max_transactions: max_transactions as u64,
            max_bytes: max_bytes as u64,
            slot,
            per_shard: max_sources.div_ceil(SHARDS).max(1),
            epoch: Instant::now(),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }

    /// The budgets `config` sets (`[limits]`, the horizon from `[timers]`, the table bound from
    /// `[flood] max_sources`).
    pub(crate) fn for_config(config: &crate::config::Config) -> SourceBudgets {
        let t = &config.timers;
        SourceBudgets::new(
            config.limits.transactions_per_source(),
            config.limits.held_bytes_per_source(),
            horizon(Duration::from_millis(t.t1_ms), Duration::from_millis(t.t4_ms)),
            config.flood.max_sources,
        )
    }

    fn slot_of(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.epoch).as_nanos() / self.slot.as_nanos().max(1)) as u64
    }

    fn shard(&self, net: IpAddr) -> MutexGuard<'_, Shard> {
        let h = match net {
            IpAddr::V4(a) => u64::from(u32::from(a)),
            IpAddr::V6(a) => (u128::from(a) >> 64) as u64,
        };
        let i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `ip`'s source holds its whole budget of transactions or bytes now.
    pub(crate) fn over(&self, ip: IpAddr, now: Instant) -> bool {
        let net = source_net(ip);
        let slot = self.slot_of(now);
        let mut shard = self.shard(net);
        let Some(e) = shard.sources.get_mut(&net) else { return false };
        e.advance(slot);
        let (tx, bytes) = e.totals();
        tx >= self.max_transactions || bytes >= self.max_bytes
    }

    /// Charges `cost` to `ip`'s source. `false`: the source could not be tracked (table full).
    pub(crate) fn charge(&self, ip: IpAddr, cost: Cost, now: Instant) -> bool {
        if cost == Cost::default() {
            return true;
        }
        let net = source_net(ip);
        let slot = self.slot_of(now);
        let mut shard = self.shard(net);
        if !shard.sources.contains_key(&net) && shard.sources.len() >= self.per_shard {
            if shard.swept == slot {
                return false;
            }
            shard.swept = slot;
            shard.sources.retain(|_, e| !e.expired(slot));
            if shard.sources.len() >= self.per_shard {
                return false;
            }
        }
        let e = shard.sources.entry(net).or_insert_with(|| Entry { newest: slot, ..Entry::default() });
        e.advance(slot);
        let i = (slot % SLOTS as u64) as usize;
        e.tx[i] = e.tx[i].saturating_add(cost.transactions);
        e.bytes[i] = e.bytes[i].saturating_add(cost.bytes);
        true
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap().sources.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_core::{Peer, ResolveRequest};
    use std::net::SocketAddr;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn send(to: &str, text: &'static str) -> Output {
        Output::Send { to: Peer::udp(to.parse().unwrap()), bytes: Bytes::from_static(text.as_bytes()) }
    }

    #[test]
    fn a_request_costs_what_its_handling_made() {
        let from = Peer::udp("192.0.2.1:5060".parse::<SocketAddr>().unwrap());
        let fwd = "OPTIONS sip:b@198.51.100.1 SIP/2.0\r\n\r\n";
        // Forwarded (and a 100 Trying back): the request and its copy, two transactions.
        let out = [send("192.0.2.1:5060", "SIP/2.0 100 Trying\r\n\r\n"), send("198.51.100.1:5060", fwd)];
        assert_eq!(Cost::of(&out, &from, 1000, true), Cost { transactions: 2, bytes: 1000 + fwd.len() as u64 });
        // Forked to two, one after a lookup.
        let lookup = Output::Resolve {
            token: 1,
            request: ResolveRequest { host: "example.com".into(), port: None, transport: None, secure: false },
        };
        let out = [send("198.51.100.1:5060", fwd), lookup];
        assert_eq!(Cost::of(&out, &from, 1000, true), Cost { transactions: 3, bytes: 2000 + fwd.len() as u64 });
        // Answered here: the final response is kept for retransmissions.
        let ok = "SIP/2.0 200 OK\r\n\r\n";
        assert_eq!(
            Cost::of(&[send("192.0.2.1:5060", ok)], &from, 1000, true),
            Cost { transactions: 1, bytes: ok.len() as u64 }
        );
        // Forwarded without state (the ACK for a 2xx, §16.11): the copy is gone, nothing held.
        let ack = "ACK sip:b@198.51.100.1 SIP/2.0\r\n\r\n";
        assert_eq!(Cost::of(&[send("198.51.100.1:5060", ack)], &from, 1000, false), Cost::default());
        // Answered statelessly (a digest challenge before any transaction): nothing is held.
        let challenge = "SIP/2.0 401 Unauthorized\r\n\r\n";
        assert_eq!(Cost::of(&[send("192.0.2.1:5060", challenge)], &from, 1000, false), Cost::default());
        // A retransmission absorbed (nothing, or the provisional again) costs nothing.
        assert_eq!(Cost::of(&[], &from, 1000, false), Cost::default());
        assert_eq!(
            Cost::of(&[send("192.0.2.1:5060", "SIP/2.0 100 Trying\r\n\r\n")], &from, 1000, false),
            Cost::default()
        );
    }

    #[test]
    fn a_source_over_its_budget_is_refused_until_its_charges_expire() {
        let horizon = Duration::from_secs(80);
        let b = SourceBudgets::new(100, 10_000, horizon, 1000);
        let t0 = b.epoch;
        let (a, other) = (ip("192.0.2.1"), ip("192.0.2.2"));
        for i in 0..4 {
            assert!(!b.over(a, t0 + Duration::from_secs(i)));
            assert!(b.charge(a, Cost { transactions: 2, bytes: 3000 }, t0 + Duration::from_secs(i)));
        }
        assert!(b.over(a, t0 + Duration::from_secs(5)), "12,000 bytes held of 10,000");
        assert!(!b.over(other, t0 + Duration::from_secs(5)), "another source is not charged");
        assert!(b.over(a, t0 + horizon - Duration::from_secs(1)), "held for the whole horizon");
        assert!(!b.over(a, t0 + horizon + horizon / 8 + Duration::from_secs(4)), "expired");
        // The transaction budget too.
        for _ in 0..50 {
            b.charge(other, Cost { transactions: 2, bytes: 1 }, t0);
        }
        assert!(b.over(other, t0));
    }

    #[test]
    fn budgets_come_from_limits_with_defaults_of_one_64th() {
        use crate::config::Config;
        let c = Config::from_toml("", "t.toml").unwrap();
        assert_eq!((c.limits.transactions_per_source(), c.limits.held_bytes_per_source()), (7812, 16 << 20));
        let small = Config::from_toml("[limits]\nmax_held_bytes = 1048576\nmax_transactions = 10\n", "t.toml").unwrap();
        assert_eq!((small.limits.transactions_per_source(), small.limits.held_bytes_per_source()), (1, 4 * 65_535));
        let set = Config::from_toml(
            "[limits]\nmax_transactions_per_source = 5\nmax_held_bytes_per_source = 9999\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!((set.limits.transactions_per_source(), set.limits.held_bytes_per_source()), (5, 9999));
        let e = Config::from_toml("[limits]\nmax_held_bytes_per_source = 0\n", "t.toml").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "limits.max_held_bytes_per_source"), "{e}");
        assert!(e.message.contains("at least 1"), "{e}");
        // The horizon: 128*T1 + 32 s (96 s with the default timers).
        let b = SourceBudgets::for_config(&c);
        assert_eq!(b.slot * (SLOTS as u32 - 1), Duration::from_secs(96));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let b = SourceBudgets::new(10, 1 << 20, Duration::from_secs(8), 1000);
        let now = b.epoch;
        b.charge(ip("2001:db8:1:2::1"), Cost { transactions: 10, bytes: 1 }, now);
        assert!(b.over(ip("2001:db8:1:2:ffff::9"), now), "same /64");
        assert!(!b.over(ip("2001:db8:1:3::1"), now), "another /64");
        b.charge(ip("::ffff:192.0.2.9"), Cost { transactions: 10, bytes: 1 }, now);
        assert!(b.over(ip("192.0.2.9"), now));
    }

    #[test]
    fn the_table_is_bounded_and_makes_room_from_expired_sources() {
        let horizon = Duration::from_secs(8);
        let b = SourceBudgets::new(10, 1 << 20, horizon, SHARDS); // one source per shard
        let t0 = b.epoch;
        let cost = Cost { transactions: 1, bytes: 1 };
        let mut refused = 0;
        for i in 0..10_000u32 {
            if !b.charge(IpAddr::V4(i.into()), cost, t0) {
                refused += 1;
            }
        }
        assert!(b.tracked() <= SHARDS, "{} tracked", b.tracked());
        assert_eq!(refused, 10_000 - b.tracked());
        // A horizon later every entry has expired: a new source finds room.
        let later = t0 + horizon * 2;
        assert!(b.charge(ip("203.0.113.1"), cost, later));
        assert!(b.tracked() <= SHARDS);
    }
}
