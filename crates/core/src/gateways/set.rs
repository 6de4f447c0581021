//! A gateway set: its destinations, how it picks among them, and when a call goes on to the
//! next one (see the module docs of `gateways` for the semantics).

use super::health::{Health, HealthRules};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// How a set orders its destinations for one call (the first is tried first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Each call starts at the next up destination, in configuration order.
    RoundRobin,
    /// The first destination is drawn in proportion to its weight; the failover order is drawn
    /// the same way among the rest (weighted rendezvous over a per-set call counter: the same
    /// sequence every run, no randomness in the core).
    Weighted,
    /// Rendezvous hash of the Call-ID: one call's requests always pick the same destination
    /// while it is up, and when one goes down only its calls move.
    HashCallId,
    /// Rendezvous hash of the From URI's user (the caller's number): a caller sticks to one
    /// destination while it is up.
    HashFromUser,
    /// Lowest `priority` value first (as DNS SRV, RFC 2782), configuration order among equals:
    /// the first up destination takes every call.
    Priority,
    /// Fewest active calls first; ties go round-robin.
    LeastActive,
}

impl Algorithm {
    /// The configuration name ("round_robin", "weighted", "hash_call_id", "hash_from_user",
    /// "priority", "least_active").
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "round_robin",
            Algorithm::Weighted => "weighted",
            Algorithm::HashCallId => "hash_call_id",
            Algorithm::HashFromUser => "hash_from_user",
            Algorithm::Priority => "priority",
            Algorithm::LeastActive => "least_active",
        }
    }

    /// Parses a configuration name (see [`Algorithm::as_str`]).
    pub fn parse(s: &str) -> Option<Algorithm> {
        ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// Every algorithm, for error messages that list the choices.
pub const ALL: [Algorithm; 6] = [
    Algorithm::RoundRobin,
    Algorithm::Weighted,
    Algorithm::HashCallId,
    Algorithm::HashFromUser,
    Algorithm::Priority,
    Algorithm::LeastActive,
];

/// When a call attempt fails over to the next destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// Final statuses that send the call on to the next destination (and count as a failed
    /// call and a failed probe). Default 408 and 503; operators add e.g. 500, 502, 504.
    pub statuses: Vec<u16>,
    /// Destinations tried per call at most (at least 1). Default 3.
    pub max_attempts: usize,
    /// An attempt that heard nothing at all (not even 100 Trying) within this time is
    /// abandoned for the next destination: shorter than Timer B/F (64*T1 = 32 s), which is far
    /// too long for a caller to wait (a caller's own Timer F would end a non-INVITE request
    /// first). `None`: only Timer B/F end an attempt.
    pub attempt_timeout: Option<Duration>,
}

impl Default for FailoverPolicy {
    fn default() -> FailoverPolicy {
        FailoverPolicy { statuses: vec![408, 503], max_attempts: 3, attempt_timeout: None }
    }
}

/// One destination of a set.
#[derive(Debug, Clone)]
pub struct Destination {
    /// A sip: or sips: URI naming host, port and transport (`sip:192.0.2.10:5060;transport=udp`,
    /// `sip:gw1.example.net;transport=tcp`): where attempts and probes are sent (RFC 3263 for
    /// a name). Only its host, port and parameters are used: the Request-URI is the caller's
    /// (or the routing table's rewrite of it).
    pub uri: String,
    /// Relative share of calls under [`Algorithm::Weighted`]; 0 = only when every weighted
    /// destination failed.
    pub weight: u32,
    /// Order under [`Algorithm::Priority`]: lower first.
    pub priority: u32,
    /// Shared with every engine shard, the prober, metrics and the admin API.
    pub health: Arc<Health>,
}

/// A named set of destinations (Kamailio's dispatcher set).
#[derive(Debug)]
pub struct GatewaySet {
    pub name: String,
    pub algorithm: Algorithm,
    pub destinations: Vec<Destination>,
    pub failover: FailoverPolicy,
    pub health: HealthRules,
    /// Seconds in the Retry-After (RFC 3261 §20.33) of the 503 a caller gets when every
    /// destination is down; 0 leaves the header out. Default 30.
    pub retry_after_s: u32,
    /// Calls planned so far: the round-robin position, the weighted draw, the least-active
    /// tie-break. Shared by every shard.
    pub(super) counter: AtomicU64,
}

impl GatewaySet {
    /// A set with the default failover policy and health rules.
    pub fn new(name: impl Into<String>, algorithm: Algorithm, destinations: Vec<Destination>) -> GatewaySet {
        GatewaySet {
            name: name.into(),
            algorithm,
            destinations,
            failover: FailoverPolicy::default(),
            health: HealthRules::default(),
            retry_after_s: 30,
            counter: AtomicU64::new(0),
        }
    }

    /// Whether a final status makes the call go on to the next destination.
    pub fn fails_over(&self, status: u16) -> bool {
        self.failover.statuses.contains(&status)
    }

    /// Whether a probe answered with `status` (a final response) counts as failed: the set's
    /// failover statuses do (a 503 says the gateway takes no calls); anything else, 404 and 405
    /// included, shows a SIP stack that answers.
    pub fn probe_failed(&self, status: u16) -> bool {
        self.fails_over(status)
    }

    /// The destination whose URI is `uri` (as configured, byte for byte).
    pub fn destination(&self, uri: &str) -> Option<&Destination> {
        self.destinations.iter().find(|d| d.uri == uri)
    }
}

/// One attempt of a call at a destination: what the engine's failover needs to know about a
/// branch (carried in its `Planned`).
#[derive(Debug, Clone)]
pub struct GatewayLeg {
    pub set: Arc<GatewaySet>,
    /// Index into `set.destinations`.
    pub dest: usize,
}

impl GatewayLeg {
    pub fn destination(&self) -> &Destination {
        &self.set.destinations[self.dest]
    }
}
