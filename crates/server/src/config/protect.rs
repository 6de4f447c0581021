//! `[flood]` and `[overload]`: protection against clients that send too much (docs/config.md).

use herald_core::auth::PeerPrefix;
use serde::Deserialize;
use std::time::Duration;

/// `[flood]`: per-source request rate limits, failed-authentication limits per (source, user),
/// per source and per account, with bans and locks that expire (docs/config.md states the
/// policy; `protect::flood` explains why).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Flood {
    /// Count requests per source address and ban the sources over the limits.
    pub enabled: bool,
    /// Length of the sliding window `max_requests` applies to, in seconds.
    pub window_s: u64,
    /// Requests one address (an IPv6 /64) may send per `window_s` (retransmissions included).
    /// Over UDP, where source addresses can be forged, the excess is dropped and the rest pass;
    /// over TCP/TLS exceeding it bans the address for `ban_s`. The default, 60 per 2 s, is
    /// several times what a small office behind one NAT address sends at its busiest (a call
    /// costs a phone about six requests with its challenge, a registration two), while a
    /// scanner (SIPVicious sends hundreds per second) loses most of its requests at once.
    /// Kamailio's pike sample allows 16 per 2 s.
    pub max_requests: u32,
    /// Length of the window the failure limits apply to, in seconds.
    pub auth_window_s: u64,
    /// Failed authentications (wrong password, unknown user, forged nonce, someone else's
    /// identity) one user name may have from one address per `auth_window_s`; beyond it that
    /// user's answers from that address are challenged unchecked for `ban_s`, while the other
    /// users behind the same address (a NAT) keep working.
    pub max_auth_failures: u32,
    /// Failed authentications one address may have per `auth_window_s`, all user names (and
    /// malformed credentials) together; beyond it the address is banned for `ban_s`: a scanner
    /// trying many user names. Several times `max_auth_failures`, at least that.
    pub max_auth_failures_per_source: u32,
    /// How long a ban (and a (address, user) lock) lasts, in seconds. A banned address's
    /// requests are dropped unanswered.
    pub ban_s: u64,
    /// Wrong answers for one user name, from any addresses, per `auth_window_s` before that
    /// account backs off: answers for it are then refused unchecked for 1 s, doubling with each
    /// further wrong answer up to `account_lock_max_s`; a login (from an address that logged in
    /// as the user within a day, which is never refused) starts the doubling again.
    pub account_failures: u32,
    /// The longest account lock, in seconds: the most an attacker can delay a user's login
    /// once they stop guessing.
    pub account_lock_max_s: u64,
    /// Addresses tracked at most per table (requests, failures, bans): memory stays bounded
    /// under a flood from many addresses. Untracked addresses are let through and counted.
    pub max_sources: usize,
    /// Address prefixes never counted or banned (`"10.0.0.0/8"`, `"2001:db8::/32"`,
    /// `"192.0.2.7"`): trunks, other proxies, load generators.
    pub trusted: Vec<String>,
}

impl Default for Flood {
    fn default() -> Self {
        Flood {
            enabled: true,
            window_s: 2,
            max_requests: 60,
            auth_window_s: 60,
            max_auth_failures: 20,
            max_auth_failures_per_source: 100,
            ban_s: 300,
            account_failures: 10,
            account_lock_max_s: 300,
            max_sources: 100_000,
            trusted: Vec::new(),
        }
    }
}

impl Flood {
    /// What is wrong with the values, as (key, message); `None` when they are usable.
    pub(crate) fn problems(&self) -> Option<(&'static str, String)> {
        let positive: [(&str, u64); 9] = [
            ("window_s", self.window_s),
            ("max_requests", self.max_requests.into()),
            ("auth_window_s", self.auth_window_s),
            ("max_auth_failures", self.max_auth_failures.into()),
            ("max_auth_failures_per_source", self.max_auth_failures_per_source.into()),
            ("ban_s", self.ban_s),
            ("account_failures", self.account_failures.into()),
            ("account_lock_max_s", self.account_lock_max_s),
            ("max_sources", self.max_sources as u64),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Some((key, "must be at least 1".into()));
            }
        }
        for (key, v) in [
            ("window_s", self.window_s),
            ("auth_window_s", self.auth_window_s),
            ("ban_s", self.ban_s),
            ("account_lock_max_s", self.account_lock_max_s),
        ] {
            if v > 86_400 {
                return Some((key, "must be at most 86400 seconds".into()));
            }
        }
        if self.max_auth_failures_per_source < self.max_auth_failures {
            return Some(("max_auth_failures_per_source", "must be at least max_auth_failures".into()));
        }
        if self.max_sources > 100_000_000 {
            return Some(("max_sources", "must be at most 100000000".into()));
        }
        self.trusted.iter().find_map(|p| PeerPrefix::parse(p).err()).map(|e| ("trusted", e))
    }

    /// The guard's settings (call after [`Flood::problems`] found none).
    pub fn settings(&self) -> FloodSettings {
        FloodSettings {
            window: Duration::from_secs(self.window_s),
            max_requests: self.max_requests,
            auth_window: Duration::from_secs(self.auth_window_s),
            max_auth_failures: self.max_auth_failures,
            max_auth_failures_per_source: self.max_auth_failures_per_source,
            ban: Duration::from_secs(self.ban_s),
            account_failures: self.account_failures,
            account_lock_max: Duration::from_secs(self.account_lock_max_s),
            max_sources: self.max_sources,
            trusted: self.trusted.iter().filter_map(|p| PeerPrefix::parse(p).ok()).collect(),
        }
    }
}

/// `[overload]`: shed new work first when a worker cannot keep up (seed 001).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Overload {
    /// Answer new requests with 503 while a worker is overloaded.
    pub enabled: bool,
    /// Smoothed time datagrams wait in a worker's socket queue (kernel receive timestamp to
    /// read) above which the worker sheds; it stops below half of it. 20 ms is 4% of T1: far
    /// above the wait of a server that keeps up (microseconds), far below the point where
    /// retransmissions (T1 = 500 ms) multiply the load.
    pub max_queue_wait_ms: u64,
    /// Seconds in the Retry-After of the 503 (RFC 3261 §21.5.4, §20.33).
    pub retry_after_s: u32,
}

impl Default for Overload {
    fn default() -> Self {
        Overload { enabled: true, max_queue_wait_ms: 20, retry_after_s: 5 }
    }
}

impl Overload {
    pub(crate) fn problems(&self) -> Option<(&'static str, String)> {
        if !(1..=60_000).contains(&self.max_queue_wait_ms) {
            return Some(("max_queue_wait_ms", "must be between 1 and 60000".into()));
        }
        if self.retry_after_s > 86_400 {
            return Some(("retry_after_s", "must be at most 86400".into()));
        }
        None
    }

    pub fn settings(&self) -> OverloadSettings {
        OverloadSettings {
            enabled: self.enabled,
            max_queue_wait: Duration::from_millis(self.max_queue_wait_ms),
            retry_after_s: self.retry_after_s,
        }
    }
}

/// The flood guard's settings (`protect::FloodGuard`), from [`Flood::settings`].
#[derive(Debug, Clone, PartialEq)]
pub struct FloodSettings {
    pub window: Duration,
    pub max_requests: u32,
    pub auth_window: Duration,
    /// Per (source, user name).
    pub max_auth_failures: u32,
    /// Per source, all user names together.
    pub max_auth_failures_per_source: u32,
    pub ban: Duration,
    /// Wrong answers per user name (any source) in `auth_window` before its back-off starts.
    pub account_failures: u32,
    /// The longest account lock.
    pub account_lock_max: Duration,
    /// Keys tracked at most, over all shards (each table); beyond it keys go untracked.
    pub max_sources: usize,
    pub trusted: Vec<PeerPrefix>,
}

/// The overload detector's settings (`protect::OverloadDetector`), from [`Overload::settings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverloadSettings {
    pub enabled: bool,
    /// The socket-queue wait that, sustained for `protect::overload::INTERVAL`, starts shedding.
    pub max_queue_wait: Duration,
    /// Seconds in the Retry-After of the 503.
    pub retry_after_s: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_keys_are_checked_and_mapped() {
        let f = Flood::default();
        assert_eq!(f.problems(), None);
        let s = f.settings();
        assert_eq!((s.max_auth_failures, s.max_auth_failures_per_source, s.account_failures), (20, 100, 10));
        assert_eq!(s.account_lock_max, Duration::from_secs(300));
        let bad = Flood { max_auth_failures_per_source: 19, ..Flood::default() };
        assert_eq!(bad.problems().map(|p| p.0), Some("max_auth_failures_per_source"));
        let bad = Flood { account_failures: 0, ..Flood::default() };
        assert_eq!(bad.problems().map(|p| p.0), Some("account_failures"));
        let bad = Flood { account_lock_max_s: 86_401, ..Flood::default() };
        assert_eq!(bad.problems().map(|p| p.0), Some("account_lock_max_s"));
    }
}
