//! Flood and brute-force protection per source address, like Kamailio's pike module: a source
//! that sends more than `max_requests` requests in a sliding `window`, or fails authentication
//! more than `max_auth_failures` times in `auth_window`, is banned for `ban`. Requests from a
//! banned source are dropped without an answer (an answer would feed a reflection attack and tell
//! a scanner it found a SIP server). Trusted prefixes (peers, trunks, load generators) are never
//! counted.
//!
//! State is split into shards by address so that workers rarely meet on one lock, and every table
//! is bounded: a source that cannot be tracked because its shard is full is let through and
//! counted (failing closed would let an attacker with many addresses lock out real users).

use super::window::{Count, SlidingCounts};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// Settings (the `[flood]` config section).
#[derive(Debug, Clone, PartialEq)]
pub struct FloodSettings {
    pub window: Duration,
    pub max_requests: u32,
    pub auth_window: Duration,
    pub max_auth_failures: u32,
    pub ban: Duration,
    /// Sources tracked at most, over all shards (each table); beyond it sources go untracked.
    pub max_sources: usize,
    pub trusted: Vec<Prefix>,
}

/// An address prefix such as `10.0.0.0/8` or `::1/128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Parses `ADDR` or `ADDR/LEN`.
    pub fn parse(text: &str) -> Result<Prefix, String> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| format!("'{text}' is not an IP address or prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("'{text}': prefix length must be 0 to {max}"))?,
            None => max,
        };
        Ok(Prefix { addr, len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (canonical(self.addr), ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                masked(u32::from(p) as u128, 32, self.len) == masked(u32::from(a) as u128, 32, self.len)
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                masked(u128::from(p), 128, self.len) == masked(u128::from(a), 128, self.len)
            }
            _ => false,
        }
    }
}

fn masked(bits: u128, width: u8, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        bits >> (width - len.min(width))
    }
}

/// IPv4-mapped IPv6 addresses (dual-stack sockets) count as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Banned: drop it without an answer.
    Drop,
}

/// Counters (cumulative).
#[derive(Debug, Default)]
pub struct FloodCounters {
    /// Bans imposed for too many requests.
    pub request_bans: AtomicU64,
    /// Bans imposed for too many failed authentications.
    pub auth_bans: AtomicU64,
    /// Requests dropped because their source was banned.
    pub dropped: AtomicU64,
    /// Events from sources that could not be tracked (tables full).
    pub untracked: AtomicU64,
    /// Failed authentications reported (trusted sources included).
    pub auth_failures: AtomicU64,
}

struct Shard {
    requests: SlidingCounts,
    auth_failures: SlidingCounts,
    bans: HashMap<IpAddr, Instant>,
    /// No ban expires before this: a full ban table is not scanned again until then.
    next_expiry: Option<Instant>,
}

/// The guard shared by all workers.
pub struct FloodGuard {
    settings: FloodSettings,
    per_shard: usize,
    shards: Box<[Mutex<Shard>]>,
    pub counters: FloodCounters,
}

impl std::fmt::Debug for FloodGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FloodGuard").field("settings", &self.settings).field("counters", &self.counters).finish()
    }
}

impl FloodGuard {
    pub fn new(settings: FloodSettings, now: Instant) -> FloodGuard {
        let per_shard = settings.max_sources.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    requests: SlidingCounts::new(settings.window, per_shard, now),
                    auth_failures: SlidingCounts::new(settings.auth_window, per_shard, now),
                    bans: HashMap::new(),
                    next_expiry: None,
                })
            })
            .collect();
        FloodGuard { settings, per_shard, shards, counters: FloodCounters::default() }
    }

    /// Whether `ip` is exempt (`[flood] trusted`).
    pub fn trusted(&self, ip: IpAddr) -> bool {
        self.settings.trusted.iter().any(|p| p.contains(ip))
    }

    fn shard(&self, ip: IpAddr) -> std::sync::MutexGuard<'_, Shard> {
        let h = match canonical(ip) {
            IpAddr::V4(a) => u32::from(a) as u64,
            IpAddr::V6(a) => {
                let b = u128::from(a);
                (b as u64) ^ ((b >> 64) as u64)
            }
        };
        let i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        // A panic while holding the lock cannot leave the counts inconsistent in a way that
        // matters; keep serving.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request from `ip` and says whether to handle it.
    pub fn check_request(&self, ip: IpAddr, now: Instant) -> Verdict {
        if self.trusted(ip) {
            return Verdict::Allow;
        }
        let ip = canonical(ip);
        let mut shard = self.shard(ip);
        if shard.banned(ip, now) {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return Verdict::Drop;
        }
        match shard.requests.add(ip, now) {
            Count::Estimate(n) if n > self.settings.max_requests as f64 => {
                self.ban(&mut shard, ip, now, &self.counters.request_bans);
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                Verdict::Drop
            }
            Count::Estimate(_) => Verdict::Allow,
            Count::Untracked => {
                self.counters.untracked.fetch_add(1, Ordering::Relaxed);
                Verdict::Allow
            }
        }
    }

    /// Records a failed authentication (wrong password, unknown user, bad nonce) from `ip`.
    pub fn auth_failed(&self, ip: IpAddr, now: Instant) {
        self.counters.auth_failures.fetch_add(1, Ordering::Relaxed);
        if self.trusted(ip) {
            return;
        }
        let ip = canonical(ip);
        let mut shard = self.shard(ip);
        match shard.auth_failures.add(ip, now) {
            Count::Estimate(n) if n > self.settings.max_auth_failures as f64 => {
                self.ban(&mut shard, ip, now, &self.counters.auth_bans);
            }
            Count::Estimate(_) => {}
            Count::Untracked => {
                self.counters.untracked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sources banned now (for metrics and the admin view).
    pub fn banned_sources(&self, now: Instant) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).bans.values().filter(|&&until| until > now).count())
            .sum()
    }

    fn ban(&self, shard: &mut Shard, ip: IpAddr, now: Instant, counter: &AtomicU64) {
        if shard.bans.len() >= self.per_shard {
            shard.evict_expired(now);
            if shard.bans.len() >= self.per_shard {
                self.counters.untracked.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let until = now + self.settings.ban;
        shard.bans.insert(ip, until);
        shard.next_expiry = Some(shard.next_expiry.map_or(until, |t| t.min(until)));
        shard.requests.forget(&ip);
        shard.auth_failures.forget(&ip);
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The authenticator (herald-core, sans-IO) reports failures here with the peer they came from.
impl herald_core::auth::FailureSink for FloodGuard {
    fn auth_failed(&self, now: Instant, from: &herald_core::Peer, _why: herald_core::auth::Failure) {
        FloodGuard::auth_failed(self, from.addr.ip(), now);
    }
}

impl Shard {
    fn banned(&mut self, ip: IpAddr, now: Instant) -> bool {
        match self.bans.get(&ip) {
            Some(&until) if until > now => true,
            Some(_) => {
                self.bans.remove(&ip);
                false
            }
            None => false,
        }
    }

    /// Removes expired bans, scanning only when one can have expired.
    fn evict_expired(&mut self, now: Instant) {
        if self.next_expiry.is_some_and(|t| t > now) {
            return;
        }
        self.bans.retain(|_, until| *until > now);
        self.next_expiry = self.bans.values().min().copied();
    }
}

#[cfg(test)]
mod tests;
