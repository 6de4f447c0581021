//! The routing table (`crate::routing`, `[[route]]`) in the engine: the road a request takes
//! ([`crate::routing::decide`]: registrar, herald itself, a rule, the default routing), and the
//! targets a rule's action names. `targets` asks it once the Route set and flow tokens are dealt
//! with; the auth gate asks it too (`route_facts`), so that a rule sending a request away makes
//! that request a relay, policed as any request to a foreign host.

use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::Engine;
use crate::routing::{decide, host_port, rewrite, rule_request_uri, Action, Decision, Request, Rule};
use herald_sip::uri::Uri;
use herald_sip::Message;
use std::net::IpAddr;
use std::time::Instant;

impl Engine {
    /// The road the routing table and the default routing give `msg`, whose Request-URI
    /// (after §16.4 preprocessing) is `ruri`, from `source` ([`crate::routing::decide`]).
    pub(super) fn decision(&self, msg: &Message, ruri: &Uri<'_>, source: IpAddr, authenticated: bool) -> Decision<'_> {
        let req =
            Request { method: msg.method(), in_dialog: msg.to_tag().ok().flatten().is_some(), source, authenticated };
        decide(&self.cfg.routing, &self.cfg.identity, ruri, req)
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
        // The Request-URI sent on (a rejection sends nothing on).
        let sent_on = || rule_request_uri(ruri, rule, &self.cfg.identity);
        match &rule.action {
            Action::Reject(status, reason) => Err(Local::RuleReject(*status, reason.clone())),
            Action::Location => {
                // A tel: number is looked up as a user of the first served domain.
                let text = sent_on().unwrap_or_else(|| ruri.as_str().to_owned());
                let uri = Uri::parse(text.as_bytes()).map_err(|_| Local::Reject(404, "Not Found"))?;
                self.plan_location(now, &uri)
            }
            Action::NextHop(hop) => Ok(vec![send_to(PlannedDest::Uri(hop.clone()), sent_on())]),
            Action::RequestUri => {
                let request_uri = sent_on();
                let dest = request_uri.clone().unwrap_or_else(|| ruri.as_str().to_owned());
                Ok(vec![send_to(PlannedDest::Uri(dest), request_uri)])
            }
            Action::GatewaySet(set) => {
                let request_uri = sent_on().unwrap_or_else(|| ruri.as_str().to_owned());
                let mut attempts = self.plan_gateway_set(now, set, msg, &request_uri)?;
                if ruri.as_tel().is_some() {
                    // Each gateway gets the number as a sip: URI of its own host.
                    for a in &mut attempts {
                        let host = match &a.dest {
                            PlannedDest::Uri(u) => host_port(u),
                            PlannedDest::Peer(p) => Some(p.addr.to_string()),
                        };
                        a.request_uri = rewrite(ruri, &rule.number, host.as_deref()).or(a.request_uri.take());
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
        contact: None,
    }
}
