//! Counters of the authentication outcomes, shared by all engines. Failures also go to the
//! per-source limit through `FailureSink` (herald-server's flood guard).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct AuthStats {
    /// Challenges sent (401/407), any reason.
    pub challenges: AtomicU64,
    /// Requests whose credentials checked out.
    pub accepted: AtomicU64,
    /// Wrong response: wrong password or unknown user (indistinguishable by design).
    pub failed: AtomicU64,
    /// Answers for a nonce that expired, was never issued, or is not ours.
    pub stale_or_invalid_nonce: AtomicU64,
    /// A nonce-count not above the last one seen for its nonce.
    pub replayed: AtomicU64,
    /// Credentials of our realm that could not be parsed (400).
    pub malformed: AtomicU64,
    /// Valid credentials used for another identity (403).
    pub identity_mismatch: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuthStatsSnapshot {
    pub challenges: u64,
    pub accepted: u64,
    pub failed: u64,
    pub stale_or_invalid_nonce: u64,
    pub replayed: u64,
    pub malformed: u64,
    pub identity_mismatch: u64,
}

impl AuthStatsSnapshot {
    /// The answers that did not authenticate, by reason, as `(reason, count)`: the `reason`
    /// label of `herald_auth_rejected_total` on the metrics endpoint. Each of these requests got
    /// a new challenge (401/407; `stale_or_invalid_nonce` and `replayed` include the right
    /// password with a used-up nonce, answered with `stale=true`), a 400 (`malformed`) or a 403
    /// (`identity_mismatch`).
    pub fn rejections(&self) -> [(&'static str, u64); 5] {
        [
            ("wrong_response", self.failed),
            ("stale_or_invalid_nonce", self.stale_or_invalid_nonce),
            ("replayed", self.replayed),
            ("malformed", self.malformed),
            ("identity_mismatch", self.identity_mismatch),
        ]
    }
}

impl AuthStats {
    pub fn snapshot(&self) -> AuthStatsSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AuthStatsSnapshot {
            challenges: l(&self.challenges),
            accepted: l(&self.accepted),
            failed: l(&self.failed),
            stale_or_invalid_nonce: l(&self.stale_or_invalid_nonce),
            replayed: l(&self.replayed),
            malformed: l(&self.malformed),
            identity_mismatch: l(&self.identity_mismatch),
        }
    }
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
