//! Requests: validation, local answers (OPTIONS, REGISTER), target determination (RFC 3261
//! §16.5), branches (§16.6), CANCEL (§16.10), and stateless forwarding (ACK for 2xx, §16.11).

use super::context::{Branch, BranchState, Context, Planned, PlannedDest};
use super::hop::{hop_for, Hop};
use super::{Engine, Forking, RecordRoute};
use crate::io::Output;
use crate::peer::{Peer, Transport};
use crate::proxy::forward::{forward, record_route_value, record_route_value_sips, via_fixup, via_value, Forward};
use crate::proxy::respond::{build_cancel, response_destination};
use crate::proxy::route::{next_hop, preprocess, Preprocessed};
use crate::proxy::validate::{loop_hash, validate_request, LOOP_SEP, SUPPORTED};
use crate::transaction::{new_branch, stateless_branch, ServerKey, TxId};
use herald_sip::headers::NameAddr;
use herald_sip::uri::Uri;
use herald_sip::{Limits, Message, Method};
use herald_store::Aor;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

const ALLOW: &str =
    "INVITE, ACK, CANCEL, BYE, OPTIONS, REGISTER, PRACK, UPDATE, INFO, SUBSCRIBE, NOTIFY, REFER, MESSAGE";

impl Engine {
    pub(super) fn on_request(
        &mut self,
        now: Instant,
        from: Peer,
        local: SocketAddr,
        mut msg: Message,
        out: &mut Vec<Output>,
    ) {
        // The runtime checked it on receipt (then this is a no-op); the memo it leaves spares
        // the transaction and proxy steps below their own parses of the same headers.
        if let Err(e) = msg.check() {
            if msg.method() != Some(Method::Ack) {
                let (status, reason) = e.response();
                self.respond_stateless(&msg, from, status, &reason, out);
            }
            return;
        }
        let method = msg.method();
        // Built once: used for the lookup here and for the new transaction below.
        let key = ServerKey::from_request(&msg);
        // Retransmissions and the ACK for a non-2xx final go to their server transaction.
        if let Some(id) = key.as_ref().and_then(|k| self.txs.find_server_with(k, &msg)) {
            let peer = self.txs.peer(id);
            let actions = self.txs.on_message(now, id, msg);
            self.apply(now, id, peer, actions, out);
            return;
        }
        if method == Some(Method::Ack) {
            self.on_ack(now, from, local, &msg, out);
            return;
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
        if let Err(rej) = validate_request(&msg, &self.cfg.identity, hash) {
            if !(method == Some(Method::Options) && rej.status == 483) {
                let headers: Vec<(&str, String)> = rej.headers.iter().map(|(n, v)| (*n, v.clone())).collect();
                self.respond_stateless_with(&msg, from, (rej.status, rej.reason), &headers, out);
                return;
            }
        }
        let Some(authenticated) = self.pass_gate(now, from, &msg, out) else { return };
        let plan = self.plan_targets(now, &msg);
        // What herald answers itself to a request that did not authenticate (OPTIONS to
        // herald, 404/480 for an inbound call) is stateless too.
        if !authenticated {
            if let Err(Local::Options | Local::Reject(..)) = &plan {
                return self.answer_local_stateless(&msg, from, &plan, out);
            }
        }
        let is_invite = method == Some(Method::Invite);
        let dest = response_destination(&msg, from);
        let (id, actions) = match self.txs.insert_server_with(now, &msg, key, dest, is_invite) {
            Ok(v) => v,
            Err(_) => return,
        };
        let peer = self.txs.peer(id);
        self.apply(now, id, peer, actions, out);
        self.route_request(now, id, from, local, msg, hash, plan, out);
    }

    /// An ACK without a server transaction: the ACK for a 2xx (end-to-end, routed like any
    /// request without a transaction), or the ACK for a final response herald sent
    /// statelessly.
    fn on_ack(&mut self, now: Instant, from: Peer, local: SocketAddr, msg: &Message, out: &mut Vec<Output>) {
        // §17.1.1.3: the ACK for a non-2xx copies the response's To, tag included. A To tag
        // that is herald's own for this Call-ID and From tag (`local_tag`) is the ACK for one
        // of herald's stateless answers (a challenge, a refusal): it ends here, as Kamailio's
        // sl module filters the ACKs of its replies.
        if msg.to_tag().ok().flatten().is_some_and(|t| t == self.local_tag(msg)) {
            return;
        }
        // It cannot be challenged: one the policy does not let through is dropped.
        if let super::auth_gate::Gate::Pass { .. } = self.auth_gate(now, from, msg) {
            self.forward_stateless(now, from, local, msg, out);
        }
    }

    /// Sends herald's own answer (`Local::Options` or `Local::Reject`) without a transaction.
    fn answer_local_stateless(
        &self,
        msg: &Message,
        from: Peer,
        plan: &Result<Vec<Planned>, Local>,
        out: &mut Vec<Output>,
    ) {
        match plan {
            Err(Local::Options) => {
                self.respond_stateless_with(msg, from, (200, "OK"), &options_headers(), out);
            }
            Err(Local::Reject(status, reason)) => self.respond_stateless(msg, from, *status, reason, out),
            _ => {}
        }
    }

    /// Carries out the plan for a new request that has its server transaction `id` (validated
    /// and through the auth gate).
    #[allow(clippy::too_many_arguments)] // the request, where it came from, and what was decided
    fn route_request(
        &mut self,
        now: Instant,
        id: TxId,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        hash: u64,
        plan: Result<Vec<Planned>, Local>,
        out: &mut Vec<Output>,
    ) {
        let method = msg.method();
        let plan = match plan {
            Ok(plan) => plan,
            Err(Local::Options) => {
                self.respond(now, id, &msg, (200, "OK"), &options_headers(), out);
                return;
            }
            Err(Local::Register) => {
                let response = self.registrar.handle_register(now, &msg, from, &self.store);
                let status = status_of(&response);
                let peer = self.txs.peer(id);
                let actions = self.txs.on_tu_response(now, id, response.freeze(), status);
                self.apply(now, id, peer, actions, out);
                return;
            }
            Err(Local::Reject(status, reason)) => {
                self.respond(now, id, &msg, (status, reason), &[], out);
                return;
            }
        };
        let mut waiting: VecDeque<Planned> = plan.into();
        let first = take_group(&mut waiting, self.cfg.forking);
        let is_invite = method == Some(Method::Invite);
        self.context_bytes += msg.as_bytes().len();
        self.contexts.insert(
            id,
            Box::new(Context {
                request: Some(msg),
                source: from,
                local,
                is_invite,
                loop_hash: hash,
                branches: Vec::new(),
                waiting,
                finals: Vec::new(),
                answered: false,
                stop_forking: false,
            }),
        );
        self.start_branches(now, id, first, out);
    }

    /// RFC 3261 §16.4 and §16.5: where the request goes, or why herald answers it itself.
    fn plan_targets(&self, now: Instant, msg: &Message) -> Result<Vec<Planned>, Local> {
        let pre = preprocess(msg, &self.cfg.identity).map_err(|_| Local::Reject(400, "Bad Route"))?;
        let ruri_text = match &pre.request_uri {
            Some(u) => u.clone(),
            None => String::from_utf8_lossy(msg.request_uri_bytes().unwrap_or_default()).into_owned(),
        };
        let first_route = msg
            .list_values(herald_sip::HeaderName::Route)
            .filter_map(Result::ok)
            .find(|v| !pre.remove.iter().any(|r| r.span == v.span))
            .and_then(|v| NameAddr::parse(v.bytes).ok());
        if let Some(route) = first_route {
            // Loose routing: the next hop is the first remaining Route (§16.12).
            let (next, strict) = next_hop(Some(&route), &ruri_text);
            return Ok(vec![Planned {
                request_uri: if strict { Some(next.clone()) } else { pre.request_uri.clone() },
                dest: PlannedDest::Uri(next),
                push_routes: vec![],
                q: 1000,
                strict_route_tail: strict.then(|| format!("<{ruri_text}>")),
                fallback: None,
            }]);
        }
        let ruri = Uri::parse(ruri_text.as_bytes()).map_err(|_| Local::Reject(400, "Bad Request-URI"))?;
        let identity = &self.cfg.identity;
        let to_us = identity.is_this_proxy(&ruri)
            || (identity.serves_domain(&ruri) && ruri.as_sip().is_some_and(|u| u.user.is_none()));
        let method = msg.method();
        if method == Some(Method::Register) && identity.serves_domain(&ruri) {
            return Err(Local::Register);
        }
        if to_us {
            return Err(match method {
                Some(Method::Options) => Local::Options,
                _ => Local::Reject(404, "Not Found"),
            });
        }
        if identity.serves_domain(&ruri) {
            // §16.5: the location service decides for a domain we are responsible for.
            // The port does not split a served domain's users (Aor::of_served_domain).
            let aor = Aor::of_served_domain(&ruri).ok_or(Local::Reject(404, "Not Found"))?;
            let bindings = self.store.lookup(&aor, now);
            if bindings.is_empty() {
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
            let secure = ruri.is_sips();
            let planned: Vec<Planned> = bindings
                .into_iter()
                .map(|b| {
                    // RFC 3327 §5.3: with a Path, the request goes to the first Path entry (the
                    // edge proxy the registration came through), which routes it on.
                    let dest = match b.path.as_deref().and_then(first_path_uri) {
                        Some(first) => PlannedDest::Uri(first),
                        None => delivery(&b.contact, b.source),
                    };
                    let fallback = matches!(dest, PlannedDest::Peer(p) if p.transport.is_reliable())
                        .then(|| b.contact.to_string());
                    Planned {
                        request_uri: Some(b.contact.to_string()),
                        dest,
                        push_routes: b.path.as_deref().map(|p| vec![p.to_owned()]).unwrap_or_default(),
                        q: b.q_or_default(),
                        strict_route_tail: None,
                        fallback,
                    }
                })
                // RFC 5630 §3.1.3: a SIPS request reaches its target over TLS on every hop,
                // the last one included (the last-hop exception is deprecated). A phone
                // registered over UDP or TCP with a sip: contact cannot take it.
                .filter(|p| !secure || reaches_securely(&p.dest))
                .collect();
            if planned.is_empty() {
                return Err(Local::Reject(480, "No Secure Contact"));
            }
            return Ok(planned);
        }
        if method == Some(Method::Options) && msg.max_forwards().ok().flatten() == Some(0) {
            return Err(Local::Options); // §16.3 step 3: answer OPTIONS as a UAS
        }
        Ok(vec![Planned {
            request_uri: pre.request_uri.clone(),
            dest: PlannedDest::Uri(ruri_text),
            push_routes: vec![],
            q: 1000,
            strict_route_tail: None,
            fallback: None,
        }])
    }

    pub(super) fn start_branches(&mut self, now: Instant, sid: TxId, group: Vec<Planned>, out: &mut Vec<Output>) {
        if let Some(ctx) = self.contexts.get_mut(&sid) {
            // Most requests have one target: no room for three more branches that never come.
            ctx.branches.reserve_exact(group.len());
        }
        for planned in group {
            let Some(ctx) = self.contexts.get_mut(&sid) else { return };
            ctx.branches.push(Branch::new(planned));
            let idx = ctx.branches.len() - 1;
            self.launch(now, sid, idx, out);
        }
        self.advance(now, sid, out);
    }

    /// Sends branch `idx` to its planned destination, resolving a name first if needed.
    fn launch(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(dest) = self.contexts.get(&sid).and_then(|c| c.branches.get(idx)).map(|b| b.planned.dest.clone())
        else {
            return;
        };
        match dest {
            PlannedDest::Peer(p) => self.send_branch(now, sid, idx, p, out),
            PlannedDest::Uri(u) => match Uri::parse(u.as_bytes()).ok().as_ref().and_then(hop_for) {
                Some(Hop::Peer(p)) => self.send_branch(now, sid, idx, p, out),
                Some(Hop::Resolve(request)) => {
                    let token = self.token();
                    self.resolving.insert(token, (sid, idx));
                    if let Some(b) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)) {
                        b.state = BranchState::Resolving(token);
                    }
                    out.push(Output::Resolve { token, request });
                }
                None => self.branch_failed(now, sid, idx, 416, out),
            },
        }
    }

    /// A branch failed at the transport level: try its fallback (the contact URI of a binding
    /// whose registration connection is gone) before counting it as 503 (RFC 3261 §8.1.3.1).
    pub(super) fn retry_or_fail(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let fallback = self
            .contexts
            .get_mut(&sid)
            .and_then(|c| c.branches.get_mut(idx))
            .filter(|b| b.is_pending())
            .and_then(|b| b.planned.fallback.take());
        match fallback {
            Some(uri) => {
                if let Some(b) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)) {
                    if let Some(cid) = b.client.take() {
                        self.clients.remove(&cid);
                    }
                    b.planned.dest = PlannedDest::Uri(uri);
                    b.state = BranchState::Trying;
                }
                self.launch(now, sid, idx, out);
            }
            None => self.branch_failed(now, sid, idx, 503, out),
        }
    }

    pub(super) fn on_resolved(
        &mut self,
        now: Instant,
        token: u64,
        result: Result<Vec<crate::io::Target>, String>,
        out: &mut Vec<Output>,
    ) {
        let Some((sid, idx)) = self.resolving.remove(&token) else { return };
        let still_waiting = self
            .contexts
            .get(&sid)
            .and_then(|c| c.branches.get(idx))
            .is_some_and(|b| b.state == BranchState::Resolving(token));
        if !still_waiting {
            return;
        }
        match result.ok().and_then(|t| t.first().copied()) {
            Some(t) => self.send_branch(now, sid, idx, Peer { transport: t.transport, addr: t.addr, conn: None }, out),
            // RFC 3263 §4.3: no usable target is a 503 for that branch (§16.7 turns it into 500).
            None => self.branch_failed(now, sid, idx, 503, out),
        }
        self.advance(now, sid, out);
    }

    /// Builds the copy of the request for branch `idx` and starts its client transaction.
    fn send_branch(&mut self, now: Instant, sid: TxId, idx: usize, to: Peer, out: &mut Vec<Output>) {
        let Some(ctx) = self.contexts.get(&sid) else { return };
        let Some(listener) = self.cfg.listener_for(to.transport, to.addr) else {
            return self.branch_failed(now, sid, idx, 503, out);
        };
        let Some(req) = ctx.request.clone() else {
            return self.branch_failed(now, sid, idx, 500, out);
        };
        let planned = ctx.branches[idx].planned.clone();
        let inbound = self.cfg.listener_at(ctx.source.transport, ctx.local);
        let branch = loop_branch(new_branch(), ctx.loop_hash);
        let via = via_value(listener.transport.as_via_str(), listener.addr, &branch);
        let record_route = self.record_route_for(&req, planned.request_uri.as_deref(), inbound, listener);
        let mut pre = match preprocess(&req, &self.cfg.identity) {
            Ok(p) => p,
            Err(_) => return self.branch_failed(now, sid, idx, 400, out),
        };
        let append = strict_route_edits(&req, &mut pre, &planned);
        let consumed = self.consumed_credentials(&req);
        let bytes = forward(
            &req,
            &Forward {
                remove_fields: &consumed,
                request_uri: planned.request_uri.as_deref(),
                remove_routes: &pre.remove,
                push_routes: &planned.push_routes,
                append_routes: &append,
                record_route: &record_route,
                via: &via,
                via_fixup: via_fixup(&req, ctx.source.addr),
            },
        );
        let Ok(fwd) = Message::parse(bytes, &Limits::default()) else {
            return self.branch_failed(now, sid, idx, 500, out);
        };
        match self.txs.insert_client(now, fwd, to) {
            Ok((cid, actions)) => {
                self.clients.insert(cid, (sid, idx));
                let timer_c = self.cfg.timer_c;
                if let Some(ctx) = self.contexts.get_mut(&sid) {
                    let b = &mut ctx.branches[idx];
                    b.client = Some(cid);
                    b.state = BranchState::Trying;
                    if ctx.is_invite {
                        b.timer_c = Some(now + timer_c);
                        self.timer_c.push(std::cmp::Reverse((now + timer_c, sid, idx)));
                    }
                }
                self.apply(now, cid, Some(to), actions, out);
            }
            Err(_) => self.branch_failed(now, sid, idx, 500, out),
        }
    }

    /// §16.6 step 4, with double record-routing when the request changes transport or address
    /// family (RFC 5658 §3): the top value faces the next hop, the second the previous hop.
    /// `branch_uri`: the Request-URI this branch rewrites the request's to, if any.
    fn record_route_for(
        &self,
        req: &Message,
        branch_uri: Option<&str>,
        inbound: Option<super::Listener>,
        outbound: super::Listener,
    ) -> Vec<String> {
        let creates_dialog =
            matches!(req.method(), Some(Method::Invite | Method::Subscribe | Method::Refer | Method::Notify))
                && req.to_tag().ok().flatten().is_none();
        let crosses = inbound.is_some_and(|i| i != outbound);
        let wanted = match self.cfg.record_route {
            RecordRoute::Always => true,
            RecordRoute::CrossTransport => crosses,
            RecordRoute::Never => false,
        };
        if !creates_dialog || !wanted {
            return Vec::new();
        }
        // SIPS in the Request-URI (as received, or as this branch rewrites it) or in the top
        // Route left after ours asks for a SIPS Record-Route.
        let secure = req.request_uri().is_ok_and(|u| u.is_sips())
            || branch_uri.is_some_and(|u| Uri::parse(u.as_bytes()).is_ok_and(|u| u.is_sips()))
            || req
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
        let sig = signature.as_deref();
        let rr = |l: super::Listener| match l.transport {
            t if secure && t.is_secure() => record_route_value_sips(l.addr, sig),
            t => record_route_value((t != Transport::Udp).then(|| t.as_param()), l.addr, sig),
        };
        match inbound {
            Some(i) if crosses => vec![rr(outbound), rr(i)],
            _ => vec![rr(outbound)],
        }
    }

    /// RFC 3261 §16.10: answer the CANCEL, then cancel every pending branch of its INVITE.
    fn on_cancel(&mut self, now: Instant, from: Peer, local: SocketAddr, msg: Message, out: &mut Vec<Output>) {
        let target = self.txs.find_cancel_target(&msg).filter(|sid| self.contexts.contains_key(sid));
        let Some(sid) = target else {
            // No response context: forward statelessly (§16.10), if the policy lets it leave
            // for its target: to a foreign host it would be a relay for a transaction herald
            // never had (issue 16), answered 481 instead.
            if self.pass_gate(now, from, &msg, out).is_some() {
                self.forward_stateless(now, from, local, &msg, out);
            }
            return;
        };
        if let Ok((cid, actions)) = self.txs.insert_server(now, &msg, response_destination(&msg, from), false) {
            let peer = self.txs.peer(cid);
            self.apply(now, cid, peer, actions, out);
            self.respond(now, cid, &msg, (200, "OK"), &[], out);
        }
        let pending: Vec<usize> = match self.contexts.get_mut(&sid) {
            Some(ctx) => {
                ctx.stop_forking = true;
                ctx.waiting.clear();
                (0..ctx.branches.len()).filter(|i| ctx.branches[*i].is_pending()).collect()
            }
            None => return,
        };
        for idx in pending {
            self.cancel_branch(now, sid, idx, out);
        }
        self.advance(now, sid, out);
    }

    /// Sends CANCEL on a branch once it has a provisional response (RFC 3261 §9.1); a branch
    /// still resolving is simply dropped as 487.
    pub(super) fn cancel_branch(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(b) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)) else { return };
        match b.state {
            BranchState::Proceeding => {
                if b.cancelled {
                    return; // one CANCEL per branch (§9.1: it is retransmitted by its transaction)
                }
                let Some(cid) = b.client else { return };
                let Some(req) = self.txs.get(cid).and_then(|t| t.request()).cloned() else { return };
                let Some(peer) = self.txs.peer(cid) else { return };
                // §9.1: without a final response 64*T1 after the CANCEL, the INVITE's client
                // transaction is destroyed: Timer C's heap brings the branch back then.
                let give_up_at = now + self.cfg.timers.t1 * 64;
                b.cancelled = true;
                b.timer_c = Some(give_up_at);
                self.timer_c.push(std::cmp::Reverse((give_up_at, sid, idx)));
                if let Ok(cancel) = Message::parse(build_cancel(&req), &Limits::default()) {
                    if let Ok((id, actions)) = self.txs.insert_client(now, cancel, peer) {
                        self.apply(now, id, Some(peer), actions, out);
                    }
                }
            }
            BranchState::Trying => b.cancel_when_provisional = true,
            BranchState::Resolving(_) => self.branch_failed(now, sid, idx, 487, out),
            BranchState::Done(_) => {}
        }
    }

    /// Stateless mode (§16.11): REGISTER and OPTIONS to us are still answered; everything else
    /// goes to one target without transaction state.
    fn on_request_stateless(
        &mut self,
        now: Instant,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        out: &mut Vec<Output>,
    ) {
        if let Err(rej) = validate_request(&msg, &self.cfg.identity, loop_hash(&msg)) {
            self.respond_stateless(&msg, from, rej.status, rej.reason, out);
            return;
        }
        if self.pass_gate(now, from, &msg, out).is_none() {
            return;
        }
        match self.plan_targets(now, &msg) {
            Err(Local::Register) => {
                let response = self.registrar.handle_register(now, &msg, from, &self.store);
                out.push(Output::Send { to: response_destination(&msg, from), bytes: response.freeze() });
            }
            Err(Local::Options) => self.respond_stateless_with(&msg, from, (200, "OK"), &options_headers(), out),
            Err(Local::Reject(status, reason)) => self.respond_stateless(&msg, from, status, reason, out),
            Ok(_) => self.forward_stateless(now, from, local, &msg, out),
        }
    }

    /// Forwards without state (§16.11): ACK for 2xx, CANCEL without context, stateless mode.
    /// The branch is derived from the request so that retransmissions get the same one. Only
    /// literal-address next hops are used: a stateless element has nowhere to park a request
    /// while a name is being resolved.
    pub(super) fn forward_stateless(
        &mut self,
        now: Instant,
        from: Peer,
        _local: SocketAddr,
        msg: &Message,
        out: &mut Vec<Output>,
    ) {
        let Ok(plan) = self.plan_targets(now, msg) else { return };
        let Some(target) = plan.into_iter().max_by_key(|p| p.q) else { return };
        let to = match &target.dest {
            PlannedDest::Peer(p) => *p,
            PlannedDest::Uri(u) => match Uri::parse(u.as_bytes()).ok().as_ref().and_then(hop_for) {
                Some(Hop::Peer(p)) => p,
                _ => return,
            },
        };
        let Some(listener) = self.cfg.listener_for(to.transport, to.addr) else { return };
        let Some(base) = stateless_branch(msg) else { return };
        let branch = loop_branch(base, loop_hash(msg));
        let via = via_value(listener.transport.as_via_str(), listener.addr, &branch);
        let Ok(mut pre) = preprocess(msg, &self.cfg.identity) else { return };
        let append = strict_route_edits(msg, &mut pre, &target);
        let consumed = self.consumed_credentials(msg);
        let bytes = forward(
            msg,
            &Forward {
                remove_fields: &consumed,
                request_uri: target.request_uri.as_deref(),
                remove_routes: &pre.remove,
                push_routes: &target.push_routes,
                append_routes: &append,
                via: &via,
                via_fixup: via_fixup(msg, from.addr),
                ..Default::default()
            },
        );
        out.push(Output::Send { to, bytes });
    }
}

/// §16.6 step 6 for a strict next hop: its own Route value is removed (it became the
/// Request-URI) and the old Request-URI is returned as the Route value to append.
fn strict_route_edits<'m>(msg: &'m Message, pre: &mut Preprocessed<'m>, planned: &Planned) -> Vec<String> {
    let Some(tail) = &planned.strict_route_tail else { return Vec::new() };
    let first = msg
        .list_values(herald_sip::HeaderName::Route)
        .filter_map(Result::ok)
        .find(|v| !pre.remove.iter().any(|r| r.span == v.span));
    pre.remove.extend(first);
    vec![tail.clone()]
}

/// The URI of the first value of a stored Path header ("<sip:p1;lr>, <sip:p2;lr>").
fn first_path_uri(path: &str) -> Option<String> {
    let first = herald_sip::headers::ListIter::new(path.as_bytes()).next()?.ok()?.1;
    NameAddr::parse(first).ok().map(|a| a.uri.as_str().to_owned())
}

/// Where a request for a registered contact goes.
/// * Registered over a stream: over that connection (the phone may not accept new ones, and
///   behind NAT it cannot).
/// * Over UDP from behind NAT (the contact is a private address, RFC 1918 / RFC 6598 / RFC 4193,
///   that is not where the REGISTER came from): to the registration's source, like Kamailio's
///   `fix_nated_register`.
/// * Otherwise to the contact URI itself, so third-party registrations work.
fn delivery(contact: &str, source: Peer) -> PlannedDest {
    if source.transport.is_reliable() {
        return PlannedDest::Peer(source);
    }
    let natted = match Uri::parse(contact.as_bytes()).ok().as_ref().and_then(hop_for) {
        Some(Hop::Peer(p)) => is_private(p.addr.ip()) && p.addr.ip() != source.addr.ip(),
        _ => false,
    };
    if natted {
        PlannedDest::Peer(source)
    } else {
        PlannedDest::Uri(contact.to_owned())
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

fn is_private(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || (o[0] == 100 && (64..128).contains(&o[1]))
        }
        std::net::IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// The headers of herald's 200 to an OPTIONS for itself (RFC 3261 §11.2).
fn options_headers() -> [(&'static str, String); 3] {
    [("Allow", ALLOW.to_owned()), ("Accept", "application/sdp".to_owned()), ("Supported", SUPPORTED.join(", "))]
}

/// Why a request is answered by herald instead of being forwarded.
enum Local {
    Options,
    Register,
    Reject(u16, &'static str),
}

/// The next group of targets: everything (parallel) or the contacts sharing the highest q.
pub(super) fn take_group(waiting: &mut VecDeque<Planned>, forking: Forking) -> Vec<Planned> {
    match forking {
        Forking::Parallel => waiting.drain(..).collect(),
        Forking::Sequential => {
            let mut sorted: Vec<Planned> = waiting.drain(..).collect();
            sorted.sort_by_key(|p| std::cmp::Reverse(p.q));
            let top = sorted.first().map(|p| p.q);
            let (group, rest): (Vec<_>, Vec<_>) = sorted.into_iter().partition(|p| Some(p.q) == top);
            waiting.extend(rest);
            group
        }
    }
}

fn status_of(response: &[u8]) -> u16 {
    response.get(8..11).and_then(|d| std::str::from_utf8(d).ok()).and_then(|d| d.parse().ok()).unwrap_or(500)
}

/// A branch of ours: its unique part, then the request's loop hash (§16.6 step 8), which
/// [`crate::proxy::validate`] looks for to tell a loop from a spiral.
fn loop_branch(mut unique: String, loop_hash: u64) -> String {
    unique.push(LOOP_SEP);
    herald_sip::text::push_hex(&mut unique, loop_hash, 16);
    unique
}
