//! Where digest authentication (RFC 3261 §22, `crate::auth`) meets request handling: after
//! validation (§16.3) and before routing, a request the policy covers must carry valid
//! credentials for herald's realm, or it is answered here with 401/407, 403 or 400.

use super::Engine;
use crate::auth::Verdict;
use crate::io::Output;
use crate::peer::Peer;
use crate::proxy::route::preprocess;
use crate::transaction::TxId;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message};
use std::time::Instant;

/// What the gate decided.
pub(super) enum Gate {
    /// Go on routing the request.
    Pass,
    /// Answer with this status, reason and headers.
    Answer(u16, &'static str, Vec<(&'static str, String)>),
}

impl Engine {
    /// Checks `msg` against the authentication policy.
    pub(super) fn auth_gate(&self, now: Instant, from: Peer, msg: &Message) -> Gate {
        let Some(auth) = &self.auth else { return Gate::Pass };
        let Some(kind) = auth.policy().requirement(msg, &self.cfg.identity, || self.route_facts(msg)) else {
            return Gate::Pass;
        };
        match auth.verify(now, from, msg, kind) {
            Verdict::Accepted(_) => Gate::Pass,
            Verdict::Challenge { stale } => {
                let (status, reason) = kind.status();
                Gate::Answer(status, reason, auth.challenge(now, msg, kind, stale))
            }
            // RFC 3261 §22.1 leaves the binding of credentials to identities to policy; a valid
            // user claiming another's identity is refused, not challenged again (a new
            // password would not help).
            Verdict::Forbidden => Gate::Answer(403, "Forbidden", Vec::new()),
            Verdict::BadRequest(_) => Gate::Answer(400, "Malformed Credentials", Vec::new()),
        }
    }

    /// Runs the gate on a stateful request with server transaction `id`; `false` when it was
    /// answered.
    pub(super) fn auth_gate_stateful(
        &mut self,
        now: Instant,
        id: TxId,
        from: Peer,
        msg: &Message,
        out: &mut Vec<Output>,
    ) -> bool {
        match self.auth_gate(now, from, msg) {
            Gate::Pass => true,
            Gate::Answer(status, reason, headers) => {
                self.respond(now, id, msg, (status, reason), &headers, out);
                false
            }
        }
    }

    /// Whether herald will route `msg` through its location service: the Request-URI is in a
    /// served domain and no Route (other than herald's own) sends it elsewhere. Only then is a
    /// request from outside "to a local user" (`allow_inbound_to_local`): a Route to a third
    /// party would otherwise turn herald into an unauthenticated relay. Second: whether the
    /// request carried herald's own Route (it follows herald's Record-Route).
    fn route_facts(&self, msg: &Message) -> (bool, bool) {
        let Ok(pre) = preprocess(msg, &self.cfg.identity) else { return (false, false) };
        let routed_by_us = !pre.remove.is_empty();
        (self.to_location_service(msg, &pre), routed_by_us)
    }

    fn to_location_service(&self, msg: &Message, pre: &crate::proxy::route::Preprocessed<'_>) -> bool {
        let other_routes = msg
            .list_values(HeaderName::Route)
            .filter_map(Result::ok)
            .any(|v| !pre.remove.iter().any(|r| r.span == v.span));
        if other_routes {
            return false;
        }
        match &pre.request_uri {
            Some(u) => Uri::parse(u.as_bytes()).is_ok_and(|u| self.cfg.identity.serves_domain(&u)),
            None => msg.request_uri().is_ok_and(|u| self.cfg.identity.serves_domain(&u)),
        }
    }

    /// The Proxy-Authorization lines carrying herald's realm: consumed here, so they are not
    /// forwarded (RFC 3261 §22.3 lets each proxy find its own credentials by realm; like
    /// Kamailio's `consume_credentials`, herald does not pass them on: the next hop has no use
    /// for them and they would tell it the user's name). Lines of other realms pass untouched.
    pub(super) fn consumed_credentials(&self, msg: &Message) -> Vec<usize> {
        let Some(auth) = &self.auth else { return Vec::new() };
        let realm = auth.config().realm.as_str();
        msg.headers()
            .iter()
            .enumerate()
            .filter(|(_, h)| h.name == HeaderName::ProxyAuthorization)
            .filter(|(_, h)| {
                herald_sip::headers::AuthValue::parse(msg.value_of(h))
                    .is_ok_and(|v| v.is_digest() && v.param("realm").is_some_and(|r| r == realm))
            })
            .map(|(i, _)| i)
            .collect()
    }
}
