//! The routing table (`crate::routing`, `[[route]]`) in the engine: which rule a request
//! matches, and the targets its action names. `targets` asks it after the Route set and
//! herald's own answers (REGISTER, OPTIONS to herald) and before the default routing; the auth
//! gate asks it too (`route_facts`), so that a rule sending a request away makes that request
//! a relay, policed as any request to a foreign host.

use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::Engine;
use crate::routing::{match_user, rewrite, Action, Query, Rule};
use herald_sip::uri::{Host, Uri};
use herald_sip::Message;
use std::net::IpAddr;
use std::time::Instant;

impl Engine {
    /// The rule (index and rule) the routing table picks for `msg`, whose Request-URI (after
    /// §16.4 preprocessing) is `ruri`, from `source`. `None`: no rule matches, or the table does
    /// not apply: a request in a dialog (a To tag) goes to its remote target, the Request-URI
    /// (RFC 3261 §12.2.1.1), whatever a dial plan says about numbers.
    pub(super) fn table_rule(
        &self,
        msg: &Message,
        ruri: &Uri<'_>,
        source: IpAddr,
        authenticated: bool,
    ) -> Option<(usize, &Rule)> {
        let table = &self.cfg.routing;
        if table.is_empty() || msg.to_tag().ok().flatten().is_some() {
            return None;
        }
        let method = msg.method()?;
        let user = match_user(ruri);
        let host = ruri.as_sip().map(|u| host_text(&u.host));
        table.lookup(&Query {
            user: user.as_deref(),
            domain: host.as_deref(),
            method: method.as_str(),
            source,
            authenticated,
        })
    }

    /// The targets of `rule`'s action for a request with Request-URI `ruri`, its number
    /// handling applied to the Request-URI sent on.
    pub(super) fn plan_rule(
        &self,
        now: Instant,
        msg: &Message,
        ruri: &Uri<'_>,
        rule: &Rule,
    ) -> Result<Vec<Planned>, Local> {
        let rewritten = |tel_host: Option<&str>| rewrite(ruri, &rule.number, tel_host);
        match &rule.action {
            Action::Reject(status, reason) => Err(Local::RuleReject(*status, reason.clone())),
            Action::Location => {
                // A tel: number is looked up as a user of the first served domain.
                let domain = self.cfg.identity.domains.first().map(String::as_str);
                let text = rewritten(domain).unwrap_or_else(|| ruri.as_str().to_owned());
                let uri = Uri::parse(text.as_bytes()).map_err(|_| Local::Reject(404, "Not Found"))?;
                self.plan_location(now, &uri)
            }
            Action::NextHop(hop) => {
                let host = Uri::parse(hop.as_bytes()).ok().and_then(|u| u.as_sip().map(host_port));
                Ok(vec![send_to(PlannedDest::Uri(hop.clone()), rewritten(host.as_deref()))])
            }
            Action::RequestUri => {
                let request_uri = rewritten(None);
                let dest = request_uri.clone().unwrap_or_else(|| ruri.as_str().to_owned());
                Ok(vec![send_to(PlannedDest::Uri(dest), request_uri)])
            }
            Action::GatewaySet(set) => {
                let request_uri = rewritten(None).unwrap_or_else(|| ruri.as_str().to_owned());
                let mut attempts = self.plan_gateway_set(now, set, msg, &request_uri)?;
                if ruri.as_tel().is_some() {
                    // Each gateway gets the number as a sip: URI of its own host.
                    for a in &mut attempts {
                        let host = match &a.dest {
                            PlannedDest::Uri(u) => {
                                Uri::parse(u.as_bytes()).ok().and_then(|u| u.as_sip().map(host_port))
                            }
                            PlannedDest::Peer(p) => Some(p.addr.to_string()),
                        };
                        a.request_uri = rewritten(host.as_deref()).or(a.request_uri.take());
                    }
                }
                Ok(attempts)
            }
        }
    }
}

/// One target: `dest`, with `request_uri` as the new Request-URI (`None`: unchanged).
fn send_to(dest: PlannedDest, request_uri: Option<String>) -> Planned {
    Planned {
        request_uri,
        dest,
        push_routes: Vec::new(),
        q: 1000,
        strict_route_tail: None,
        fallback: Vec::new(),
        lost_flow: None,
        gateway: None,
    }
}

/// A host as the domain matchers compare it: lowercase (RFC 3261 §19.1.4).
fn host_text(host: &Host<'_>) -> String {
    host.to_string().to_ascii_lowercase()
}

/// `host[:port]` of a SIP URI: where a tel: URI converted for it points.
fn host_port(uri: &herald_sip::uri::SipUri<'_>) -> String {
    match uri.port {
        Some(p) => format!("{}:{p}", uri.host),
        None => uri.host.to_string(),
    }
}
