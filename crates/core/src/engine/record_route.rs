//! Record-Route (RFC 3261 §16.6 step 4): whether herald stays on a dialog's path, and the
//! values it inserts, doubled when a request changes transport or address family (RFC 5658).

use super::{Engine, Listener, RecordRoute};
use crate::nat::RequestSender;
use crate::peer::Peer;
use crate::proxy::own_values::{
    plain_transport_param, record_route_line, record_route_value, record_route_value_sips, OwnTexts,
};
use herald_sip::uri::{Scheme, Uri};
use herald_sip::{HeaderName, Method};
use smallvec::{smallvec, SmallVec};
use std::borrow::Cow;

/// The Record-Route values of one branch, top first: none, one, or two (RFC 5658), each the URI
/// of one of our listeners with the flow token of the hop it faces, if any. What they are made
/// of is kept, not their texts: the usual value (no signature, no token, sip:) is the
/// listener's, which the engine's [`OwnTexts`] keeps ([`OwnRecordRoutes::texts`]).
#[derive(Debug, Default)]
pub(super) struct OwnRecordRoutes {
    faces: SmallVec<[(Listener, Option<String>); 2]>,
    /// §16.6 step 4: a SIPS URI for a TLS listener (see [`Engine::record_route_for`]).
    secure: bool,
    signature: Option<String>,
}

impl OwnRecordRoutes {
    /// The listeners the values name.
    pub(super) fn listeners(&self) -> impl Iterator<Item = Listener> + '_ {
        self.faces.iter().map(|(l, _)| *l)
    }

    /// The values as header lines, borrowed from `kept` where they are a listener's usual one.
    pub(super) fn texts<'a>(&'a self, kept: &'a OwnTexts) -> SmallVec<[Cow<'a, str>; 2]> {
        let sig = self.signature.as_deref();
        let mut texts = SmallVec::new();
        for (l, flow) in &self.faces {
            let flow = flow.as_deref();
            let sips = self.secure && l.transport.is_secure();
            texts.push(match (sips, sig, flow) {
                (false, None, None) => kept.record_route_line(l.transport, l.addr),
                (true, ..) => Cow::Owned(record_route_line(&record_route_value_sips(l.addr, sig, flow))),
                (false, ..) => Cow::Owned(record_route_line(&record_route_value(
                    plain_transport_param(l.transport),
                    l.addr,
                    sig,
                    flow,
                ))),
            });
        }
        texts
    }
}

impl Engine {
    /// §16.6 step 4, with double record-routing when the request changes transport or address
    /// family (RFC 5658 §3): the top value faces the next hop, the second the previous hop.
    /// `branch_uri`: the Request-URI this branch rewrites the request's to, if any. `from`, `to`:
    /// the previous and next hop; `over_flow`: the branch goes over a registered flow. They give
    /// the flow tokens for the value facing the next hop and the one facing the previous hop
    /// (`Engine::record_route_flows`): a value with a token faces a hop only its flow reaches,
    /// so with any token there are two values, one per side, even on one listener (a WebSocket
    /// phone calling another), and herald record-routes in `CrossTransport` mode too (RFC 5626
    /// §5.4: the edge proxy of a flow stays on the dialog's path).
    pub(super) fn record_route_for(
        &self,
        sender: &RequestSender<'_>,
        branch_uri: Option<&str>,
        inbound: Option<Listener>,
        outbound: Listener,
        (from, to, over_flow): (Peer, Peer, bool),
    ) -> OwnRecordRoutes {
        let req = sender.message();
        let creates_dialog =
            matches!(req.method(), Some(Method::Invite | Method::Subscribe | Method::Refer | Method::Notify))
                && req.to_tag().ok().flatten().is_none();
        if !creates_dialog || self.cfg.record_route == RecordRoute::Never {
            return OwnRecordRoutes::default();
        }
        let crosses = inbound.is_some_and(|i| i != outbound);
        let (out_flow, back_flow) = self.record_route_flows(sender, from, to, over_flow);
        let tokens = out_flow.is_some() || back_flow.is_some();
        let wanted = match self.cfg.record_route {
            RecordRoute::Always => true,
            RecordRoute::CrossTransport => crosses || tokens,
            RecordRoute::Never => false,
        };
        if !creates_dialog || !wanted {
            return OwnRecordRoutes::default();
        }
        // SIPS in the Request-URI (as received, or as this branch rewrites it) or in the top
        // Route left after ours asks for a SIPS Record-Route.
        let secure = req
            .checked_request_uri_scheme()
            .map_or_else(|| req.request_uri().is_ok_and(|u| u.is_sips()), |s| s == Scheme::Sips)
            || branch_uri.is_some_and(|u| {
                // Only a `sips:` URI can be one: no parse for the others.
                u.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("sips:"))
                    && Uri::parse(u.as_bytes()).is_ok_and(|u| u.is_sips())
            })
            // (A dialog's first request seldom has a Route: the header index says so without the
            // walk of every line `routes` makes, ~500 instructions per INVITE, issue 21.)
            || req.field_index(HeaderName::Route).is_some()
                && req
                    .routes()
                    .map_while(Result::ok)
                    .find(|r| !self.cfg.identity.is_this_proxy(&r.uri))
                    .is_some_and(|r| r.uri.is_sips());
        // With authentication on, herald signs its Record-Route for the dialog's Call-ID and
        // creator's tag: the dialog's later requests prove with it that they follow a route
        // herald built, which lets them leave for a foreign target without credentials
        // (crate::auth::route_sig; a Route the sender wrote proves nothing, issue 16).
        let signature = self
            .auth
            .as_ref()
            .map(|a| a.route_signer().sign(req.call_id().unwrap_or(""), req.from_tag().ok().flatten().unwrap_or("")));
        let faces = match inbound {
            Some(i) if crosses || tokens => smallvec![(outbound, out_flow), (i, back_flow)],
            None if tokens => smallvec![(outbound, out_flow), (outbound, back_flow)],
            _ => smallvec![(outbound, None)],
        };
        OwnRecordRoutes { faces, secure, signature }
    }
}
