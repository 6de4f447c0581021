//! The invariants the fuzz target holds herald to: every send is a message the next hop
//! accepts, and after the last idle period no transaction is left.

use super::inputs::response_to;
use super::{conn_of, epoch, first_line, trace, World, DRAIN};
use bytes::{Bytes, BytesMut};
use herald_core::{Peer, SipHandler};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::headers::AuthValue;
use herald_sip::{Framing, HeaderName, Message};
use std::sync::OnceLock;
use std::time::Duration;

impl World {
    /// `engine`: the bytes come from the engine (else from the runtime's malformed-message
    /// answers, built from a request that failed the checks, so not held to them).
    pub(super) fn check_send(&mut self, to: Peer, bytes: &Bytes, engine: bool) {
        assert!(!bytes.is_empty(), "empty send to {to:?}");
        self.digest.write(&(self.now - epoch()).as_nanos().to_le_bytes());
        self.digest.write(format!("{to:?}").as_bytes());
        self.digest.write(bytes);
        if trace() {
            let t = self.now - epoch();
            eprintln!(
                "{t:>9.3?} out {} {} {}: {} ({} txs)",
                to.transport,
                to.addr,
                conn_of(&to),
                first_line(bytes),
                self.engine.transactions()
            );
        }
        let text = || String::from_utf8_lossy(bytes).into_owned();
        let msg = Message::parse(bytes.clone(), &self.loose)
            .unwrap_or_else(|e| panic!("herald sent unparseable bytes to {to:?}: {e}\n{}", text()));
        if to.transport.is_reliable() {
            let mut buf = BytesMut::from(&bytes[..]);
            match next_frame(&mut buf, &self.loose) {
                Ok(Some(Frame::Message(m))) if buf.is_empty() => {
                    Message::parse_as(m, &self.loose, Framing::Stream)
                        .unwrap_or_else(|e| panic!("stream send does not parse as a stream message: {e}\n{}", text()));
                }
                other => {
                    panic!("stream send to {to:?} is not exactly one frame ({other:?}, {} left)\n{}", buf.len(), text())
                }
            }
        }
        if engine {
            if let Err(e) = msg.validate() {
                panic!("herald sent a message that fails the receipt checks ({e}) to {to:?}:\n{}", text());
            }
        }
        if let Some(status) = msg.status() {
            if status == 401 || status == 407 {
                let h = if status == 401 { HeaderName::WwwAuthenticate } else { HeaderName::ProxyAuthenticate };
                if let Some(v) = msg.get(h) {
                    if let Some(n) = AuthValue::parse(v).ok().and_then(|a| a.param("nonce")) {
                        self.last_nonce = Some(n.into_owned());
                    }
                }
            }
            return;
        }
        // A CANCEL shares its INVITE's branch but is a transaction of its own (§17.1.3).
        let method = msg.method().map(|m| m.as_str().to_owned()).unwrap_or_default();
        let ours = msg.top_via().ok().and_then(|v| {
            let sent_by_us = v.port == Some(5060) && v.host.to_string() == "192.0.2.10";
            v.branch().filter(|_| sent_by_us).map(|b| format!("{b} {method}"))
        });
        if let Some(b) = ours {
            if self.branches.len() < 1 << 16 && self.branches.insert(b) && method == "INVITE" {
                self.invites_out.push((to, msg.clone()));
            }
        }
        if self.sent_requests.len() == 16 {
            self.sent_requests.pop_front();
        }
        self.sent_requests.push_back((to, msg));
    }

    /// The last idle period: every transaction must end, whatever the peers did or did not
    /// send. With `HERALD_FUZZ_ANSWER_BEFORE_DRAIN=1` every callee first answers each INVITE
    /// herald sent it with 487 (a callee that rang and then vanished no longer counts), and the
    /// check is repeated: what is left then is not waiting for any peer.
    pub(super) fn drain(&mut self) {
        let until = self.now + DRAIN;
        self.advance_to(until, Duration::from_secs(1));
        let mut left = self.engine.transactions();
        if left > 0 && answer_before_drain() {
            // A connection may hold half a message that never ends: the runtime closes such a
            // connection (its incomplete-message timeout), and the peer answers on a new one.
            for i in 0..4 {
                if self.conns[i].as_ref().is_some_and(|c| !c.buf.is_empty()) {
                    self.close(i);
                }
            }
            for (to, req) in std::mem::take(&mut self.invites_out) {
                let bytes = response_to(&req, to, 487);
                self.receive_from_peer(to, &bytes);
            }
            let until = self.now + DRAIN;
            self.advance_to(until, Duration::from_secs(1));
            left = self.engine.transactions();
            assert_eq!(
                left, 0,
                "transactions left {DRAIN:?} after the last message, although every INVITE was answered"
            );
        }
        assert_eq!(
            left,
            0,
            "transactions left {DRAIN:?} after the last message (active: {}); a forwarded INVITE that got a \
             provisional and then nothing (RFC 3261 §9.1: destroy it 64*T1 after the CANCEL)? \
             HERALD_FUZZ_ANSWER_BEFORE_DRAIN=1 tells that case apart",
            self.engine.active_transactions()
        );
        assert_eq!(self.engine.active_transactions(), 0);
        // The byte budget's accounting balances: nothing is counted as held once nothing is.
        assert_eq!(self.engine.held_bytes(), 0, "held bytes left with no transaction left");
    }
}

fn answer_before_drain() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HERALD_FUZZ_ANSWER_BEFORE_DRAIN").is_some_and(|v| v == "1"))
}
