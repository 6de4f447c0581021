//! Forwarding without state (RFC 3261 §16.11): stateless mode, the ACK for a 2xx and a CANCEL
//! that matches no response context. The branch is derived from the request, so a
//! retransmission leaves with the same one.

use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::forward_edits::{loop_branch, strict_route_edits};
use super::hop::{hop_for, Hop};
use super::local_answers::options_headers;
use super::Engine;
use crate::io::Output;
use crate::nat::request_contact_fix;
use crate::peer::Peer;
use crate::proxy::forward::{forward, via_fixup, Forward};
use crate::proxy::respond::response_destination;
use crate::proxy::route::{preprocess, preprocess_into, Preprocessed};
use crate::proxy::validate::loop_hash;
use crate::transaction::{branch_string, stateless_branch_text};
use herald_sip::uri::Uri;
use herald_sip::{Message, Method};
use std::net::SocketAddr;
use std::time::Instant;

impl Engine {
    /// Stateless mode (§16.11): REGISTER and OPTIONS to us are still answered; everything else
    /// goes to one target without transaction state.
    pub(super) fn on_request_stateless(
        &mut self,
        now: Instant,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        out: &mut Vec<Output>,
    ) {
        if self.refused_stateless(&msg, from, out) {
            return;
        }
        let Some(authenticated) = self.pass_gate(now, from, &msg, out) else { return };
        let pre = preprocess(&msg, &self.cfg.identity, &self.own_texts);
        // Only whether herald answers it itself is read here: the best target alone is planned.
        match self.plan_targets::<Option<Planned>>(now, &msg, pre.as_ref().ok(), from, authenticated) {
            Err(Local::Register) => {
                let (response, ticket) = self.registrar.handle_register_durable(now, &msg, from, &self.store);
                self.send_when_durable(now, response_destination(&msg, from), response.freeze(), ticket, out);
            }
            Err(Local::Options) => self.respond_stateless_with(&msg, from, (200, "OK"), &options_headers(), out),
            Err(Local::Reject(status, reason)) => self.respond_stateless(&msg, from, status, reason, out),
            Err(Local::RejectWith(status, reason, headers)) => {
                self.respond_stateless_with(&msg, from, (status, reason), &headers, out)
            }
            Err(Local::RuleReject(status, reason)) => self.respond_stateless(&msg, from, status, &reason, out),
            Ok(_) => self.forward_stateless(now, from, local, &msg, authenticated, out),
        }
    }

    /// Forwards without state (§16.11): ACK for 2xx, CANCEL without context, stateless mode.
    /// The branch is derived from the request so that retransmissions get the same one. Only
    /// literal-address next hops are used: a stateless element has nowhere to park a request
    /// while a name is being resolved. `authenticated`: the auth gate's verdict.
    pub(super) fn forward_stateless(
        &mut self,
        now: Instant,
        from: Peer,
        _local: SocketAddr,
        msg: &Message,
        authenticated: bool,
        out: &mut Vec<Output>,
    ) {
        // §16.4 once, for the plan and the edits.
        // Written where it stays ([`preprocess_into`]).
        let mut pre = Preprocessed::default();
        let Ok(()) = preprocess_into(msg, &self.cfg.identity, &self.own_texts, &mut pre) else { return };
        // The best target alone (`PlanSet` for `Option`): one is sent, so none is kept in a `Vec`.
        let Ok(Some(target)) = self.plan_targets::<Option<Planned>>(now, msg, Some(&pre), from, authenticated) else {
            return;
        };
        let to = match &target.dest {
            PlannedDest::Peer(p) => *p,
            PlannedDest::Uri(u) => match Uri::parse(u.as_bytes()).ok().as_ref().and_then(hop_for) {
                Some(Hop::Peer(p)) => p,
                _ => return,
            },
        };
        let Some(listener) = self.cfg.listener_for(to.transport, to.addr) else { return };
        let Some(text) = stateless_branch_text(msg) else { return };
        // §16.6 step 8 puts the loop hash into the branch for §16.3 step 4, whose answer is a
        // 482. An ACK gets no response, so it is never checked for a loop (`on_ack`), here or
        // at the next herald. A stateful herald forwards only the ACK for a 2xx here, a new
        // transaction (§17.1.1.3): its branch is the stateless one alone (the hash and its
        // digits cost about 700 instructions per call). In stateless mode the ACK may be for a
        // non-2xx answer to an INVITE that left with base + hash: it must reach that INVITE's
        // transaction downstream with the same branch (§17.1.1.3), so it carries the hash too
        // (the same one: the hash leaves out the To tag that the ACK has and the INVITE had not).
        let stateful_2xx_ack = msg.method() == Some(Method::Ack) && !self.cfg.stateless;
        // The ACK's branch is sent from the stack (a `String` was an allocation per call).
        let with_hash;
        let branch = if stateful_2xx_ack {
            herald_sip::text::ascii(&text)
        } else {
            with_hash = loop_branch(branch_string(&text), loop_hash(msg));
            &with_hash
        };
        self.own_texts.note(listener.transport, listener.addr, &self.cfg.identity);
        let via = self.own_texts.via(listener.transport, listener.addr, branch);
        let append = strict_route_edits(&mut pre, &target);
        let consumed = self.consumed_credentials(msg);
        let contact_fix = request_contact_fix(msg, from, &self.cfg.nat);
        let bytes = forward(
            msg,
            &Forward {
                remove_fields: &consumed,
                request_uri: target.request_uri.as_deref(),
                remove_routes: &pre.remove,
                push_routes: &target.push_routes,
                append_routes: &append,
                via: Some(via),
                via_fixup: via_fixup(msg, from.addr),
                replace_field: contact_fix.as_ref().map(|(f, v)| (*f, v.as_str())),
                ..Default::default()
            },
        );
        out.push(Output::Send { to, bytes });
    }
}
