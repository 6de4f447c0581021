//! Flood and brute-force protection, like Kamailio's pike module but with the lessons of
//! issues 15 and 16 (docs/config.md `[flood]` states the policy):
//!
//! * **Sources**: an IPv4 address, or the /64 of an IPv6 one ([`prefix::source_net`]); and the
//!   evidence against a source is kept apart by how it arrived. UDP source addresses can be
//!   forged, a TCP/TLS/WebSocket peer's address was proven by its handshake. UDP evidence never
//!   stops a connection-oriented request, so a spoofer cannot lock a peer out (issue 15: 99
//!   forged OPTIONS locked 127.0.0.2 out over UDP and TCP); connection-oriented evidence stops
//!   the source on every transport.
//! * **Requests**: over UDP, requests above `max_requests` per `window` are dropped and the
//!   rest pass (rate limiting: a forged flood costs the real owner of the address only the
//!   excess, never a long ban). Over connections, exceeding it bans the source for `ban`.
//! * **Failed authentications** count per (source, user name): a phone retrying a wrong
//!   password locks out its own user at that address after `max_auth_failures` per
//!   `auth_window`, not the other users behind the same NAT (issue 15). Answers of a locked pair
//!   are challenged again unchecked (the authenticator asks [`FloodGuard::locked_out`]). A
//!   scanner trying many names is caught by the total per source,
//!   `max_auth_failures_per_source`, which bans the source for `ban`.
//! * **Accounts** (module `account`): wrong answers for one user name from any address back off
//!   exponentially, so a guesser with many addresses gets a few guesses per minute at most
//!   (issue 16). Trusted sources count there too: a trunk relaying guesses is still guessing.
//!
//! Banned sources are dropped without an answer (an answer would feed a reflection attack and
//! tell a scanner it found a SIP server). Every ban, lock and lift is logged at `warn` and
//! counted: a shared address is never shut out without a trace. Trusted prefixes (peers, trunks,
//! load generators) are never counted per source.
//!
//! State is split into shards (by source, or by user name for accounts) so that workers rarely
//! meet on one lock, and every table is bounded: a key that cannot be tracked because its shard
//! is full is let through and counted (failing closed would let an attacker with many addresses
//! lock out real users).

mod account;
mod expiring;
pub(super) mod listing;
mod prefix;
mod tuning;

pub use crate::config::FloodSettings;

use super::window::{Count, SlidingCounts};
use account::{Accounts, Outcome};
use expiring::Expiring;
use herald_core::auth::Failure;
use herald_core::{Peer, Transport};
use prefix::source_net;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tuning::Tuned;

const SHARDS: usize = 64;
/// User names are logged at most this long (they are chosen by whoever sends them).
const LOGGED_NAME: usize = 64;

/// What the flood guard says to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodVerdict {
    Allow,
    /// Banned or over the rate: drop it without an answer.
    Drop,
}

/// Counters (cumulative).
#[derive(Debug, Default)]
pub struct FloodCounters {
    /// Bans imposed for too many requests (connection-oriented sources only).
    pub request_bans: AtomicU64,
    /// Bans imposed for too many failed authentications from one source.
    pub auth_bans: AtomicU64,
    /// Bans lifted (expired), by the reason they were imposed for.
    pub request_bans_lifted: AtomicU64,
    pub auth_bans_lifted: AtomicU64,
    /// Requests dropped because their source was banned.
    pub dropped: AtomicU64,
    /// UDP requests dropped for exceeding `max_requests` (rate limiting, no ban).
    pub rate_limited: AtomicU64,
    /// (source, user) pairs locked for too many failures, and those locks lifted.
    pub user_locks: AtomicU64,
    pub user_locks_lifted: AtomicU64,
    /// Account back-off locks imposed (each doubling counts).
    pub account_locks: AtomicU64,
    /// Answers refused unchecked because their pair or account was locked.
    pub auth_refused: AtomicU64,
    /// Events from sources that could not be tracked (tables full).
    pub untracked: AtomicU64,
    /// Failed authentications reported (trusted sources included).
    pub auth_failures: AtomicU64,
}

/// A source as counted: its address (or /64), and whether the evidence came over a connection
/// (`proven`) or over UDP. Both kinds are kept apart so that forged UDP never adds to what a
/// proven peer is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Source {
    net: IpAddr,
    proven: bool,
}

impl Source {
    fn of(from: &Peer) -> Source {
        Source { net: source_net(from.addr.ip()), proven: proven(from.transport) }
    }

    /// The other kind of evidence that also stops this one's requests: a proven ban stops UDP
    /// from the same source too (whoever sends it, the source is hostile or forged as one).
    fn proven_twin(self) -> Option<Source> {
        (!self.proven).then_some(Source { proven: true, ..self })
    }

    fn evidence(self) -> &'static str {
        if self.proven {
            "tcp/tls"
        } else {
            "udp"
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.net {
            IpAddr::V6(a) => write!(f, "{a}/64"),
            IpAddr::V4(a) => write!(f, "{a}"),
        }
    }
}

/// Whether a transport's source address was proven by a handshake (TCP, TLS, WebSocket).
fn proven(t: Transport) -> bool {
    t.is_reliable()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Requests,
    AuthFailures,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Requests => "requests",
            Reason::AuthFailures => "auth-failures",
        }
    }
}

#[derive(Debug)]
struct Ban {
    reason: Reason,
    count: f64,
}

#[derive(Debug)]
struct UserLock {
    user: Box<str>,
    count: f64,
}

type Pair = (Source, u64);

struct Shard {
    requests: SlidingCounts<Source>,
    auth_failures: SlidingCounts<Source>,
    pair_failures: SlidingCounts<Pair>,
    bans: Expiring<Source, Ban>,
    user_locks: Expiring<Pair, UserLock>,
    /// UDP sources whose rate limiting was logged lately (once per `ban` each).
    limited_logged: Expiring<Source, ()>,
}

/// The guard shared by all workers.
pub struct FloodGuard {
    /// As built: the windows, `max_sources` and `trusted` are read from here; the limits a
    /// reload may change from `tuned`.
    settings: FloodSettings,
    tuned: Tuned,
    shards: Box<[Mutex<Shard>]>,
    accounts: Box<[Mutex<Accounts>]>,
    /// Hashes user names (keyed per process, so names cannot be chosen to collide).
    names: std::collections::hash_map::RandomState,
    /// Instants are kept below as nanoseconds since this one.
    epoch: Instant,
    /// The earliest expiry of any ban or user lock (ns since `epoch`; `u64::MAX`: none or a
    /// sweep is running): every request compares it with `now`, and the first to pass it lifts
    /// what expired in every shard, so that each lift is logged when it happens even for a
    /// source that never comes back.
    next_expiry: AtomicU64,
    /// No rate-limiting line is logged before this (ns since `epoch`): at most one a second
    /// in all, however many forged sources a flood uses.
    next_limit_log: AtomicU64,
    /// The first IPv4 source found trusted, as `1 << 32 | address` (0: none yet): a load
    /// generator or trunk sends from one address, whose check against the prefixes (~36
    /// instructions a request, callgrind, issue 21) this saves. It only ever holds an address
    /// the prefixes were checked to contain, and they never change (`retune` refuses).
    trusted_memo: AtomicU64,
    pub counters: FloodCounters,
}

impl std::fmt::Debug for FloodGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FloodGuard").field("settings", &self.settings).field("counters", &self.counters).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the counts inconsistent in a way that
    // matters; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl FloodGuard {
    pub fn new(settings: FloodSettings, now: Instant) -> FloodGuard {
        let per_shard = settings.max_sources.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    requests: SlidingCounts::new(settings.window, per_shard, now),
                    auth_failures: SlidingCounts::new(settings.auth_window, per_shard, now),
                    pair_failures: SlidingCounts::new(settings.auth_window, per_shard, now),
                    bans: Expiring::new(per_shard),
                    user_locks: Expiring::new(per_shard),
                    limited_logged: Expiring::new(per_shard),
                })
            })
            .collect();
        let accounts = (0..SHARDS).map(|_| Mutex::new(Accounts::new(settings.auth_window, per_shard, now))).collect();
        FloodGuard {
            tuned: Tuned::new(&settings),
            settings,
            shards,
            accounts,
            names: Default::default(),
            epoch: now,
            next_expiry: AtomicU64::new(u64::MAX),
            next_limit_log: AtomicU64::new(0),
            trusted_memo: AtomicU64::new(0),
            counters: FloodCounters::default(),
        }
    }

    /// Takes the limits of a reloaded `[flood]` (thresholds, ban and lock durations). `Err(key)`
    /// names the first key that needs a restart (windows, `max_sources`, `trusted`); nothing
    /// changes then.
    pub fn retune(&self, new: &FloodSettings) -> Result<(), &'static str> {
        self.tuned.retune(&self.settings, new)
    }

    /// Whether `ip` is exempt (`[flood] trusted`).
    #[inline]
    pub fn trusted(&self, ip: IpAddr) -> bool {
        let key = match ip {
            IpAddr::V4(a) => 1 << 32 | u64::from(u32::from(a)),
            IpAddr::V6(_) => 0,
        };
        if key != 0 && self.trusted_memo.load(Ordering::Relaxed) == key {
            return true;
        }
        let trusted = self.settings.trusted.iter().any(|p| p.contains(ip));
        // Written once, by the first trusted IPv4 source: a memo that followed the latest one
        // would bounce its cache line between receiver threads whenever two trunks alternate.
        if trusted && key != 0 && self.trusted_memo.load(Ordering::Relaxed) == 0 {
            self.trusted_memo.store(key, Ordering::Relaxed);
        }
        trusted
    }

    fn shard(&self, net: IpAddr) -> MutexGuard<'_, Shard> {
        let h = match net {
            IpAddr::V4(a) => u32::from(a) as u64,
            IpAddr::V6(a) => {
                let b = u128::from(a);
                (b as u64) ^ ((b >> 64) as u64)
            }
        };
        lock(&self.shards[(h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS])
    }

    fn account(&self, user: u64) -> MutexGuard<'_, Accounts> {
        lock(&self.accounts[(user >> 58) as usize % SHARDS])
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos().min(u64::MAX as u128 - 1) as u64
    }

    /// Counts a request from `from` and says whether to handle it. Over UDP the excess over
    /// `max_requests` is dropped; over a connection, exceeding it bans the source.
    pub fn check_request(&self, from: &Peer, now: Instant) -> FloodVerdict {
        self.check_request_of(from, now).0
    }

    /// [`FloodGuard::check_request`], and whether `from` is trusted (exempt): admission needs
    /// both, and reads the trusted prefixes once (twice was ~57 instructions a request more,
    /// callgrind, issue 21). Inline, with the untrusted path out of line: a trusted source's
    /// request no longer pays that path's frame (~18 instructions).
    #[inline]
    pub fn check_request_of(&self, from: &Peer, now: Instant) -> (FloodVerdict, bool) {
        if self.trusted(from.addr.ip()) {
            return (FloodVerdict::Allow, true);
        }
        (self.check_untrusted(from, now), false)
    }

    #[inline(never)]
    fn check_untrusted(&self, from: &Peer, now: Instant) -> FloodVerdict {
        self.lift_due(now);
        let src = Source::of(from);
        let mut shard = self.shard(src.net);
        if shard.banned(src, now) {
            bump(&self.counters.dropped);
            return FloodVerdict::Drop;
        }
        let limit = f64::from(self.tuned.max_requests());
        if !src.proven {
            return match shard.requests.add_up_to(src, now, limit) {
                Count::Estimate(n) if n > limit => {
                    bump(&self.counters.rate_limited);
                    self.log_limited(&mut shard, src, now);
                    FloodVerdict::Drop
                }
                Count::Estimate(_) => FloodVerdict::Allow,
                Count::Untracked => {
                    bump(&self.counters.untracked);
                    FloodVerdict::Allow
                }
            };
        }
        match shard.requests.add(src, now) {
            Count::Estimate(n) if n > limit => {
                self.ban(&mut shard, src, Reason::Requests, n, now);
                bump(&self.counters.dropped);
                FloodVerdict::Drop
            }
            Count::Estimate(_) => FloodVerdict::Allow,
            Count::Untracked => {
                bump(&self.counters.untracked);
                FloodVerdict::Allow
            }
        }
    }

    /// Records a failed authentication (wrong password, unknown user, bad nonce, ...) from
    /// `from`, answered as `user` when the answer could be read that far.
    pub fn auth_failed(&self, now: Instant, from: &Peer, user: Option<&str>, why: Failure) {
        bump(&self.counters.auth_failures);
        let hashed = user.map(|u| self.names.hash_one(u));
        // Only a wrong response is a guess at the password (a forged nonce or someone else's
        // identity is not): the account back-off counts those, from any source.
        if let (Some(user), Some(h), Failure::WrongResponse) = (user, hashed, why) {
            self.account_failed(now, user, h);
        }
        if self.trusted(from.addr.ip()) {
            return;
        }
        self.lift_due(now);
        let src = Source::of(from);
        let mut shard = self.shard(src.net);
        if let (Some(user), Some(h)) = (user, hashed) {
            match shard.pair_failures.add((src, h), now) {
                Count::Estimate(n) if n > f64::from(self.tuned.max_auth_failures()) => {
                    self.lock_user(&mut shard, src, user, h, n, now);
                }
                Count::Estimate(_) => {}
                Count::Untracked => bump(&self.counters.untracked),
            }
        }
        match shard.auth_failures.add(src, now) {
            Count::Estimate(n) if n > f64::from(self.tuned.max_auth_failures_per_source()) => {
                self.ban(&mut shard, src, Reason::AuthFailures, n, now);
            }
            Count::Estimate(_) => {}
            Count::Untracked => bump(&self.counters.untracked),
        }
    }

    /// Whether an answer from `from` as `user` must be refused without being checked: its
    /// (source, user) pair is locked (a UDP-earned lock only for UDP), or its account is in
    /// back-off and `from` did not log in as `user` lately.
    pub fn locked_out(&self, now: Instant, from: &Peer, user: &str) -> bool {
        let h = self.names.hash_one(user);
        let src = Source::of(from);
        let pair_locked = !self.trusted(from.addr.ip()) && {
            let shard = self.shard(src.net);
            [Some(src), src.proven_twin()].into_iter().flatten().any(|s| shard.user_locks.get(&(s, h), now).is_some())
        };
        let locked = pair_locked || self.account(h).locked(h, src.net, now);
        if locked {
            bump(&self.counters.auth_refused);
        }
        locked
    }

    /// A request from `from` authenticated as `user`: its account's back-off starts again from
    /// the first step, and the source is exempt from the account's locks for a while.
    pub fn auth_succeeded(&self, now: Instant, from: &Peer, user: &str) {
        let h = self.names.hash_one(user);
        if self.account(h).succeeded(h, source_net(from.addr.ip()), now) {
            tracing::info!(user = %logged(user), source = %Source::of(from), "flood: account back-off reset by a login");
        }
    }

    /// Sources banned now (for metrics and the admin view); lifts what expired first.
    pub fn banned_sources(&self, now: Instant) -> usize {
        self.lift_all(now);
        self.shards.iter().map(|s| lock(s).bans.live(now)).sum()
    }

    /// (source, user) pairs locked now.
    pub fn locked_users(&self, now: Instant) -> usize {
        self.lift_all(now);
        self.shards.iter().map(|s| lock(s).user_locks.live(now)).sum()
    }

    fn account_failed(&self, now: Instant, user: &str, h: u64) {
        let outcome = self.account(h).failed(h, now, self.tuned.account_failures(), self.tuned.account_lock_max());
        match outcome {
            Outcome::Counted => {}
            Outcome::Untracked => bump(&self.counters.untracked),
            Outcome::Locked { failures, length } => {
                bump(&self.counters.account_locks);
                tracing::warn!(
                    user = %logged(user),
                    failures = failures.round() as u64,
                    lock_ms = length.as_millis() as u64,
                    "flood: account back-off: answers for this user are refused unchecked for a while"
                );
            }
        }
    }

    /// Logs that `src` is being rate-limited: once per source per `ban`, and at most one line
    /// a second in all (a shared address losing requests must leave a trace, a forged flood
    /// must not flood the log).
    fn log_limited(&self, shard: &mut Shard, src: Source, now: Instant) {
        let at = self.ns(now);
        let next = self.next_limit_log.load(Ordering::Relaxed);
        if at < next || shard.limited_logged.get(&src, now).is_some() {
            return;
        }
        if self.next_limit_log.compare_exchange(next, at + 1_000_000_000, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        shard.limited_logged.lift_expired(now, |_, _| {});
        shard.limited_logged.insert(src, now + self.tuned.ban(), ());
        tracing::warn!(
            source = %src,
            evidence = src.evidence(),
            reason = "requests",
            max_requests = self.tuned.max_requests(),
            window_s = self.settings.window.as_secs(),
            rate_limited_total = self.counters.rate_limited.load(Ordering::Relaxed),
            "flood: source over max_requests, the excess is dropped unanswered (rate limit, no ban; logged once per ban_s)"
        );
    }

    fn ban(&self, shard: &mut Shard, src: Source, reason: Reason, count: f64, now: Instant) {
        let until = now + self.tuned.ban();
        let mut inserted = shard.bans.insert(src, until, Ban { reason, count });
        if !inserted {
            // Full: expired bans may wait for the next sweep; lift them here and try again.
            self.lift(shard, now);
            inserted = shard.bans.insert(src, until, Ban { reason, count });
        }
        if !inserted {
            bump(&self.counters.untracked);
            return;
        }
        self.next_expiry.fetch_min(self.ns(until), Ordering::Relaxed);
        shard.requests.forget(&src);
        shard.auth_failures.forget(&src);
        bump(match reason {
            Reason::Requests => &self.counters.request_bans,
            Reason::AuthFailures => &self.counters.auth_bans,
        });
        tracing::warn!(
            source = %src,
            evidence = src.evidence(),
            reason = reason.as_str(),
            count = count.round() as u64,
            ban_s = self.tuned.ban().as_secs(),
            "flood: source banned, its requests are dropped unanswered"
        );
    }

    fn lock_user(&self, shard: &mut Shard, src: Source, user: &str, h: u64, count: f64, now: Instant) {
        let until = now + self.tuned.ban();
        let mut inserted = shard.user_locks.insert((src, h), until, UserLock { user: logged(user).into(), count });
        if !inserted {
            self.lift(shard, now);
            inserted = shard.user_locks.insert((src, h), until, UserLock { user: logged(user).into(), count });
        }
        if !inserted {
            bump(&self.counters.untracked);
            return;
        }
        self.next_expiry.fetch_min(self.ns(until), Ordering::Relaxed);
        shard.pair_failures.forget(&(src, h));
        bump(&self.counters.user_locks);
        tracing::warn!(
            source = %src,
            evidence = src.evidence(),
            user = %logged(user),
            reason = "auth-failures",
            count = count.round() as u64,
            lock_s = self.tuned.ban().as_secs(),
            "flood: user locked at this source, its answers are challenged unchecked (other users are not)"
        );
    }

    /// Lifts what expired, in every shard, once the earliest expiry has passed.
    fn lift_due(&self, now: Instant) {
        let due = self.next_expiry.load(Ordering::Relaxed);
        if due > self.ns(now) {
            return;
        }
        // One thread sweeps; the others see MAX meanwhile. A ban imposed during the sweep lowers
        // it again (fetch_min), and so does what the sweep found left.
        if self.next_expiry.compare_exchange(due, u64::MAX, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.lift_all(now);
        }
    }

    fn lift_all(&self, now: Instant) {
        let mut next = u64::MAX;
        for s in self.shards.iter() {
            let mut shard = lock(s);
            self.lift(&mut shard, now);
            for t in [shard.bans.next_expiry(), shard.user_locks.next_expiry()].into_iter().flatten() {
                next = next.min(self.ns(t));
            }
        }
        self.next_expiry.fetch_min(next, Ordering::Relaxed);
    }

    fn lift(&self, shard: &mut Shard, now: Instant) {
        let ban_s = self.tuned.ban().as_secs();
        shard.bans.lift_expired(now, |src, ban| {
            bump(match ban.reason {
                Reason::Requests => &self.counters.request_bans_lifted,
                Reason::AuthFailures => &self.counters.auth_bans_lifted,
            });
            tracing::warn!(
                source = %src,
                evidence = src.evidence(),
                reason = ban.reason.as_str(),
                count = ban.count.round() as u64,
                ban_s,
                "flood: ban lifted"
            );
        });
        shard.user_locks.lift_expired(now, |(src, _), lock| {
            bump(&self.counters.user_locks_lifted);
            tracing::warn!(
                source = %src,
                evidence = src.evidence(),
                user = %lock.user,
                reason = "auth-failures",
                count = lock.count.round() as u64,
                lock_s = ban_s,
                "flood: user lock lifted"
            );
        });
    }
}

/// A user name as logged: at most [`LOGGED_NAME`] characters, control characters escaped.
fn logged(user: &str) -> String {
    user.chars().take(LOGGED_NAME).flat_map(char::escape_debug).collect()
}

/// The authenticator (herald-core, sans-IO) reports here and asks here (see
/// `herald_core::auth::FailureSink`).
impl herald_core::auth::FailureSink for FloodGuard {
    fn auth_failed(&self, now: Instant, from: &Peer, user: Option<&str>, why: Failure) {
        FloodGuard::auth_failed(self, now, from, user, why);
    }

    fn locked_out(&self, now: Instant, from: &Peer, user: &str) -> bool {
        FloodGuard::locked_out(self, now, from, user)
    }

    fn auth_succeeded(&self, now: Instant, from: &Peer, user: &str) {
        FloodGuard::auth_succeeded(self, now, from, user);
    }
}

impl Shard {
    /// Whether `src` (or its proven twin) is banned now.
    fn banned(&self, src: Source, now: Instant) -> bool {
        [Some(src), src.proven_twin()].into_iter().flatten().any(|s| self.bans.get(&s, now).is_some())
    }
}

#[cfg(test)]
mod tests;
