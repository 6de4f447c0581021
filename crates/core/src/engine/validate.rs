//! The engine's answers to requests it will not take: headers that do not parse (RFC 3261
//! §8.2) and the proxy's request validation (§16.3, `crate::proxy::validate`). Both run before
//! any state exists, so what they answer is sent statelessly and costs nothing to repeat.

use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::proxy::validate::{loop_hash, validate_request};
use herald_sip::{Message, Method};

impl Engine {
    /// Checks that the headers the engine relies on parse, answering (statelessly) when they
    /// do not; `false`: the request is finished with. The runtime checked it on receipt (then
    /// this is a no-op); the memo it leaves spares the transaction and proxy steps their own
    /// parses of the same headers. An ACK is never answered (§17.1.1.3).
    pub(super) fn well_formed(&self, msg: &mut Message, from: Peer, out: &mut Vec<Output>) -> bool {
        let Err(e) = msg.check() else { return true };
        if msg.method() != Some(Method::Ack) {
            let (status, reason) = e.response();
            self.respond_stateless(msg, from, status, &reason, out);
        }
        false
    }

    /// §16.3 for a request that would get a server transaction: `true` when it was refused
    /// (and answered statelessly, with the refusal's headers, e.g. Unsupported for a 420).
    /// `hash` is the request's loop hash. An OPTIONS that ran out of Max-Forwards is not
    /// refused: §16.3 step 3 lets the proxy answer it as a UAS (`plan_targets`).
    pub(super) fn refused(&self, msg: &Message, from: Peer, hash: u64, out: &mut Vec<Output>) -> bool {
        let Err(rej) = validate_request(msg, &self.cfg.identity, hash, !self.cfg.routing.is_empty()) else {
            return false;
        };
        if msg.method() == Some(Method::Options) && rej.status == 483 {
            return false;
        }
        let headers: Vec<(&str, String)> = rej.headers.iter().map(|(n, v)| (*n, v.clone())).collect();
        self.respond_stateless_with(msg, from, (rej.status, rej.reason), &headers, out);
        true
    }

    /// §16.3 in stateless mode (§16.11): `true` when it was refused and answered. Unlike
    /// [`Engine::refused`] it answers every refusal, OPTIONS included, and with the status
    /// line only (as stateless mode always has).
    pub(super) fn refused_stateless(&self, msg: &Message, from: Peer, out: &mut Vec<Output>) -> bool {
        let Err(rej) = validate_request(msg, &self.cfg.identity, loop_hash(msg), !self.cfg.routing.is_empty()) else {
            return false;
        };
        self.respond_stateless(msg, from, rej.status, rej.reason, out);
        true
    }
}
