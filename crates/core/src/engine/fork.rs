//! Forking (RFC 3261 §16.6): a request's response context, its branches, and the copy of the
//! request each branch sends, after resolving the next hop's name if it has one (RFC 3263).
//! Responses to the branches come back through `responses`.

use super::context::{Branch, BranchState, Context, Planned, PlannedDest};
use super::forward_edits::strict_route_edits;
use super::hop::{hop_for, Hop};
use super::{Engine, Forking};
use crate::io::Output;
use crate::nat::{requested_expires, sender_contact_fix, RequestSender};
use crate::peer::{Peer, Transport};
use crate::proxy::forward::{forward, via_fixup, Forward};
use crate::proxy::own_values::edge_path_value;
use crate::proxy::route::{preprocess, RouteRemovals};
use crate::proxy::validate::LOOP_SEP;
use crate::transaction::{Actions, ClientKey, MethodKey, TxId};
use herald_sip::uri::Uri;
use herald_sip::{Message, Method};
use smallvec::SmallVec;
use std::net::SocketAddr;
use std::time::Instant;

impl Engine {
    /// Forwards a new request that has its server transaction `id` to its targets: creates its
    /// response context (§16.2) and starts the first group of branches. `hash` is its loop hash
    /// (§16.3 step 4), carried in every branch parameter.
    #[allow(clippy::too_many_arguments)] // the request, where it came from, and its targets
    pub(super) fn fork(
        &mut self,
        now: Instant,
        id: TxId,
        from: Peer,
        local: SocketAddr,
        msg: Message,
        (hash, removals): (u64, RouteRemovals),
        plan: Vec<Planned>,
        out: &mut Vec<Output>,
    ) {
        // Parallel forking starts every target at once: the plan is the first group as it is
        // (no queue, no second vector; `take_group` would drain it all the same).
        let (first, waiting) =
            if self.cfg.forking == Forking::Parallel && plan.first().is_none_or(|p| p.gateway.is_none()) {
                (plan, Vec::new())
            } else {
                let mut waiting = plan;
                (take_group(&mut waiting, self.cfg.forking), waiting)
            };
        let is_invite = msg.method() == Some(Method::Invite);
        self.context_bytes += msg.as_bytes().len();
        // Allocated first and written in place, as the transaction table's entries are:
        // `Box::new` built the context on the stack and copied it over (a few hundred bytes).
        let context = Box::write(
            Box::new_uninit(),
            Context {
                request: Some(msg),
                source: from,
                local,
                is_invite,
                loop_hash: hash,
                route_removals: removals,
                branches: SmallVec::new(),
                waiting,
                finals: Vec::new(),
                answered: false,
                stop_forking: false,
            },
        );
        self.contexts.insert(id, context);
        self.start_branches(now, id, first, out);
    }

    /// Starts one group of targets as branches of `sid`, then lets `advance` decide whether
    /// the context has its answer.
    pub(super) fn start_branches(&mut self, now: Instant, sid: TxId, group: Vec<Planned>, out: &mut Vec<Output>) {
        let Some(ctx) = self.contexts.get_mut(&sid) else { return };
        // Most requests have one target, which the context holds inline: no room for three
        // more branches that never come. The group's branches are all written first, each plan
        // moved once from the group into its branch: pushed one by one between the launches,
        // each plan (~270 bytes) was copied out of the group and again into the branch (issue
        // 21). Launching a branch touches no other branch, so what happens, and in what order,
        // is the same.
        let first = ctx.branches.len();
        ctx.branches.reserve_exact(group.len());
        ctx.branches.extend(group.into_iter().map(Branch::new));
        let end = ctx.branches.len();
        for idx in first..end {
            if !self.contexts.contains_key(&sid) {
                return;
            }
            self.gateway_attempt_started(now, sid, idx);
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

    /// A branch failed at the transport level: try its next fallback (the contact URI of a
    /// binding whose registration connection is gone, another flow of the same Outbound
    /// instance) before counting it as 503 (RFC 3261 §8.1.3.1), or as the status its plan names
    /// for a lost flow (480, 430: see `delivery` and `flows`).
    pub(super) fn retry_or_fail(&mut self, now: Instant, sid: TxId, idx: usize, out: &mut Vec<Output>) {
        let Some(b) = self.contexts.get_mut(&sid).and_then(|c| c.branches.get_mut(idx)).filter(|b| b.is_pending())
        else {
            return;
        };
        if b.planned.fallback.is_empty() {
            let status = b.planned.lost_flow.unwrap_or(503);
            return self.branch_failed(now, sid, idx, status, out);
        }
        let mut rest = std::mem::take(&mut b.planned.fallback);
        let mut next = rest.remove(0);
        next.fallback.extend(rest);
        b.planned = next;
        b.state = BranchState::Trying;
        if let Some(cid) = b.client.take() {
            self.clients.remove(&cid);
        }
        self.launch(now, sid, idx, out);
    }

    /// The answer to branch DNS lookup `token` (RFC 3263): the branch goes to the first target
    /// found, unless it stopped waiting meanwhile (cancelled, timed out).
    pub(super) fn on_resolved(
        &mut self,
        now: Instant,
        token: u64,
        result: crate::io::Resolution,
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
        // The context's request and the branch's plan are read where they are: copying them
        // (the message's header index, the plan's strings) cost about 1,000 instructions per
        // branch.
        let Some(req) = ctx.request.as_ref() else {
            return self.branch_failed(now, sid, idx, 500, out);
        };
        let built = 'copy: {
            let planned = &ctx.branches[idx].planned;
            let inbound = self.cfg.listener_at(ctx.source.transport, ctx.local);
            let branch = self.branches.next_branch_with(LOOP_SEP as u8, ctx.loop_hash);
            let hops = (ctx.source, to, planned.lost_flow.is_some());
            let sender = RequestSender::new(req);
            let record_routes = self.record_route_for(&sender, planned.request_uri.as_deref(), inbound, listener, hops);
            // Our Via and Record-Route texts for these listeners are written once per engine.
            self.own_texts.note(listener.transport, listener.addr, &self.cfg.identity);
            for l in record_routes.listeners().filter(|l| *l != listener) {
                self.own_texts.note(l.transport, l.addr, &self.cfg.identity);
            }
            let record_route = record_routes.texts(&self.own_texts);
            let via = self.own_texts.via(listener.transport, listener.addr, &branch);
            // RFC 5626 §5.1: a REGISTER herald forwards for a UA it is the first hop of gets a Path
            // with the flow token, so that the registrar's requests come back over this flow.
            // RFC 3327 §4: also for any UA as `[nat] edge_path` says, with `Require: path` when
            // the UA did not list it.
            let edge_plan =
                (req.method() == Some(Method::Register)).then(|| self.edge_path(&sender, ctx.source)).flatten();
            if edge_plan.as_ref().is_some_and(|p| p.token.is_some()) && ctx.source.transport == Transport::Udp {
                // herald is the hop this phone's NAT mapping points at: the keep-alive loop keeps it
                // open while the registration lasts (`crate::nat::EdgeFlows`).
                self.registrar.edge_flows().note(ctx.source.addr, now, requested_expires(req));
            }
            let edge_path = edge_plan.map(|plan| {
                let t = listener.transport;
                let value = edge_path_value(
                    (t != Transport::Udp).then(|| t.as_param()),
                    listener.addr,
                    plan.token.as_deref(),
                    plan.ob,
                );
                (value, plan.require)
            });
            // A phone behind NAT: its Contact becomes where it really is (`crate::nat`).
            let contact_fix = sender_contact_fix(&sender, ctx.source, &self.cfg.nat);
            // The Route values §16.4 removes were found when the request was planned; only a
            // strict next hop (rare) needs the parsed Routes again.
            let (remove_routes, append) = if planned.strict_route_tail.is_none() {
                (ctx.route_removals.values(req), Vec::new())
            } else {
                let mut pre = match preprocess(req, &self.cfg.identity, &self.own_texts) {
                    Ok(p) => p,
                    Err(_) => break 'copy Err(400),
                };
                let append = strict_route_edits(&mut pre, planned);
                (pre.remove, append)
            };
            let consumed = self.consumed_credentials(req);
            let bytes = forward(
                req,
                &Forward {
                    remove_fields: &consumed,
                    request_uri: planned.request_uri.as_deref(),
                    remove_routes: &remove_routes,
                    push_routes: &planned.push_routes,
                    append_routes: &append,
                    record_route: &record_route,
                    path: edge_path.as_ref().map(|(p, _)| p.as_str()),
                    via: Some(via),
                    via_fixup: via_fixup(req, ctx.source.addr),
                    replace_field: contact_fix.as_ref().map(|(f, v)| (*f, v.as_str())),
                    require: edge_path.as_ref().and_then(|(_, require)| require.then_some("path")),
                },
            );
            // The key is the branch just written and the request's method: the copy is not parsed
            // back (`TransactionTable::insert_client_forwarded`).
            let method = req.cseq().map_or(MethodKey::INVITE, |c| MethodKey::of(c.method));
            // The branch's own buffer (its spare room given back in place), not a copy.
            let key = ClientKey { branch: branch.into_boxed_str(), method };
            let responder_natted = self.responder_natted(req, planned, to);
            Ok((bytes, key, responder_natted))
        };
        // Every borrow of the context ends with the block: the branch's state changes below.
        let (bytes, key, responder_natted) = match built {
            Ok(built) => built,
            Err(status) => return self.branch_failed(now, sid, idx, status, out),
        };
        let mut actions = Actions::new();
        match self.txs.insert_client_forwarded_into(now, bytes, key, to, &mut actions) {
            Ok(cid) => {
                self.clients.insert(cid, (sid, idx));
                let timer_c = self.cfg.timer_c;
                if let Some(ctx) = self.contexts.get_mut(&sid) {
                    let b = &mut ctx.branches[idx];
                    b.client = Some(cid);
                    b.responder_natted = responder_natted;
                    b.state = BranchState::Trying;
                    if ctx.is_invite {
                        let pending = b.is_pending();
                        self.timer_c.arm(&mut b.timer_c, pending, (now + timer_c, sid, idx));
                    }
                }
                self.apply(now, cid, Some(to), &mut actions, out);
            }
            Err(_) => self.branch_failed(now, sid, idx, 500, out),
        }
    }
}

/// The next group of targets: everything (parallel) or the contacts sharing the highest q.
/// Gateway attempts go one at a time, in their plan's order, whatever `forking` says.
pub(super) fn take_group(waiting: &mut Vec<Planned>, forking: Forking) -> Vec<Planned> {
    if waiting.first().is_some_and(|p| p.gateway.is_some()) {
        return vec![waiting.remove(0)];
    }
    match forking {
        Forking::Parallel => std::mem::take(waiting),
        Forking::Sequential => {
            let mut sorted = std::mem::take(waiting);
            sorted.sort_by_key(|p| std::cmp::Reverse(p.q));
            let top = sorted.first().map(|p| p.q);
            let (group, rest): (Vec<_>, Vec<_>) = sorted.into_iter().partition(|p| Some(p.q) == top);
            waiting.extend(rest);
            group
        }
    }
}
