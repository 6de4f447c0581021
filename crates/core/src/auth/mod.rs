//! Digest authentication (RFC 3261 §22, RFC 7616, RFC 8760), without I/O.
//!
//! * [`policy`]: which requests must authenticate (401 as registrar, 407 as proxy) and which
//!   identities an authenticated user may claim.
//! * [`nonce`]: stateless nonces (HMAC-SHA256 over issue time, salt and realm with a server
//!   secret); they expire after `nonce_lifetime` and answers then get `stale=true`.
//! * [`replay`]: the highest nonce-count seen per nonce, in bounded memory.
//! * [`digest`]: parsing an answer and computing the response it must carry.
//!
//! One [`Authenticator`] is shared (`Arc`) by every engine shard. Time is a parameter: the
//! caller passes `now: Instant`; wall-clock seconds (which nonces carry, so that nodes sharing a
//! secret agree) are derived from one `(Instant, Unix seconds)` pair given at construction.
//!
//! Decisions (see docs/config.md `[auth]`):
//! * Every challenge offers each configured algorithm in its own header, strongest first
//!   (RFC 8760 §2.4), all with `qop="auth"` and the same nonce.
//! * Answers without `qop` (RFC 2069 style) are refused with a fresh challenge: they carry no
//!   nonce-count, so they could be replayed for the nonce's whole lifetime.
//! * An unknown user and a wrong password give the same fresh challenge, after the same work
//!   (the response is computed against a dummy HA1), so answers do not reveal which users exist.
//! * `stale=true` only when the response was right for an expired (or used-up) nonce, as
//!   RFC 7616 §3.3 asks: the client may retry without asking its user for the password.
//! * The `uri` parameter is hashed as the client sent it and not compared with the
//!   Request-URI (proxies on the way may rewrite it); the nonce-count check already prevents
//!   reusing an answer.

pub mod digest;
pub mod nonce;
pub mod policy;
pub mod replay;
pub mod route_sig;
mod stats;
#[cfg(test)]
pub(crate) mod tests;

/// The credentials the authenticator checks answers against (`herald-credentials`): its
/// configuration names [`Algorithm`]s and it is built over a [`SharedCredentials`], so the
/// runtime that builds it can name them from here.
pub use herald_credentials::{Algorithm, Credentials, FileWatcher, Reload, SharedCredentials, UserHa1};
pub use policy::{AuthPolicy, Challenge, IdentityRule, PeerPrefix, Requirement, RouteFacts};
pub use route_sig::RouteSigner;
pub use stats::{AuthStats, AuthStatsSnapshot};

use crate::peer::Peer;
use digest::DigestAnswer;
use herald_sip::Message;
use nonce::NonceKey;
use replay::{NcCheck, NonceCounts};
use std::sync::Arc;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Nonces whose nonce-count is tracked at most (about 64 bytes each).
pub const TRACKED_NONCES: usize = 1 << 18;
/// A nonce dated this far in the future (clock steps between nodes) is still accepted.
const CLOCK_SKEW_S: u64 = 5;

/// The settings of the authenticator.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// The default realm: of challenges for requests whose domain has no realm of its own in
    /// `domain_realms`.
    pub realm: String,
    /// (domain, realm) pairs, domains lowercase: a REGISTER for a user of the domain (To host)
    /// and a request from one (From host) are challenged in that realm, and answered with that
    /// realm's users (one realm per served domain). Empty: `realm` for everything.
    pub domain_realms: Vec<(String, String)>,
    /// Offered algorithms, in challenge order (strongest first).
    pub algorithms: Vec<Algorithm>,
    /// How long a nonce may be used; older answers get `stale=true`.
    pub nonce_lifetime: Duration,
    pub policy: AuthPolicy,
}

/// The outcome of checking a request's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated as this user, who may claim the request's identity.
    Accepted(String),
    /// Send a fresh challenge (`stale` as given).
    Challenge { stale: bool },
    /// 403: the credentials are right but the identity claimed is not the user's.
    Forbidden,
    /// 400: credentials for our realm that cannot be parsed.
    BadRequest(&'static str),
}

/// Why a request failed to authenticate (for counters and per-source limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    WrongResponse,
    BadNonce,
    Replayed,
    Malformed,
    IdentityMismatch,
}

/// The runtime's brute-force guard (herald-server's flood guard), plugged in without the core
/// knowing about sockets or bans. The authenticator:
///
/// * reports every failed authentication that a client with the right password would not
///   cause: wrong response (wrong password or unknown user), a nonce that is not ours,
///   malformed credentials, another user's identity; with the user name the answer carried
///   when it could be read that far (limits count per (source, user) and per account). Not
///   reported: the first request without credentials (it simply gets a challenge) and stale or
///   replayed nonces answered with the right password (RFC 7616 §3.3: a normal client retries
///   those at once);
/// * asks, before checking an answer, whether its (source, user) pair or its account is locked
///   out: then the answer is treated as a wrong one (a fresh challenge) without being checked,
///   so a guess made during a lock is wasted, and it is not reported again;
/// * reports every success, which ends the account's back-off.
pub trait FailureSink: Send + Sync {
    fn auth_failed(&self, now: Instant, from: &Peer, user: Option<&str>, why: Failure);
    fn locked_out(&self, now: Instant, from: &Peer, user: &str) -> bool;
    fn auth_succeeded(&self, now: Instant, from: &Peer, user: &str);
}

pub struct Authenticator {
    cfg: AuthConfig,
    sink: Option<Arc<dyn FailureSink>>,
    nonces: NonceKey,
    /// Signs herald's Record-Route URIs with a key derived from the same secret.
    route_signer: RouteSigner,
    counts: NonceCounts,
    credentials: Arc<SharedCredentials>,
    /// `now` of construction and the Unix time then: the wall clock without reading one.
    epoch: (Instant, u64),
    /// Shared so that the runtime can export them ([`Authenticator::shared_stats`]).
    stats: Arc<AuthStats>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// `secret` keys the nonce MAC (nodes with the same secret and realm accept each other's
    /// nonces); `salt_seed` should be random; `now`/`unix_now` anchor the wall clock.
    pub fn new(
        cfg: AuthConfig,
        credentials: Arc<SharedCredentials>,
        secret: &[u8],
        salt_seed: u64,
        now: Instant,
        unix_now: u64,
    ) -> Authenticator {
        Authenticator {
            nonces: NonceKey::new(secret, &cfg.realm, salt_seed),
            route_signer: RouteSigner::new(secret),
            counts: NonceCounts::new(TRACKED_NONCES),
            cfg,
            sink: None,
            credentials,
            epoch: (now, unix_now),
            stats: Arc::default(),
        }
    }

    /// Reports every counted failure and success to `sink` and asks it about locks (see
    /// [`FailureSink`]).
    pub fn with_failure_sink(mut self, sink: Arc<dyn FailureSink>) -> Authenticator {
        self.sink = Some(sink);
        self
    }

    pub fn config(&self) -> &AuthConfig {
        &self.cfg
    }

    /// Whether `user` of `domain` is provisioned in the users file (in the domain's realm): a
    /// call to a user without bindings then gets 480 rather than 404 (RFC 3261 §16.5).
    pub fn knows_user(&self, user: &str, domain: &str) -> bool {
        let realm = self
            .cfg
            .domain_realms
            .iter()
            .find(|(d, _)| d.eq_ignore_ascii_case(domain.trim_end_matches('.')))
            .map_or(self.cfg.realm.as_str(), |(_, r)| r.as_str());
        self.credentials.current().get_in(realm, user).is_some()
    }

    /// The signer of herald's Record-Route URIs ([`route_sig`]).
    pub fn route_signer(&self) -> &RouteSigner {
        &self.route_signer
    }

    pub fn policy(&self) -> &AuthPolicy {
        &self.cfg.policy
    }

    pub fn stats(&self) -> AuthStatsSnapshot {
        self.stats.snapshot()
    }

    /// The live counters, for a metrics endpoint that reads them while the engines run
    /// (`herald_server::Stats::export_auth`).
    pub fn shared_stats(&self) -> Arc<AuthStats> {
        self.stats.clone()
    }

    fn unix(&self, now: Instant) -> u64 {
        self.epoch.1 + now.saturating_duration_since(self.epoch.0).as_secs()
    }

    /// The realm `msg` is challenged in: that of the domain of the identity it claims (the To
    /// URI of a REGISTER, the From URI of anything else), else the default realm. The nonce
    /// MAC does not depend on it: a nonce only proves herald issued it; the response hash
    /// binds the realm.
    pub fn realm_for(&self, msg: &Message, kind: Challenge) -> &str {
        if self.cfg.domain_realms.is_empty() {
            return &self.cfg.realm;
        }
        let claimed = match kind {
            Challenge::Registrar => msg.to_header(),
            Challenge::Proxy => msg.from_header(),
        };
        let host = claimed.ok().and_then(|a| a.uri.as_sip().map(|u| u.host.to_string()));
        host.and_then(|h| {
            let h = h.trim_end_matches('.');
            self.cfg.domain_realms.iter().find(|(d, _)| d.eq_ignore_ascii_case(h)).map(|(_, r)| r.as_str())
        })
        .unwrap_or(&self.cfg.realm)
    }

    /// The challenge headers for `msg`: one per algorithm, strongest first (RFC 8760 §2.4),
    /// one nonce, in the realm of the request's domain ([`Authenticator::realm_for`]).
    pub fn challenge(&self, now: Instant, msg: &Message, kind: Challenge, stale: bool) -> Vec<(&'static str, String)> {
        stats::bump(&self.stats.challenges);
        let realm = self.realm_for(msg, kind);
        let nonce = self.nonces.mint(self.unix(now));
        let stale = if stale { ", stale=true" } else { "" };
        self.cfg
            .algorithms
            .iter()
            .map(|a| {
                let v =
                    format!("Digest realm=\"{realm}\", nonce=\"{nonce}\", algorithm={}, qop=\"auth\"{stale}", a.name());
                (kind.challenge_header(), v)
            })
            .collect()
    }

    /// Checks the credentials `msg` carries for our realm in the header `kind` answers with.
    pub fn verify(&self, now: Instant, from: Peer, msg: &Message, kind: Challenge) -> Verdict {
        let verdict = self.verify_inner(now, from, msg, kind);
        match &verdict {
            Verdict::Accepted(user) => {
                stats::bump(&self.stats.accepted);
                if let Some(sink) = &self.sink {
                    sink.auth_succeeded(now, &from, user);
                }
            }
            Verdict::BadRequest(_) => self.record_failure(now, from, None, Failure::Malformed),
            // Reported by verify_inner, which knows the user name.
            Verdict::Forbidden | Verdict::Challenge { .. } => {}
        }
        verdict
    }

    /// Counts a failure that the right password would not have caused and tells the
    /// [`FailureSink`] (the per-source and per-account limits) with the peer, the user name the
    /// answer carried (when it could be read) and the reason.
    pub fn record_failure(&self, now: Instant, from: Peer, user: Option<&str>, why: Failure) {
        let c = match why {
            Failure::WrongResponse => &self.stats.failed,
            Failure::BadNonce => &self.stats.stale_or_invalid_nonce,
            Failure::Replayed => &self.stats.replayed,
            Failure::Malformed => &self.stats.malformed,
            Failure::IdentityMismatch => &self.stats.identity_mismatch,
        };
        stats::bump(c);
        if let Some(sink) = &self.sink {
            sink.auth_failed(now, &from, user, why);
        }
    }

    fn verify_inner(&self, now: Instant, from: Peer, msg: &Message, kind: Challenge) -> Verdict {
        // RFC 3261 §22.3: several values may be present, for several realms; ours is the one
        // with our realm. Values of other schemes or realms belong to other servers.
        let realm = self.realm_for(msg, kind);
        let mut ours = None;
        for value in msg.auth_values(kind.answer_header()) {
            let Ok(value) = value else { return Verdict::BadRequest("malformed credentials") };
            if value.is_digest() && value.param("realm").is_some_and(|r| r == realm) {
                ours = Some(value);
                break;
            }
        }
        let Some(value) = ours else { return Verdict::Challenge { stale: false } };
        let answer = match DigestAnswer::from_value(&value) {
            Ok(a) => a,
            Err(digest::Malformed(why)) => return Verdict::BadRequest(why),
        };
        // A locked (source, user) pair or account: challenged again without looking at the
        // answer, so guessing during a lock gains nothing (not even timing: no hash is computed
        // whether the user exists or not).
        if self.sink.as_ref().is_some_and(|s| s.locked_out(now, &from, &answer.username)) {
            return Verdict::Challenge { stale: false };
        }
        match self.check_answer(now, msg, realm, &answer) {
            Ok(()) => {}
            Err(Check::Fail(f)) => {
                // Wrong password, unknown user, a nonce we never issued: what guessing looks like.
                self.record_failure(now, from, Some(&answer.username), f);
                return Verdict::Challenge { stale: false };
            }
            Err(Check::Stale(f)) => {
                // The password was right: only counted, never held against the source.
                self.count(f);
                return Verdict::Challenge { stale: true };
            }
        }
        let user = answer.username.into_owned();
        if !self.cfg.policy.identity_ok(&user, msg, kind) {
            self.record_failure(now, from, Some(&user), Failure::IdentityMismatch);
            return Verdict::Forbidden;
        }
        Verdict::Accepted(user)
    }

    fn count(&self, f: Failure) {
        let c = match f {
            Failure::WrongResponse => &self.stats.failed,
            Failure::Replayed => &self.stats.replayed,
            _ => &self.stats.stale_or_invalid_nonce,
        };
        stats::bump(c);
    }

    /// RFC 7616 §3.4.1 and §3.3: algorithm, qop, nonce, response, then freshness and nc.
    fn check_answer(&self, now: Instant, msg: &Message, realm: &str, a: &DigestAnswer<'_>) -> Result<(), Check> {
        let alg = match a.algorithm.as_deref() {
            None => Algorithm::Md5,
            Some(name) => Algorithm::from_name(name).ok_or(Check::Fail(Failure::WrongResponse))?,
        };
        if !self.cfg.algorithms.contains(&alg) || a.userhash {
            return Err(Check::Fail(Failure::WrongResponse));
        }
        if !a.qop.as_deref().is_some_and(|q| q.eq_ignore_ascii_case("auth")) {
            return Err(Check::Fail(Failure::WrongResponse));
        }
        let info = self.nonces.check(&a.nonce).ok_or(Check::Fail(Failure::BadNonce))?;
        let method = msg.method().map(|m| m.as_str()).unwrap_or("");
        // The same work for an unknown user as for a known one, so neither the answer nor its
        // timing tells whether the user exists: a dummy HA1, and the user checked afterwards.
        let creds = self.credentials.current();
        let dummy = [0u8; 32];
        let ha1 = match creds.get_in(realm, &a.username) {
            Some(h) => h.get(alg),
            None => &dummy[..alg.output_len()],
        };
        let expected = a.expected(alg, ha1, method);
        let given = a.response_bytes(alg).unwrap_or_default();
        let matches: bool = given.len() == expected.len() && bool::from(expected.ct_eq(&given));
        if !matches || creds.get_in(realm, &a.username).is_none() {
            return Err(Check::Fail(Failure::WrongResponse));
        }
        let unix = self.unix(now);
        let lifetime = self.cfg.nonce_lifetime.as_secs();
        if info.issued.saturating_add(lifetime) < unix || info.issued > unix + CLOCK_SKEW_S {
            return Err(Check::Stale(Failure::BadNonce));
        }
        let nc = a.nonce_count().ok_or(Check::Fail(Failure::WrongResponse))?;
        match self.counts.check(info.id, info.issued, nc, unix.saturating_sub(lifetime)) {
            NcCheck::Fresh => Ok(()),
            NcCheck::Replay | NcCheck::Forgotten => Err(Check::Stale(Failure::Replayed)),
        }
    }
}

enum Check {
    /// Fresh challenge, stale=false.
    Fail(Failure),
    /// Fresh challenge, stale=true: the password was right.
    Stale(Failure),
}
