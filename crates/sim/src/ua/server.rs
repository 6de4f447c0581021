//! The UA as a server (RFC 3261 §8.2, §13.3): requests are answered through herald-core's server
//! transactions, an INVITE by the UA's script, a CANCEL with 200 and the INVITE with 487 (§9.2),
//! and a 2xx to an INVITE is resent until its ACK (§13.3.1.4).

use super::{Answer, Sends, Timer, Ua};
use herald_core::transaction::{TxAction, TxId};
use herald_sip::{HeaderName, Message, Method, ResponseBuilder};
use std::net::SocketAddr;
use std::time::Instant;

impl Ua {
    pub(super) fn on_request(&mut self, now: Instant, from: SocketAddr, msg: Message, sends: &mut Sends) {
        if let Some(id) = self.txs.find_server(&msg) {
            // A retransmission (the transaction resends its last response), or the ACK of a
            // non-2xx final response, which the transaction absorbs.
            let actions = self.txs.on_message(now, id, msg);
            for a in actions {
                self.on_action(now, id, a, sends);
            }
            return;
        }
        let Some(method) = msg.method() else { return };
        let call_id = msg.call_id().unwrap_or("").to_owned();
        match method {
            Method::Ack => {
                // The ACK of our 2xx: a transaction of its own (§17.1.1.3); stop resending.
                if let Some(call) = self.calls.get_mut(&call_id) {
                    call.acked = true;
                }
            }
            Method::Cancel => {
                let target = self.txs.find_cancel_target(&msg);
                let status = if target.is_some() { 200 } else { 481 };
                self.respond_new(now, from, &msg, status, sends);
                if let Some(invite_tx) = target {
                    self.timers.retain(|_, t| !matches!(t, Timer::Respond { tx, .. } if *tx == invite_tx));
                    self.respond(now, invite_tx, 487, sends);
                }
            }
            Method::Invite => {
                let peer = self.peer(from);
                let Ok((id, actions)) = self.txs.insert_server(now, &msg, peer, true) else { return };
                self.servers.insert(id, msg.clone());
                for a in actions {
                    self.on_action(now, id, a, sends);
                }
                let name = self.name.clone();
                let call = self.calls.entry(call_id).or_default();
                call.local_tag = format!("{name}-tag");
                call.invite_tx = Some(id);
                if let Answer::Script { ring, after } = self.answer {
                    if let Some(d) = ring {
                        self.schedule(now + d, Timer::Respond { tx: id, status: 180 });
                    }
                    if let Some((d, status)) = after {
                        self.schedule(now + d, Timer::Respond { tx: id, status });
                    }
                }
            }
            _ => self.respond_new(now, from, &msg, 200, sends),
        }
    }

    /// Answers a request that has no transaction yet with one response.
    pub(super) fn respond_new(
        &mut self,
        now: Instant,
        from: SocketAddr,
        msg: &Message,
        status: u16,
        sends: &mut Sends,
    ) {
        let peer = self.peer(from);
        if let Ok((id, actions)) = self.txs.insert_server(now, msg, peer, false) {
            self.servers.insert(id, msg.clone());
            for a in actions {
                self.on_action(now, id, a, sends);
            }
            self.respond(now, id, status, sends);
        }
    }

    /// Sends `status` through server transaction `id`: To tag, Contact, and for an INVITE its
    /// Record-Route copied (§12.1.1); a 2xx to an INVITE is then resent until its ACK.
    pub(super) fn respond(&mut self, now: Instant, id: TxId, status: u16, sends: &mut Sends) {
        let Some(req) = self.servers.get(&id).cloned() else { return };
        let Some(peer) = self.txs.peer(id) else { return };
        let tag = format!("{}-tag", self.name);
        let contact = self.contact();
        let b = req.as_bytes();
        let rr: Vec<&[u8]> = req.fields(HeaderName::RecordRoute).map(|h| &b[h.value.range()]).collect();
        let invite = req.method() == Some(Method::Invite);
        let mut builder = ResponseBuilder::new(&req, status, reason(status)).to_tag(&tag);
        if invite && status < 300 {
            builder = builder.header("Contact", contact.as_bytes());
            for v in &rr {
                builder = builder.header("Record-Route", v);
            }
        }
        let bytes = builder.build().freeze();
        let actions = self.txs.on_tu_response(now, id, bytes.clone(), status);
        for a in actions {
            match a {
                // Over a stream the transaction may end with this response (Timer J is zero,
                // RFC 3261 §17.2.2): send to the peer read before.
                TxAction::Send(b) => sends.push((peer.addr, b)),
                a => self.on_action(now, id, a, sends),
            }
        }
        if invite && (200..300).contains(&status) {
            let call_id = req.call_id().unwrap_or("").to_owned();
            let t1 = self.txs.timers().t1;
            let give_up = now + self.txs.timers().t1x64();
            if let Some(call) = self.calls.get_mut(&call_id) {
                call.ok = Some((bytes, peer.addr));
            }
            self.schedule(now + t1, Timer::Resend2xx { call_id, interval: t1, give_up });
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        180 => "Ringing",
        200 => "OK",
        404 => "Not Found",
        481 => "Call/Transaction Does Not Exist",
        486 => "Busy Here",
        487 => "Request Terminated",
        _ => "Whatever",
    }
}
