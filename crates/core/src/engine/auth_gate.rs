//! Where digest authentication (RFC 3261 §22, `crate::auth`) meets request handling: after
//! validation (§16.3) and before routing, a request the policy covers must carry valid
//! credentials for herald's realm, or it is answered here with 401/407, 403 or 400. The gate
//! runs before any server transaction exists: whatever it answers is sent statelessly, so a
//! request that did not authenticate holds no state (issue 16; Kamailio's `sl_send_reply`).

use super::decisions::Gate;
use super::Engine;
use crate::auth::{Authenticator, Requirement, RouteFacts, Verdict};
use crate::peer::Peer;
use crate::proxy::route::preprocess;
use crate::routing::Decision;
use herald_sip::headers::NameAddr;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message, Method};
use std::time::Instant;

impl Engine {
    /// Runs the gate and answers (statelessly) or drops what it stops. `Some(authenticated)`:
    /// the request goes on (see [`Gate::Pass`]); `None`: it has been dealt with.
    pub(super) fn pass_gate(
        &self,
        now: Instant,
        from: Peer,
        msg: &Message,
        out: &mut Vec<crate::io::Output>,
    ) -> Option<bool> {
        match self.auth_gate(now, from, msg) {
            Gate::Pass { authenticated } => Some(authenticated),
            Gate::Answer(status, reason, headers) => {
                self.respond_stateless_with(msg, from, (status, reason), &headers, out);
                None
            }
            Gate::Drop => None,
        }
    }

    /// Checks `msg` against the authentication policy.
    pub(super) fn auth_gate(&self, now: Instant, from: Peer, msg: &Message) -> Gate {
        let Some(auth) = &self.auth else { return Gate::Pass { authenticated: true } };
        let requirement =
            auth.policy().requirement(msg, &self.cfg.identity, from.addr.ip(), || self.route_facts(auth, msg, from));
        let kind = match requirement {
            Requirement::Nothing => return Gate::Pass { authenticated: false },
            // RFC 3261 §9.2: a CANCEL that matches no transaction gets 481.
            Requirement::Refuse if msg.method() == Some(Method::Cancel) => {
                return Gate::Answer(481, "Call/Transaction Does Not Exist", Vec::new())
            }
            Requirement::Refuse => return Gate::Drop,
            Requirement::Credentials(kind) => kind,
        };
        match auth.verify(now, from, msg, kind) {
            Verdict::Accepted(_) => Gate::Pass { authenticated: true },
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

    /// What the policy needs to know about where `msg` goes ([`RouteFacts`]): whether herald
    /// routes it through its location service, and whether it follows a Record-Route herald
    /// signed. Only then is a request from outside "to a local user" (`allow_inbound_to_local`):
    /// a Route to a third party would otherwise turn herald into an unauthenticated relay.
    /// A Route of ours with a flow token herald minted (RFC 5626 §5.2) that sends the request
    /// over another flow counts as the location service: herald handed that route out itself,
    /// to the registrar in a Path or to a dialog's parties in a Record-Route, and it reaches a
    /// registered UA, nobody else.
    ///
    /// The routing table is asked as `targets` will ask it for a caller who did not
    /// authenticate: a rule that sends the request to a gateway set, a next hop or its
    /// Request-URI makes it a relay even to a served domain (a number of a served domain routed
    /// to a PSTN gateway must not be free for anyone), unless the rule says
    /// `allow_unauthenticated` ([`RouteFacts::relay_allowed`]); a rule that keeps it here
    /// (location service, rejection) does not. A caller challenged for a relay who answers is
    /// routed by the table again, as authenticated.
    fn route_facts(&self, auth: &Authenticator, msg: &Message, from: Peer) -> RouteFacts {
        let Ok(pre) = preprocess(msg, &self.cfg.identity, &self.own_texts) else { return RouteFacts::default() };
        let to_flow = matches!(self.flow_route(&pre, from), Some(Ok(_)));
        let (stays, relay_allowed) = self.stays_here(msg, &pre, from);
        RouteFacts { to_location_service: to_flow || stays, signed_dialog: signed(auth, self, msg), relay_allowed }
    }

    /// Whether `msg` stays with herald (its location service, or herald's own answer), and
    /// whether a routing rule lets it leave without credentials.
    fn stays_here(&self, msg: &Message, pre: &crate::proxy::route::Preprocessed<'_>, from: Peer) -> (bool, bool) {
        if pre.first_remaining().is_some() {
            return (false, false);
        }
        let parsed = match &pre.request_uri {
            Some(u) => Uri::parse(u.as_bytes()).ok(),
            None => pre.received_uri,
        };
        let Some(u) = parsed else { return (false, false) };
        // A Request-URI that names herald itself (`sip:localhost`, a name of its own that is
        // not a served domain) stays here too: herald answers it (an OPTIONS keep-alive). The
        // table is asked as for a caller who did not authenticate.
        let decision = self.decision(msg, &u, from.addr.ip(), false);
        let relay_allowed = matches!(decision, Decision::Rule(_, rule) if rule.allow_unauthenticated);
        (decision.stays(), relay_allowed)
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

/// Whether `msg` follows a Record-Route herald signed for its dialog: one of the URIs that
/// designate herald in it (the top Route values of ours, or the Request-URI after a strict
/// router, RFC 3261 §16.4) carries a signature that proves its Call-ID and one of its tags
/// ([`crate::auth::route_sig`]). Anyone can write `Route: <sip:herald;lr>`; only herald can
/// sign one.
fn signed(auth: &Authenticator, engine: &Engine, msg: &Message) -> bool {
    let identity = &engine.cfg.identity;
    let (Ok(call_id), Ok(from_tag), Ok(to_tag)) = (msg.call_id(), msg.from_tag(), msg.to_tag()) else {
        return false;
    };
    let (from_tag, to_tag) = (from_tag.unwrap_or(""), to_tag.unwrap_or(""));
    let proves = |uri: &Uri| {
        identity.is_this_proxy(uri)
            && uri
                .as_sip()
                .and_then(|u| u.param(crate::proxy::own_values::SIG_PARAM))
                .flatten()
                .is_some_and(|sig| auth.route_signer().proves_dialog(sig, call_id, from_tag, to_tag))
    };
    if msg.request_uri().is_ok_and(|u| proves(&u)) {
        return true;
    }
    // Only the Route values at the top that point at herald: they are the ones §16.4 removes.
    msg.list_values(HeaderName::Route)
        .map_while(Result::ok)
        .map_while(|v| NameAddr::parse(v.bytes).ok().filter(|a| identity.is_this_proxy(&a.uri)))
        .any(|a| proves(&a.uri))
}
