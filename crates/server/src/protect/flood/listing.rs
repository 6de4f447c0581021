//! What an operator sees of the guard and may undo by hand (admin API `flood.list`,
//! `flood.unban`): the bans and user locks in force, and lifting those of one source early.
//! A lift by hand is logged and counted like one by expiry, so the trace stays complete.

use super::{bump, lock, source_net, FloodGuard, Reason, Source};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// What holds a source back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldKind {
    /// Its requests are dropped (too many requests over a connection, or too many failed
    /// authentications).
    Ban,
    /// One user's answers from it are challenged unchecked (the other users are not).
    UserLock,
}

impl HoldKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldKind::Ban => "ban",
            HoldKind::UserLock => "user-lock",
        }
    }
}

/// One ban or user lock in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub kind: HoldKind,
    /// The source: an IPv4 address, or an IPv6 /64 written `PREFIX/64`.
    pub source: String,
    /// `"udp"` or `"tcp/tls"`: over what the evidence came.
    pub evidence: &'static str,
    /// `"requests"` or `"auth-failures"`.
    pub reason: &'static str,
    /// The user name of a user lock (as logged: bounded, control characters escaped).
    pub user: Option<String>,
    /// Requests or failures counted when it was imposed.
    pub count: u64,
    /// Time left.
    pub remaining: Duration,
}

impl FloodGuard {
    /// The bans and user locks in force at `now` (expired ones are lifted first), at most
    /// `max`, longest-remaining first per shard; and how many there are in all.
    pub fn holds(&self, now: Instant, max: usize) -> (Vec<Hold>, usize) {
        self.lift_all(now);
        let mut out = Vec::new();
        let mut total = 0;
        for s in self.shards.iter() {
            let shard = lock(s);
            for (src, until, ban) in shard.bans.iter_live(now) {
                total += 1;
                if out.len() < max {
                    out.push(hold(HoldKind::Ban, src, ban.reason, None, ban.count, until - now));
                }
            }
            for ((src, _), until, l) in shard.user_locks.iter_live(now) {
                total += 1;
                if out.len() < max {
                    let user = Some(l.user.to_string());
                    out.push(hold(HoldKind::UserLock, src, Reason::AuthFailures, user, l.count, until - now));
                }
            }
        }
        (out, total)
    }

    /// Lifts every ban and user lock of the source `ip` belongs to (its /64 for IPv6), on both
    /// kinds of evidence, and forgets what was counted against it. Returns how many were
    /// lifted; `who` is logged with each.
    pub fn unban(&self, ip: IpAddr, now: Instant, who: &str) -> usize {
        let net = source_net(ip);
        let mut shard = self.shard(net);
        let mut lifted = 0;
        for proven in [false, true] {
            let src = Source { net, proven };
            if let Some(ban) = shard.bans.remove(&src) {
                lifted += 1;
                bump(match ban.reason {
                    Reason::Requests => &self.counters.request_bans_lifted,
                    Reason::AuthFailures => &self.counters.auth_bans_lifted,
                });
                tracing::warn!(source = %src, evidence = src.evidence(), reason = ban.reason.as_str(), %who, "flood: ban lifted by an operator");
            }
            shard.requests.forget(&src);
            shard.auth_failures.forget(&src);
        }
        let pairs: Vec<_> = shard.user_locks.iter_live(now).map(|(k, _, _)| *k).filter(|(s, _)| s.net == net).collect();
        for pair in pairs {
            if let Some(l) = shard.user_locks.remove(&pair) {
                lifted += 1;
                bump(&self.counters.user_locks_lifted);
                shard.pair_failures.forget(&pair);
                tracing::warn!(source = %pair.0, user = %l.user, %who, "flood: user lock lifted by an operator");
            }
        }
        lifted
    }
}

fn hold(kind: HoldKind, src: &Source, reason: Reason, user: Option<String>, count: f64, left: Duration) -> Hold {
    Hold {
        kind,
        source: src.to_string(),
        evidence: src.evidence(),
        reason: reason.as_str(),
        user,
        count: count.round() as u64,
        remaining: left,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FloodSettings, FloodVerdict};
    use super::*;
    use herald_core::auth::Failure;
    use herald_core::{ConnId, Peer, Transport};
    use std::net::SocketAddr;
    use std::time::Duration;

    fn tcp(ip: &str) -> Peer {
        Peer { transport: Transport::Tcp, addr: SocketAddr::new(ip.parse().unwrap(), 40_000), conn: Some(ConnId(1)) }
    }

    fn guard(t0: Instant) -> FloodGuard {
        let settings = FloodSettings {
            max_requests: 5,
            max_auth_failures: 3,
            ..crate::config::Config::default().flood.settings()
        };
        FloodGuard::new(settings, t0)
    }

    #[test]
    fn bans_and_locks_are_listed_and_lifted_by_source() {
        let t0 = Instant::now();
        let g = guard(t0);
        for _ in 0..10 {
            g.check_request(&tcp("198.51.100.7"), t0);
        }
        for _ in 0..4 {
            g.auth_failed(t0, &tcp("198.51.100.8"), Some("bob"), Failure::WrongResponse);
        }
        let (holds, total) = g.holds(t0 + Duration::from_secs(1), 100);
        assert_eq!(total, 2, "{holds:?}");
        let ban = holds.iter().find(|h| h.kind == HoldKind::Ban).unwrap();
        assert_eq!((ban.source.as_str(), ban.evidence, ban.reason), ("198.51.100.7", "tcp/tls", "requests"));
        assert!(ban.remaining > Duration::ZERO);
        let lock = holds.iter().find(|h| h.kind == HoldKind::UserLock).unwrap();
        assert_eq!((lock.source.as_str(), lock.user.as_deref()), ("198.51.100.8", Some("bob")));
        assert_eq!(g.holds(t0, 1).0.len(), 1, "bounded by max");

        // Unknown source: nothing lifted, nothing changed.
        assert_eq!(g.unban("203.0.113.1".parse().unwrap(), t0, "test"), 0);
        assert_eq!(g.holds(t0, 100).1, 2);
        assert_eq!(g.unban("198.51.100.7".parse().unwrap(), t0, "test"), 1);
        assert_eq!(g.check_request(&tcp("198.51.100.7"), t0), FloodVerdict::Allow, "served again at once");
        assert_eq!(g.counters.request_bans_lifted.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(g.unban("198.51.100.8".parse().unwrap(), t0, "test"), 1);
        assert!(!g.locked_out(t0, &tcp("198.51.100.8"), "bob"));
        assert_eq!(g.holds(t0, 100).1, 0);
    }

    /// `[flood]` limits retuned by a reload (module `tuning`).
    #[test]
    fn a_retune_changes_limits_from_the_next_request_and_refuses_the_shape() {
        let t0 = Instant::now();
        let mut settings = crate::config::Config::default().flood.settings();
        settings.max_requests = 5;
        let g = FloodGuard::new(settings.clone(), t0);
        let drops = |ip: &str| (0..10).filter(|_| g.check_request(&tcp(ip), t0) == FloodVerdict::Drop).count();
        assert_eq!(drops("198.51.100.1"), 5, "over 5: banned");

        let mut looser = settings.clone();
        looser.max_requests = 100;
        looser.ban = Duration::from_secs(1);
        assert_eq!(g.retune(&looser), Ok(()));
        assert_eq!(drops("198.51.100.2"), 0, "the new limit");
        assert_eq!(drops("198.51.100.1"), 10, "a ban in force keeps its end");

        let mut shape = looser.clone();
        shape.window = Duration::from_secs(60);
        assert_eq!(g.retune(&shape), Err("window_s"));
        shape = looser.clone();
        shape.max_requests = 1;
        shape.trusted = vec![herald_core::auth::PeerPrefix::parse("10.0.0.0/8").unwrap()];
        assert_eq!(g.retune(&shape), Err("trusted"));
        assert_eq!(drops("198.51.100.3"), 0, "a refused retune changed nothing");
    }
}
