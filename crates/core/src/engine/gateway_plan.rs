//! A call to a gateway set (issue 18): the destinations it will try, in order, as the set's
//! algorithm says (`crate::gateways`), or herald's 503 when none is up. The routing table
//! (`targets`) calls this for a rule whose action is a gateway set; the failover between the
//! attempts happens as their responses come (`failover`).

use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::Engine;
use crate::gateways::{order, CallKeys, GatewayLeg};
use herald_sip::Message;
use std::borrow::Cow;
use std::time::Instant;

impl Engine {
    /// The attempts of a call to gateway set `set` (by name): its up destinations in the order
    /// of its algorithm, at most `failover.max_attempts`, each sent to the destination's URI
    /// with `request_uri` as Request-URI (the caller's, or the routing table's rewrite of it:
    /// the destination URI's user part is not used). They are tried one at a time whatever
    /// `[proxy] forking` says.
    ///
    /// Errors: no set of that name → 500 (a configuration the loader should have refused);
    /// every destination down → 503 with Retry-After (`retry_after_s`; none when 0), nothing
    /// sent.
    pub(super) fn plan_gateway_set(
        &self,
        _now: Instant,
        set: &str,
        msg: &Message,
        request_uri: &str,
    ) -> Result<Vec<Planned>, Local> {
        let Some(set) = self.cfg.gateways.get(set) else {
            tracing::error!(set, "routing names a gateway set that does not exist");
            return Err(Local::Reject(500, "Server Internal Error (No Such Gateway Set)"));
        };
        let from = msg.from_header().ok();
        // The caller's number: a sip: URI's user, or a tel: URI's number (RFC 3966).
        let from_user = from.as_ref().and_then(|f| match f.uri.as_tel() {
            Some(tel) => Some(Cow::Borrowed(tel.number.as_bytes())),
            None => f.uri.as_sip()?.user_unescaped(),
        });
        let keys = CallKeys {
            call_id: msg.call_id().unwrap_or_default().as_bytes(),
            from_user: from_user.as_deref().unwrap_or_default(),
        };
        let mut attempts = order(set, keys);
        if attempts.is_empty() {
            const REASON: &str = "Service Unavailable (No Gateway Up)";
            return Err(match set.retry_after_s {
                0 => Local::Reject(503, REASON),
                s => Local::RejectWith(503, REASON, vec![("Retry-After", s.to_string())]),
            });
        }
        attempts.truncate(set.failover.max_attempts.max(1));
        Ok(attempts
            .into_iter()
            .map(|dest| Planned {
                request_uri: Some(request_uri.to_owned()),
                dest: PlannedDest::Uri(set.destinations[dest].uri.clone()),
                push_routes: Vec::new(),
                q: 1000,
                strict_route_tail: None,
                fallback: Vec::new(),
                lost_flow: None,
                gateway: Some(GatewayLeg { set: set.clone(), dest }),
                contact: None,
            })
            .collect())
    }
}
