//! `[[gateway_set]]`: named sets of next hops (PSTN gateways, media servers, peer proxies) that
//! a `[[route]]` rule sends calls to, Kamailio dispatcher's equivalent in typed configuration:
//! how a destination is picked (`algorithm`), when the same transaction goes on to the next one
//! (`[gateway_set.failover]`), how herald learns that one is down or back (`[gateway_set.health]`,
//! `[gateway_set.probing]`), and what a caller hears when none is up (`retry_after_s`).
//!
//! This module is the schema and its checks; the runtime's prober and metrics are in
//! `crate::gateways`, the selection and failover in `herald_core::gateways`.

use herald_core::gateways as core;
use herald_sip::uri::{Scheme, SipUri};
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest `weight`: weights are relative, and a bound keeps the weighted schedule's
/// arithmetic far from overflow.
pub const MAX_WEIGHT: u32 = 10_000;
/// Most destinations in one set, and most sets: the configuration is the operator's, but a
/// typo in a generated file must not make herald probe a million hosts.
pub const MAX_DESTINATIONS: usize = 1024;
/// Shortest probe interval: a destination probed more often than 10 times a second gains
/// nothing and costs it load.
pub const MIN_PROBE_INTERVAL_MS: u64 = 100;

/// One `[[gateway_set]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySet {
    /// What `[[route]]` rules name it by (`action = { gateway_set = "pstn" }`), in logs, metrics
    /// (label `set`) and the admin API. Letters, digits, `-`, `_` and `.`; unique.
    pub name: String,
    /// How each new call picks its first destination among those that are up; failover then
    /// goes on in the same order (see [`Algorithm`]).
    #[serde(default)]
    pub algorithm: Algorithm,
    /// The destinations, in the order `priority` ties and `round-robin` follow.
    pub destinations: Vec<Destination>,
    /// Seconds put in the `Retry-After` of the 503 a caller gets at once when every destination
    /// of the set is down (RFC 3261 §20.33, §21.5.4); 0 leaves the header out.
    #[serde(default = "default_retry_after")]
    pub retry_after_s: u32,
    /// When a call goes on to the next destination.
    #[serde(default)]
    pub failover: Failover,
    /// When a destination is taken for down, and for up again.
    #[serde(default)]
    pub health: Health,
    /// OPTIONS keep-alives to every destination.
    #[serde(default)]
    pub probing: Probing,
}

fn default_retry_after() -> u32 {
    30
}

/// `[gateway_set] algorithm`
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Each new call starts at the next destination in turn (Kamailio dispatcher algorithm 4).
    #[default]
    #[serde(alias = "round_robin")]
    RoundRobin,
    /// Calls spread in proportion to `weight` (dispatcher algorithm 9); weight 0 is a last
    /// resort, tried only after every weighted destination.
    Weighted,
    /// A hash of the Call-ID picks the first destination: every request of one Call-ID (an
    /// INVITE retried after a 401/407 from the gateway, say) reaches the same one (algorithm 0).
    #[serde(alias = "hash_call_id")]
    HashCallId,
    /// A hash of the From URI's user picks it: one caller's calls all reach the same
    /// destination while it is up (algorithm 1, on the user only).
    #[serde(alias = "hash_from_user")]
    HashFromUser,
    /// The destination with the lowest `priority` that is up takes every call; the others are
    /// standbys (algorithm 8). Ties keep the order of `destinations`.
    Priority,
    /// The destination with the fewest active calls (algorithm 10): INVITEs sent there that have
    /// no final response yet, plus calls established through it that have not ended.
    #[serde(alias = "least_active", alias = "least-active")]
    LeastCalls,
}

impl Algorithm {
    /// The spelling in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "round-robin",
            Algorithm::Weighted => "weighted",
            Algorithm::HashCallId => "hash-call-id",
            Algorithm::HashFromUser => "hash-from-user",
            Algorithm::Priority => "priority",
            Algorithm::LeastCalls => "least-calls",
        }
    }
}

/// One `[[gateway_set.destinations]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    /// A SIP URI with no user part: `sip:HOST[:PORT][;transport=udp|tcp|tls|ws|wss]` or
    /// `sips:...`. The host may be a name (resolved by RFC 3263 as any next hop). Calls keep
    /// their Request-URI user and go to this host, port and transport.
    pub uri: String,
    /// Share of the calls under `algorithm = "weighted"` (1..=10000; relative to the others).
    #[serde(default = "one")]
    pub weight: u32,
    /// Under `algorithm = "priority"`, lower goes first. Other algorithms ignore it.
    #[serde(default)]
    pub priority: u32,
}

fn one() -> u32 {
    1
}

/// `[gateway_set.failover]`: serial forking to the next destination (RFC 3261 §16.6, §16.7).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Failover {
    /// Final responses after which the same call goes on to the next destination; any other
    /// final response goes to the caller. No response at all (Timer B or F, or
    /// `attempt_timeout_ms`) always fails over.
    pub statuses: Vec<u16>,
    /// Destinations tried for one call, the first included (1..=1024).
    pub max_attempts: u32,
    /// How long an attempt may go without any response (not even 100 Trying) before the next
    /// destination is tried, in milliseconds. Unset: only Timer B/F (32 s with T1 = 500 ms)
    /// ends an attempt that gets no answer.
    pub attempt_timeout_ms: Option<u64>,
}

impl Default for Failover {
    fn default() -> Self {
        Failover { statuses: vec![408, 503], max_attempts: 3, attempt_timeout_ms: None }
    }
}

/// `[gateway_set.health]`: the hysteresis that keeps one lost datagram from flapping a
/// destination.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    /// An up destination goes down after this many failed probes in a row.
    pub down_after_probes: u32,
    /// An up destination goes down after this many failed calls in a row (a failover status or
    /// no answer); a call it answers otherwise resets the count. 0: calls never take it down. A
    /// destination taken down by calls comes back only by probes (or the admin API).
    pub down_after_calls: u32,
    /// A down destination comes back up after this many good probes in a row.
    pub up_after_probes: u32,
}

impl Default for Health {
    fn default() -> Self {
        Health { down_after_probes: 3, down_after_calls: 5, up_after_probes: 2 }
    }
}

/// `[gateway_set.probing]`: OPTIONS keep-alives (RFC 3261 §11).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Probing {
    /// Off: no OPTIONS are sent; destinations change state only by calls (down after
    /// `down_after_calls`) and by the admin API.
    pub enabled: bool,
    /// Every destination is sent one OPTIONS per interval, in milliseconds (at least 100).
    pub interval_ms: u64,
    /// A probe with no final response after this many milliseconds has failed. At most
    /// `interval_ms`, so one destination never has two probes outstanding.
    pub timeout_ms: u64,
    /// Final responses that count as a failed probe. Any other response proves the destination
    /// alive, even 404, 405 or 483: it parsed the OPTIONS and answered (Kamailio's dispatcher
    /// does the same by default). 408 and 503 say the destination cannot take calls now.
    pub failed_statuses: Vec<u16>,
}

impl Default for Probing {
    fn default() -> Self {
        Probing { enabled: true, interval_ms: 10_000, timeout_ms: 5_000, failed_statuses: vec![408, 503] }
    }
}

impl Probing {
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Whether a probe answered with `status` found the destination alive.
    pub fn alive(&self, status: u16) -> bool {
        !self.failed_statuses.contains(&status)
    }
}

impl Algorithm {
    /// The core's algorithm of the same meaning.
    pub fn to_core(self) -> core::Algorithm {
        match self {
            Algorithm::RoundRobin => core::Algorithm::RoundRobin,
            Algorithm::Weighted => core::Algorithm::Weighted,
            Algorithm::HashCallId => core::Algorithm::HashCallId,
            Algorithm::HashFromUser => core::Algorithm::HashFromUser,
            Algorithm::Priority => core::Algorithm::Priority,
            Algorithm::LeastCalls => core::Algorithm::LeastActive,
        }
    }
}

impl GatewaySet {
    /// The set as the engine takes it: every destination with a new health, up (a reload's
    /// carry-over is [`to_core`]'s, by set name and URI).
    pub fn to_core(&self, now: Instant) -> core::GatewaySet {
        let destinations = self
            .destinations
            .iter()
            .map(|d| core::Destination {
                uri: d.uri.clone(),
                weight: d.weight,
                priority: d.priority,
                health: Arc::new(core::Health::new(now)),
            })
            .collect();
        let mut set = core::GatewaySet::new(self.name.clone(), self.algorithm.to_core(), destinations);
        set.failover = core::FailoverPolicy {
            statuses: self.failover.statuses.clone(),
            max_attempts: self.failover.max_attempts as usize,
            attempt_timeout: self.failover.attempt_timeout_ms.map(Duration::from_millis),
        };
        set.health = core::HealthRules {
            probe_failures_down: self.health.down_after_probes,
            call_failures_down: self.health.down_after_calls,
            probe_successes_up: self.health.up_after_probes,
        };
        set.retry_after_s = self.retry_after_s;
        set
    }
}

/// Every `[[gateway_set]]` for `EngineConfig::gateways`. With `previous` (the sets a reload
/// replaces), a destination whose set name and URI stay keeps its health and counters.
pub fn to_core(sets: &[GatewaySet], previous: Option<&core::Gateways>) -> core::Gateways {
    let now = Instant::now();
    core::Gateways::new(sets.iter().map(|s| s.to_core(now)).collect(), previous)
}

/// One step of the key path of a problem found by [`validate`]: `load` turns it into its own
/// path type to find the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Key(&'static str),
    Index(usize),
}

type Problem = (Vec<Step>, String);

/// A destination's identity for the duplicate check: the same host, port and transport is the
/// same gateway whatever the spelling (`sip:GW1` and `sip:gw1:5060;transport=udp`).
#[derive(Debug, PartialEq, Eq)]
struct Where {
    scheme: Scheme,
    host: String,
    port: u16,
    transport: String,
}

/// Checks every set: names, URIs, weights, thresholds. The first problem found, with its key.
pub(crate) fn validate(sets: &[GatewaySet]) -> Result<(), Problem> {
    if sets.len() > MAX_DESTINATIONS {
        return Err((vec![Step::Key("gateway_set"), Step::Index(MAX_DESTINATIONS)], "too many gateway sets".into()));
    }
    for (i, set) in sets.iter().enumerate() {
        let at = |leaf: &'static str| vec![Step::Key("gateway_set"), Step::Index(i), Step::Key(leaf)];
        if set.name.is_empty() || !set.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
            return Err((at("name"), format!("'{}' is not a set name (letters, digits, '-', '_', '.')", set.name)));
        }
        if let Some(j) = sets[..i].iter().position(|s| s.name == set.name) {
            return Err((at("name"), format!("gateway set '{}' is already defined by gateway_set[{j}]", set.name)));
        }
        validate_destinations(set, i)?;
        validate_rules(set).map_err(|(table, leaf, message)| {
            let path = vec![Step::Key("gateway_set"), Step::Index(i), Step::Key(table), Step::Key(leaf)];
            (path, message)
        })?;
        if set.retry_after_s > 86_400 {
            return Err((at("retry_after_s"), "must be at most 86400 seconds".into()));
        }
    }
    Ok(())
}

fn validate_destinations(set: &GatewaySet, i: usize) -> Result<(), Problem> {
    let list = || vec![Step::Key("gateway_set"), Step::Index(i), Step::Key("destinations")];
    if set.destinations.is_empty() {
        return Err((list(), "a gateway set needs at least one destination".into()));
    }
    if set.destinations.len() > MAX_DESTINATIONS {
        return Err((list(), format!("more than {MAX_DESTINATIONS} destinations")));
    }
    let mut seen: Vec<Where> = Vec::with_capacity(set.destinations.len());
    for (d, dest) in set.destinations.iter().enumerate() {
        let at = |leaf: &'static str| {
            let mut p = list();
            p.extend([Step::Index(d), Step::Key(leaf)]);
            p
        };
        let place = destination_where(&dest.uri).map_err(|m| (at("uri"), m))?;
        if let Some(k) = seen.iter().position(|w| *w == place) {
            return Err((at("uri"), format!("'{}' is the same destination as destinations[{k}]", dest.uri)));
        }
        seen.push(place);
        if dest.weight > MAX_WEIGHT {
            return Err((at("weight"), format!("{} is more than {MAX_WEIGHT}", dest.weight)));
        }
    }
    // Weight 0 is a last resort under "weighted"; with every weight 0 nothing is weighted.
    if set.algorithm == Algorithm::Weighted && set.destinations.iter().all(|d| d.weight == 0) {
        let mut p = list();
        p.extend([Step::Index(0), Step::Key("weight")]);
        return Err((
            p,
            "every weight is 0 under algorithm \"weighted\": give at least one destination weight 1 or more".into(),
        ));
    }
    Ok(())
}

/// Thresholds and statuses: `Err((table, key, message))`.
fn validate_rules(set: &GatewaySet) -> Result<(), (&'static str, &'static str, String)> {
    let f = &set.failover;
    for s in &f.statuses {
        // A 2xx or 6xx is the callee's answer (RFC 3261 §16.7 step 6 ends the search on
        // both), a 1xx is not final and 3xx is the caller's to follow: only 4xx and 5xx can
        // mean "this gateway cannot take it, another may".
        if !(400..=599).contains(s) {
            return Err(("failover", "statuses", format!("{s} is not a 4xx or 5xx final response")));
        }
    }
    if f.max_attempts == 0 || f.max_attempts as usize > MAX_DESTINATIONS {
        return Err(("failover", "max_attempts", format!("{} is outside 1..={MAX_DESTINATIONS}", f.max_attempts)));
    }
    if let Some(ms) = f.attempt_timeout_ms {
        if !(100..=300_000).contains(&ms) {
            return Err(("failover", "attempt_timeout_ms", format!("{ms} is outside 100..=300000")));
        }
    }
    let h = &set.health;
    for (key, n, least) in [
        ("down_after_probes", h.down_after_probes, 1),
        ("down_after_calls", h.down_after_calls, 0),
        ("up_after_probes", h.up_after_probes, 1),
    ] {
        if !(least..=1000).contains(&n) {
            return Err(("health", key, format!("{n} is outside {least}..=1000 (a count of results in a row)")));
        }
    }
    let p = &set.probing;
    if !(MIN_PROBE_INTERVAL_MS..=86_400_000).contains(&p.interval_ms) {
        return Err((
            "probing",
            "interval_ms",
            format!("{} is outside {MIN_PROBE_INTERVAL_MS}..=86400000", p.interval_ms),
        ));
    }
    if p.timeout_ms == 0 || p.timeout_ms > p.interval_ms {
        return Err((
            "probing",
            "timeout_ms",
            format!("{} must be between 1 and interval_ms ({})", p.timeout_ms, p.interval_ms),
        ));
    }
    for s in &p.failed_statuses {
        if !(200..=699).contains(s) {
            return Err(("probing", "failed_statuses", format!("{s} is not a final response (200..=699)")));
        }
    }
    Ok(())
}

/// Parses a destination URI: a sip or sips URI naming a host, no user, no headers, a transport
/// herald sends on. The transport's default is RFC 3263's for a URI with an explicit port or
/// numeric host: UDP for sip, TLS for sips.
fn destination_where(uri: &str) -> Result<Where, String> {
    let u = SipUri::parse(uri.trim().as_bytes()).map_err(|e| format!("'{uri}' is not a sip or sips URI: {e}"))?;
    if u.user.is_some() {
        return Err(format!(
            "'{uri}' has a user part: a destination is a host (calls keep their own Request-URI user)"
        ));
    }
    if !u.headers_raw().is_empty() {
        return Err(format!("'{uri}' has URI headers ('?...'): a destination is a host"));
    }
    let transport = match u.transport().map(str::to_ascii_lowercase) {
        None => if u.scheme == Scheme::Sips { "tls" } else { "udp" }.to_string(),
        Some(t) if ["udp", "tcp", "tls", "ws", "wss"].contains(&t.as_str()) => t,
        Some(t) => return Err(format!("'{uri}': transport '{t}' is not one of udp, tcp, tls, ws, wss")),
    };
    if u.scheme == Scheme::Sips && !["tls", "wss"].contains(&transport.as_str()) {
        return Err(format!("'{uri}': a sips URI is reached over TLS only (RFC 3261 §26.2.2)"));
    }
    let port = u.port.unwrap_or(if transport == "tls" || transport == "wss" { 5061 } else { 5060 });
    Ok(Where { scheme: u.scheme, host: u.host.to_string().to_ascii_lowercase(), port, transport })
}

#[cfg(test)]
#[path = "gateways_tests.rs"]
mod tests;
