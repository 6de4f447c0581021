//! OPTIONS of herald's own (`crate::ping`, RFC 3261 §11): the gateway prober's probes and the
//! NAT keep-alives. Each is a non-INVITE client transaction of this engine (§17.1.2: Timer E
//! retransmits over UDP, Timer F ends it, the response is matched by its branch), with an
//! optional shorter deadline of the ping's own, and ends in exactly one `Output::PingDone`.

use super::hop::{hop_for, Hop};
use super::Engine;
use crate::hash::fnv1a_parts;
use crate::io::{Output, Resolution};
use crate::peer::{Peer, Transport};
use crate::ping::{Ping, PingOutcome, PingTarget, MAX_PINGS_IN_FLIGHT};
use crate::proxy::own_values::via_value;
use crate::transaction::{TuEvent, TxId};
use herald_sip::uri::Uri;
use herald_sip::{Limits, Message};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Instant;

impl Engine {
    /// `Input::Ping`: sends the OPTIONS, or reports at once why it cannot.
    pub(super) fn on_ping(&mut self, now: Instant, token: u64, ping: Ping, out: &mut Vec<Output>) {
        if self.pings.in_flight() >= MAX_PINGS_IN_FLIGHT {
            return done(token, PingOutcome::NotSent("too many pings in flight"), out);
        }
        let to = match &ping.target {
            PingTarget::Peer(p) => *p,
            PingTarget::Uri(u) => match Uri::parse(u.as_bytes()).ok().as_ref().and_then(hop_for) {
                Some(Hop::Peer(p)) => p,
                Some(Hop::Resolve(request)) => {
                    let dns = self.token();
                    self.pings.resolving(dns, token, ping);
                    out.push(Output::Resolve { token: dns, request });
                    return;
                }
                None => return done(token, PingOutcome::NotSent("not a routable sip or sips URI"), out),
            },
        };
        self.send_ping(now, token, &ping, to, out);
    }

    /// The answer to a ping's DNS lookup (the caller checked `Pings::is_resolving`).
    pub(super) fn on_ping_resolved(&mut self, now: Instant, dns: u64, result: Resolution, out: &mut Vec<Output>) {
        let Some((token, ping)) = self.pings.resolved(dns) else { return };
        match result {
            Ok(targets) => match targets.first() {
                Some(t) => {
                    let to = Peer { transport: t.transport, addr: t.addr, conn: None };
                    self.send_ping(now, token, &ping, to, out);
                }
                None => done(token, PingOutcome::Unresolved("no usable target"), out),
            },
            Err(e) => done(token, PingOutcome::Unresolved(e.as_str()), out),
        }
    }

    /// Builds the OPTIONS and starts its client transaction towards `to`.
    fn send_ping(&mut self, now: Instant, token: u64, ping: &Ping, to: Peer, out: &mut Vec<Output>) {
        let Some(listener) = self.cfg.listener_for(to.transport, to.addr) else {
            return done(token, PingOutcome::NotSent("no listener for the target's transport and family"), out);
        };
        let uri = match (&ping.uri, &ping.target) {
            (Some(u), _) => u.clone(),
            (None, PingTarget::Uri(u)) => u.clone(),
            (None, PingTarget::Peer(p)) => peer_uri(*p),
        };
        let branch = self.branches.next_branch();
        let tag = fnv1a_parts([branch.as_bytes(), &self.tag_seed.to_le_bytes()]);
        let via = via_value(listener.transport.as_via_str(), listener.addr, &branch);
        let from = peer_uri(Peer { transport: listener.transport, addr: listener.addr, conn: None });
        let mut text = String::with_capacity(320 + 2 * uri.len());
        let _ = write!(
            text,
            "OPTIONS {uri} SIP/2.0\r\nVia: {via}\r\nMax-Forwards: {mf}\r\nFrom: <{from}>;tag=hp{tag:016x}\r\n\
             To: <{uri}>\r\nCall-ID: {call_id}\r\nCSeq: 1 OPTIONS\r\nAccept: application/sdp\r\n\
             Content-Length: 0\r\n\r\n",
            mf = ping.max_forwards,
            call_id = ping.call_id,
        );
        let Ok(msg) = Message::parse(bytes::Bytes::from(text), &Limits::default()) else {
            return done(token, PingOutcome::NotSent("the URI or Call-ID does not make a valid request"), out);
        };
        match self.txs.insert_client(now, msg, to) {
            Ok((cid, mut actions)) => {
                self.pings.sent(cid, token, ping.timeout.map(|t| now + t));
                self.apply(now, cid, Some(to), &mut actions, out);
            }
            Err(_) => done(token, PingOutcome::NotSent("no client transaction for it"), out),
        }
    }

    /// An event of a ping's client transaction (the caller checked `Pings::owns`).
    pub(super) fn on_ping_event(&mut self, id: TxId, event: TuEvent, out: &mut Vec<Output>) {
        let outcome = match event {
            TuEvent::Response(resp) => match resp.status() {
                Some(status) if status >= 200 => PingOutcome::Answered(status),
                _ => return,
            },
            TuEvent::Timeout => PingOutcome::TimedOut,
            TuEvent::TransportError => PingOutcome::TransportError,
            TuEvent::Terminated => {
                // Ended without a final response (it is gone from the table now).
                if let Some(token) = self.pings.forget(id) {
                    done(token, PingOutcome::TimedOut, out);
                }
                return;
            }
            TuEvent::AckReceived(_) | TuEvent::NoAck => return,
        };
        if let Some(token) = self.pings.report(id) {
            done(token, outcome, out);
        }
    }

    /// Pings whose own deadline passed: reported as timed out, their transactions dropped
    /// (a late response then matches nothing and is discarded: its only Via is ours).
    pub(super) fn ping_timeouts(&mut self, now: Instant, out: &mut Vec<Output>) {
        while let Some((id, token)) = self.pings.pop_due(now) {
            self.txs.remove(id);
            done(token, PingOutcome::TimedOut, out);
        }
    }
}

fn done(token: u64, outcome: PingOutcome, out: &mut Vec<Output>) {
    out.push(Output::PingDone { token, outcome });
}

/// `sip:<address>` with the transport parameter unless UDP (RFC 3261 §19.1.1), IPv6 bracketed.
fn peer_uri(p: Peer) -> String {
    let mut s = String::from("sip:");
    match p.addr {
        SocketAddr::V4(a) => {
            let _ = write!(s, "{a}");
        }
        SocketAddr::V6(a) => {
            let _ = write!(s, "[{}]:{}", a.ip(), a.port());
        }
    }
    if p.transport != Transport::Udp {
        s.push_str(";transport=");
        s.push_str(p.transport.as_param());
    }
    s
}
