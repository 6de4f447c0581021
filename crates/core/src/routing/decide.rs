//! Which road a request with no Route left takes (RFC 3261 §16.4, §16.5), before any target is
//! planned: the registrar, herald's own answer, a rule of the table, or the default routing.
//! The engine (`engine/targets.rs`, and the auth gate for what it must know about relays) and
//! `herald route check` ask the same function, so the check says what `herald serve` does.

use super::number::{match_user, rewrite};
use super::rule::{Action, Query, Rule};
use super::table::RoutingTable;
use crate::proxy::Identity;
use herald_sip::uri::Uri;
use herald_sip::Method;
use std::net::IpAddr;

/// The road a request takes.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'t> {
    /// A REGISTER for a served domain: the registrar (§10.3).
    Registrar,
    /// The Request-URI is herald itself (one of its names or addresses, or a served domain
    /// without a user): herald answers (OPTIONS 200, anything else 404).
    Herald,
    /// A rule of the table matched: its index and itself.
    Rule(usize, &'t Rule),
    /// No rule matched and the Request-URI is in a served domain: the location service.
    Location,
    /// No rule matched and the Request-URI is a tel: URI: nowhere to send it (416).
    Unsupported,
    /// No rule matched: forward by the Request-URI.
    RequestUri,
}

impl Decision<'_> {
    /// Whether the request stays with herald (its registrar, its location service, its own
    /// answer) rather than leaving for a foreign host: what the authentication policy calls a
    /// request "to the location service" (`crate::auth::RouteFacts`).
    pub fn stays(&self) -> bool {
        match self {
            Decision::Registrar | Decision::Herald | Decision::Location | Decision::Unsupported => true,
            Decision::Rule(_, rule) => !rule.action.leaves(),
            Decision::RequestUri => false,
        }
    }
}

/// The facts of a request `decide` needs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: Option<Method<'a>>,
    /// It has a To tag: in a dialog, it goes to its remote target, the Request-URI
    /// (RFC 3261 §12.2.1.1), whatever a dial plan says about numbers.
    pub in_dialog: bool,
    pub source: IpAddr,
    pub authenticated: bool,
}

/// The road of a request with Request-URI `ruri` (after §16.4 preprocessing).
pub fn decide<'t>(table: &'t RoutingTable, identity: &Identity, ruri: &Uri<'_>, req: Request<'_>) -> Decision<'t> {
    let served = identity.serves_domain(ruri);
    if req.method == Some(Method::Register) && served {
        return Decision::Registrar;
    }
    if identity.is_this_proxy(ruri) || (served && ruri.as_sip().is_some_and(|u| u.user.is_none())) {
        return Decision::Herald;
    }
    if !table.is_empty() && !req.in_dialog {
        if let Some(method) = req.method {
            let user = match_user(ruri);
            let host = ruri.as_sip().map(|u| u.host.to_string().to_ascii_lowercase());
            let query = Query {
                user: user.as_deref(),
                domain: host.as_deref(),
                method: method.as_str(),
                source: req.source,
                authenticated: req.authenticated,
            };
            if let Some((i, rule)) = table.lookup(&query) {
                return Decision::Rule(i, rule);
            }
        }
    }
    if served {
        Decision::Location
    } else if ruri.as_tel().is_some() {
        Decision::Unsupported
    } else {
        Decision::RequestUri
    }
}

/// `host[:port]` of a SIP URI's text: the host a tel: URI sent there is converted for
/// ([`super::rewrite`]); `None` when it is not a SIP URI.
pub fn host_port(uri: &str) -> Option<String> {
    let parsed = Uri::parse(uri.as_bytes()).ok()?;
    let sip = parsed.as_sip()?;
    Some(match sip.port {
        Some(p) => format!("{}:{p}", sip.host),
        None => sip.host.to_string(),
    })
}

/// The Request-URI `rule` sends a request for `ruri` on with (`None`: unchanged): its number
/// handling applied, and a `tel:` URI made a sip: URI (RFC 3261 §19.1.6) of the host the action
/// leads to: the first served domain for the location service (the number is looked up as its
/// user), the next hop's host; none for the others, a gateway set converting it for each of its
/// destinations ([`rewrite`] with that destination's [`host_port`]). The engine
/// (`engine/route_rules.rs`) and `herald route check` both ask it.
pub fn rule_request_uri(ruri: &Uri<'_>, rule: &Rule, identity: &Identity) -> Option<String> {
    let tel_host = match &rule.action {
        Action::Location => identity.domains.first().cloned(),
        Action::NextHop(hop) => host_port(hop),
        Action::Reject(..) | Action::RequestUri | Action::GatewaySet(_) => None,
    };
    rewrite(ruri, &rule.number, tel_host.as_deref())
}
