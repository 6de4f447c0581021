//! Where a request enters the engine: retransmissions and ACKs go to their transaction, CANCEL
//! and stateless mode take their own roads, and a new request is validated, gated and given a
//! server transaction before it is answered locally or forked.
//!
//! The steps live beside this file, one concern each: `validate` (§16.3), `auth_gate` (§22),
//! `targets` (§16.4-§16.5), `local_answers` (OPTIONS, REGISTER, refusals), `fork` (§16.6-§16.7),
//! `cancel` (§16.10) and `stateless` (§16.11).

use super::context::Planned;
use super::decisions::Gate;
use super::decisions::Local;
use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::proxy::respond::response_destination;
use crate::proxy::route::{preprocess_into, Preprocessed, RouteRemovals};
use crate::proxy::validate::loop_hash;
use crate::transaction::{Actions, TxId};
use herald_sip::{Message, Method};
use std::net::SocketAddr;
use std::time::Instant;

impl Engine {
    pub(super) fn on_request(
        &mut self,
        now: Instant,
        from: Peer,
        local: SocketAddr,
        mut msg: Message,
        out: &mut Vec<Output>,
    ) {
        if !self.well_formed(&mut msg, from, out) {
            return;
        }
        let method = msg.method();
        // A BYE ends an established gateway call (`failover`).
        self.gateway_call_request(&msg);
        // The ACK for a non-2xx final goes to its server transaction; any other ACK starts
        // none, so its key is not built for the lookup (`find_server_unkeyed`).
        if method == Some(Method::Ack) {
            match self.txs.find_server_unkeyed(&msg) {
                Some(id) => self.pass_to_server_transaction(now, id, msg, out),
                None => self.on_ack(now, from, local, &msg, out),
            }
            return;
        }
        // Built once: used for the lookup here and for the new transaction below.
        let key = self.txs.server_key(&msg);
        // Retransmissions go to their server transaction.
        if let Some(id) = key.as_ref().and_then(|k| self.txs.find_server_with(k, &msg)) {
            return self.pass_to_server_transaction(now, id, msg, out);
        }
        if self.cfg.stateless {
            self.on_request_stateless(now, from, local, msg, out);
            return;
        }
        if method == Some(Method::Cancel) {
            self.on_cancel(now, from, local, msg, out);
            return;
        }
        // No usable transaction key: nothing sane to answer to.
        let Some(key) = key else { return };
        // Validation (§16.3) and the auth gate run before any state is created: a request that
        // is refused or challenged is answered statelessly and holds nothing (issue 16: a
        // spoofed flood of unauthenticated REGISTERs held a transaction each for 32 s and
        // filled max_transactions). Its retransmission is simply answered again.
        let hash = loop_hash(&msg);
        if self.refused(&msg, from, hash, out) {
            return;
        }
        let Some(authenticated) = self.pass_gate(now, from, &msg, out) else { return };
        // §16.4 once: the plan reads it, and the branches remove the same Route values.
        // Written where it stays ([`preprocess_into`]), and dropped with the block (it borrows
        // the request).
        let (plan, removals) = {
            let mut pre = Preprocessed::default();
            let pre = preprocess_into(&msg, &self.cfg.identity, &self.own_texts, &mut pre).ok().map(|()| &pre);
            (self.plan_targets(now, &msg, pre, from, authenticated), pre.map(RouteRemovals::of).unwrap_or_default())
        };
        // What herald answers itself to a request that did not authenticate (OPTIONS to
        // herald, 404/480 for an inbound call) is stateless too.
        if !authenticated {
            if let Err(Local::Options | Local::Reject(..) | Local::RejectWith(..) | Local::RuleReject(..)) = &plan {
                return self.answer_local_stateless(&msg, from, &plan, out);
            }
        }
        let is_invite = method == Some(Method::Invite);
        let dest = response_destination(&msg, from);
        let mut actions = Actions::new();
        let Ok(id) = self.txs.insert_server_into(now, &msg, key, (dest, is_invite), &mut actions) else { return };
        // Its peer is where its responses go (no lookup for it).
        self.apply(now, id, Some(dest), &mut actions, out);
        self.route_request(now, id, from, local, msg, (hash, removals), plan, out);
    }

    /// A request that belongs to server transaction `id` (a retransmission, an ACK for its
    /// non-2xx final) goes to it.
    fn pass_to_server_transaction(&mut self, now: Instant, id: TxId, msg: Message, out: &mut Vec<Output>) {
        let (mut peer, mut actions) = (None, Actions::new());
        self.txs.on_message_into(now, id, msg, &mut peer, &mut actions);
        self.apply(now, id, peer, &mut actions, out);
    }

    /// An ACK without a server transaction: the ACK for a 2xx (end-to-end, routed like any
    /// request without a transaction), or the ACK for a final response herald sent
    /// statelessly.
    fn on_ack(&mut self, now: Instant, from: Peer, local: SocketAddr, msg: &Message, out: &mut Vec<Output>) {
        // §17.1.1.3: the ACK for a non-2xx copies the response's To, tag included. A To tag
        // that is herald's own for this Call-ID and From tag (`local_tag`) is the ACK for one
        // of herald's stateless answers (a challenge, a refusal): it ends here, as Kamailio's
        // sl module filters the ACKs of its replies.
        // Only a tag that looks like one of ours ("hr" and 12 to 16 hex digits) is compared
        // with the one herald would write, which costs a hash and a string (~800 instructions).
        let maybe_ours = |t: &str| t.starts_with("hr") && (14..=18).contains(&t.len());
        if msg.to_tag().ok().flatten().is_some_and(|t| maybe_ours(t) && t == self.local_tag(msg)) {
            return;
        }
        // It cannot be challenged: one the policy does not let through is dropped.
        if let Gate::Pass { authenticated } = self.auth_gate(now, from, msg) {
            self.forward_stateless(now, from, local, msg, authenticated, out);
        }
    }

    /// Carries out the plan for a new request that has its server transaction `id` (validated
    /// and through the auth gate): herald's own answer, or the branches.
    #[allow(clippy::too_many_arguments)] // the request, where it came from, and what was decided
    fn route_request(
        &mut self,
        now: Instant,
        id: TxId,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        (hash, removals): (u64, RouteRemovals),
        plan: Result<Vec<Planned>, Local>,
        out: &mut Vec<Output>,
    ) {
        match plan {
            Ok(plan) => self.fork(now, id, from, local, msg, (hash, removals), plan, out),
            Err(answer) => self.answer_local(now, id, from, &msg, answer, out),
        }
    }
}
