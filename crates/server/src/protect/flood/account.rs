//! Per-account back-off: failed guesses for one user name, from any address, lock that name
//! for a time that doubles with every further guess (capped). Per-source limits cannot stop a
//! guesser with many addresses (issue 16: 11 IPv4 addresses found a password at guess 200-500
//! with no ban); this can, because it counts where the secret is, not where the packets come
//! from.
//!
//! The trade-off: anyone may send wrong answers for any user name, so an attacker can delay a
//! user's login, by at most `cap` at a time once they stop. While a lock lasts, an answer for
//! the name is refused (challenged again) without checking it, so a guess made then is wasted
//! and a right password is too. An address that logged in as the user before
//! ([`KNOWN_FOR`]) is exempt: the user's registered phones keep working during an attack on
//! their account (the pair's own limit, `[flood] max_auth_failures`, still applies there).

use super::expiring::Expiring;
use crate::protect::window::{Count, SlidingCounts};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The first lock.
pub(super) const FIRST_LOCK: Duration = Duration::from_secs(1);
/// How long an (address, user) pair is exempt from its account's lock after a success: a day
/// covers every registration refresh interval in use.
pub(super) const KNOWN_FOR: Duration = Duration::from_secs(86_400);
/// A known pair's day is renewed by a login at most this often.
const REFRESH: Duration = Duration::from_secs(60);
/// How long an account's lock length is remembered after the lock ends: the next wrong answer
/// within it doubles the length again. Shorter, and a patient guesser would wait for it to be
/// forgotten to get `account_failures` fresh guesses each time (10 per 5 minutes with a
/// 5-minute memory); with a day, one guess per `account_lock_max_s` is all that is left.
pub(super) const LEVEL_KEPT: Duration = Duration::from_secs(86_400);

/// One shard of accounts (keyed by a hash of the user name: the names themselves, chosen by
/// whoever sends them, are not kept).
#[derive(Debug)]
pub(super) struct Accounts {
    failures: SlidingCounts<u64>,
    /// The current lock: (locked until, its length). Kept [`LEVEL_KEPT`] after it ended, so
    /// the doubling goes on for a guesser who waits out each lock.
    locks: Expiring<u64, (Instant, Duration)>,
    /// (address or /64, user) pairs that authenticated recently.
    known: Expiring<(IpAddr, u64), ()>,
}

/// What a failure did to its account.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Outcome {
    Counted,
    /// Locked for `length` after `failures` in the window.
    Locked {
        failures: f64,
        length: Duration,
    },
    /// The tables are full: not tracked (and not limited).
    Untracked,
}

impl Accounts {
    pub(super) fn new(window: Duration, capacity: usize, now: Instant) -> Accounts {
        Accounts {
            failures: SlidingCounts::new(window, capacity, now),
            locks: Expiring::new(capacity),
            known: Expiring::new(capacity),
        }
    }

    /// A wrong answer for `user`: locks it once `threshold` are in the window, doubling the lock
    /// (up to `cap`) for each further one.
    pub(super) fn failed(&mut self, user: u64, now: Instant, threshold: u32, cap: Duration) -> Outcome {
        let counted = self.failures.add(user, now);
        let (failures, length) = match (self.locks.get(&user, now), counted) {
            // A remembered lock doubles whether or not the counts could be kept.
            (Some(&(_, last)), c) => (estimate(c), (last * 2).min(cap)),
            (None, Count::Estimate(n)) if n >= f64::from(threshold) => (n, FIRST_LOCK.min(cap)),
            (None, Count::Estimate(_)) => return Outcome::Counted,
            (None, Count::Untracked) => return Outcome::Untracked,
        };
        let until = now + length;
        self.locks.lift_expired(now, |_, _| {});
        // Full of other accounts' locks: the oldest goes rather than this one being unlimited.
        self.locks.insert_evicting(user, until + LEVEL_KEPT, (until, length));
        Outcome::Locked { failures, length }
    }

    /// Whether answers for `user` from `net` are refused now.
    pub(super) fn locked(&self, user: u64, net: IpAddr, now: Instant) -> bool {
        self.locks.get(&user, now).is_some_and(|&(until, _)| until > now) && self.known.get(&(net, user), now).is_none()
    }

    /// A right answer for `user` from `net`: the doubling starts again from [`FIRST_LOCK`]
    /// (the failures already counted still decay on their own, so a guesser going on gets a
    /// lock again at once), and the pair is known for [`KNOWN_FOR`]. Returns whether a lock
    /// level was reset.
    pub(super) fn succeeded(&mut self, user: u64, net: IpAddr, now: Instant) -> bool {
        let reset = self.locks.remove(&user).is_some();
        // Every authenticated request lands here: refresh the pair at most once a minute rather
        // than reorder the expiry index each time.
        let fresh = self.known.expiry(&(net, user)).is_some_and(|t| t > now + KNOWN_FOR - REFRESH);
        if !fresh {
            self.known.lift_expired(now, |_, _| {});
            self.known.insert_evicting((net, user), now + KNOWN_FOR, ());
        }
        reset
    }
}

fn estimate(c: Count) -> f64 {
    match c {
        Count::Estimate(n) => n,
        Count::Untracked => f64::NAN,
    }
}
