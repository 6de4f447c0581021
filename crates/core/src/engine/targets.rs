//! Target determination (RFC 3261 §16.4, §16.5): where a request goes (the next Route, the
//! routing table's rule (`route_rules`), the location service's bindings for a served domain,
//! or its Request-URI), or why herald answers it itself ([`Local`]). It reads the location
//! store, the config and the users auth knows; it changes nothing.

use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::delivery::plan_bindings;
use super::hop::{hop_for, Hop};
use super::Engine;
use crate::peer::{Peer, Transport};
use crate::proxy::route::{next_hop, Preprocessed};
use crate::routing::Decision;
use herald_sip::uri::Uri;
use herald_sip::{Message, Method};
use herald_store::AorKey;
use std::borrow::Cow;
use std::time::Instant;

impl Engine {
    /// RFC 3261 §16.4 and §16.5: where the request goes, or why herald answers it itself.
    /// `from`: the flow it came on (a flow token naming that flow is the UA's own request).
    /// `authenticated`: the auth gate's verdict, for the routing table's `authenticated`
    /// matcher.
    ///
    /// The order: a flow token of ours (RFC 5626 §5.3), a remaining Route (§16.12: in-dialog
    /// and record-routed requests follow it, never the table), REGISTER for a served domain and
    /// requests for herald itself, then the routing table, and without a matching rule the
    /// default: a served domain's location service, else the Request-URI.
    ///
    /// `T` is what the caller keeps of the plan ([`PlanSet`]): every target (`Vec`, for the
    /// branches of a stateful request), or only the best one (`Option`, for
    /// `forward_stateless`, which sends one: a target planned alone then needs no `Vec`).
    #[inline]
    pub(super) fn plan_targets<T: PlanSet>(
        &self,
        now: Instant,
        msg: &Message,
        pre: Option<&Preprocessed<'_>>,
        from: Peer,
        authenticated: bool,
    ) -> Result<T, Local> {
        let pre = pre.ok_or(Local::Reject(400, "Bad Route"))?;
        // RFC 5626 §5.3: a flow token in a Route of ours names the flow the request leaves on.
        if let Some(flow) = self.flow_route(pre, from) {
            return flow.map(T::one);
        }
        // Borrowed: most requests never need it as a String of their own.
        let ruri_text: Cow<'_, str> = match &pre.request_uri {
            Some(u) => Cow::Borrowed(u),
            // The text of the parsed Request-URI is the one written (no UTF-8 check again).
            None => match pre.received_uri {
                Some(u) => Cow::Borrowed(u.as_str()),
                None => String::from_utf8_lossy(msg.request_uri_bytes().unwrap_or_default()),
            },
        };
        if let Some(route) = pre.first_remaining().and_then(|r| r.addr()) {
            // Loose routing: the next hop is the first remaining Route (§16.12).
            let (next, strict) = next_hop(Some(route), &ruri_text);
            return Ok(T::one(Planned {
                request_uri: if strict { Some(next.clone()) } else { pre.request_uri.clone() },
                dest: PlannedDest::Uri(next),
                push_routes: vec![],
                q: 1000,
                strict_route_tail: strict.then(|| format!("<{ruri_text}>")),
                fallback: Vec::new(),
                lost_flow: None,
                gateway: None,
                contact: None,
            }));
        }
        // The received Request-URI was parsed by `preprocess`; a strict-routing fix-up's is new.
        let ruri = match pre.request_uri {
            Some(_) => Uri::parse(ruri_text.as_bytes()).ok(),
            None => pre.received_uri,
        }
        .ok_or(Local::Reject(400, "Bad Request-URI"))?;
        let method = msg.method();
        match self.decision(msg, &ruri, from.addr.ip(), authenticated) {
            Decision::Registrar => return Err(Local::Register),
            Decision::Herald => {
                return Err(match method {
                    Some(Method::Options) => Local::Options,
                    _ => Local::Reject(404, "Not Found"),
                })
            }
            Decision::Rule(_, rule) => return self.plan_rule(now, msg, &ruri, rule).map(T::many),
            Decision::Location => return self.plan_location(now, &ruri).map(T::many),
            // RFC 3261 §16.3 step 2: only a rule routes a tel: URI; there is no host to send it to.
            Decision::Unsupported => return Err(Local::Reject(416, "Unsupported URI Scheme")),
            Decision::RequestUri => {}
        }
        if method == Some(Method::Options) && msg.max_forwards().ok().flatten() == Some(0) {
            return Err(Local::Options); // §16.3 step 3: answer OPTIONS as a UAS
        }
        // RFC 3263 §4 without DNS from the parse in hand: an IP host is where the branch goes
        // (the same peer `hop_for` would give when the branch starts, without a second parse).
        let dest = match hop_for(&ruri) {
            Some(Hop::Peer(p)) => PlannedDest::Peer(p),
            _ => PlannedDest::Uri(ruri_text.into_owned()),
        };
        Ok(T::one(Planned {
            request_uri: pre.request_uri.clone(),
            dest,
            push_routes: vec![],
            q: 1000,
            strict_route_tail: None,
            fallback: Vec::new(),
            lost_flow: None,
            gateway: None,
            contact: None,
        }))
    }

    /// §16.5: the location service's targets for `ruri` (a served domain's user, or the routing
    /// table's rewrite of one), or 404/480 when it has none.
    pub(super) fn plan_location(&self, now: Instant, ruri: &Uri<'_>) -> Result<Vec<Planned>, Local> {
        // §16.5: the location service decides for a domain we are responsible for.
        // The port does not split a served domain's users (Aor::of_served_user), nor the
        // domain with `[registrar] use_domain = false`.
        let use_domain = self.registrar.config().use_domain;
        // The key on the stack (no allocation for it).
        let aor =
            ruri.as_sip().map(|u| AorKey::of_served_user(u, use_domain)).ok_or(Local::Reject(404, "Not Found"))?;
        // The bindings are planned where they are stored: no copy of each.
        let nat = self.cfg.nat.detect;
        let contacts = &mut *self.contact_facts.borrow_mut();
        let planned =
            self.store.lookup_key_with(aor.as_bytes(), now, |bindings| plan_bindings(bindings, nat, contacts));
        if planned.is_empty() {
            // §16.5: an empty target set SHOULD get 480; 404 (§21.4.5) says the user does
            // not exist in the domain, which herald knows only for users it provisioned.
            let provisioned = self.auth.as_ref().zip(ruri.as_sip()).is_some_and(|(a, u)| {
                u.user_unescaped()
                    .is_some_and(|user| a.knows_user(&String::from_utf8_lossy(&user), &u.host.to_string()))
            });
            return Err(if provisioned {
                Local::Reject(480, "Temporarily Unavailable")
            } else {
                Local::Reject(404, "Not Found")
            });
        }
        if !ruri.is_sips() {
            // Every target as planned: not moved through a filter that keeps them all (each
            // move a copy of the plan, ~100 instructions per INVITE to a registered user).
            return Ok(planned);
        }
        let planned: Vec<Planned> = planned
            .into_iter()
            // RFC 5630 §3.1.3: a SIPS request reaches its target over TLS on every hop,
            // the last one included (the last-hop exception is deprecated). A phone
            // registered over UDP or TCP with a sip: contact cannot take it.
            .filter(|p| reaches_securely(&p.dest))
            .collect();
        if planned.is_empty() {
            return Err(Local::Reject(480, "No Secure Contact"));
        }
        Ok(planned)
    }
}

/// What a caller of [`Engine::plan_targets`] keeps of the targets planned.
pub(super) trait PlanSet: Sized {
    /// The plan when one target was planned alone (a Route, a flow, the Request-URI).
    fn one(target: Planned) -> Self;
    /// The plan when a list was planned (a rule, the location service), in preference order.
    fn many(targets: Vec<Planned>) -> Self;
}

/// Every target: the branches of a stateful request (§16.6).
impl PlanSet for Vec<Planned> {
    #[inline(always)]
    fn one(target: Planned) -> Self {
        vec![target]
    }
    #[inline(always)]
    fn many(targets: Vec<Planned>) -> Self {
        targets
    }
}

/// The best target alone, for a request forwarded without state (§16.11), which goes to one:
/// the first of the highest q, as the plan is in preference order (a gateway set's algorithm,
/// the most recent binding first), and `max_by_key` alone keeps the last. `None` when a list
/// was planned empty. A target planned alone is kept as it is, with no `Vec` allocated and
/// freed for it (the ACK for each 2xx, issue 21).
impl PlanSet for Option<Planned> {
    #[inline(always)]
    fn one(target: Planned) -> Self {
        Some(target)
    }
    fn many(targets: Vec<Planned>) -> Self {
        targets.into_iter().rev().max_by_key(|p| p.q)
    }
}

/// Whether a branch to `dest` travels over TLS: a connection that is one (the binding's own
/// flow), or a URI that can only be reached over one (`sips:`, `transport=tls`).
fn reaches_securely(dest: &PlannedDest) -> bool {
    match dest {
        PlannedDest::Peer(p) => p.transport.is_secure(),
        PlannedDest::Uri(u) => match Uri::parse(u.as_bytes()).ok().as_ref().and_then(hop_for) {
            Some(Hop::Peer(p)) => p.transport.is_secure(),
            Some(Hop::Resolve(r)) => r.secure || r.transport.is_some_and(Transport::is_secure),
            None => false,
        },
    }
}
