//! What herald answers itself instead of forwarding: OPTIONS addressed to it (RFC 3261 §11.2),
//! REGISTER for a domain it serves (the registrar, §10.3), and the refusals of target
//! determination (404, 480: §16.5). Answered in a server transaction, or statelessly for a
//! request that did not authenticate (issue 16).

use super::context::Planned;
use super::decisions::Local;
use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::proxy::validate::SUPPORTED;
use crate::transaction::TxId;
use herald_sip::Message;
use std::time::Instant;

const ALLOW: &str =
    "INVITE, ACK, CANCEL, BYE, OPTIONS, REGISTER, PRACK, UPDATE, INFO, SUBSCRIBE, NOTIFY, REFER, MESSAGE";

impl Engine {
    /// Answers server transaction `id` as `answer` says.
    pub(super) fn answer_local(
        &mut self,
        now: Instant,
        id: TxId,
        from: Peer,
        msg: &Message,
        answer: Local,
        out: &mut Vec<Output>,
    ) {
        match answer {
            Local::Options => self.respond(now, id, msg, (200, "OK"), &options_headers(), out),
            Local::Register => {
                let (response, ticket) = self.registrar.handle_register_durable(now, msg, from, &self.store);
                let status = status_of(&response);
                self.respond_when_durable(now, id, (response.freeze(), status), ticket, out);
            }
            Local::Reject(status, reason) => self.respond(now, id, msg, (status, reason), &[], out),
            Local::RejectWith(status, reason, headers) => self.respond(now, id, msg, (status, reason), &headers, out),
            Local::RuleReject(status, reason) => self.respond(now, id, msg, (status, &reason), &[], out),
        }
    }

    /// Sends herald's own answer (`Local::Options`, `Local::Reject`, `Local::RejectWith`) without
    /// a transaction.
    pub(super) fn answer_local_stateless(
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
            Err(Local::RejectWith(status, reason, headers)) => {
                self.respond_stateless_with(msg, from, (*status, reason), headers, out)
            }
            Err(Local::RuleReject(status, reason)) => self.respond_stateless(msg, from, *status, reason, out),
            _ => {}
        }
    }
}

/// The headers of herald's 200 to an OPTIONS for itself (RFC 3261 §11.2).
pub(super) fn options_headers() -> [(&'static str, String); 3] {
    [("Allow", ALLOW.to_owned()), ("Accept", "application/sdp".to_owned()), ("Supported", SUPPORTED.join(", "))]
}

/// The status code of a response the registrar built (500 if it cannot be read).
fn status_of(response: &[u8]) -> u16 {
    response.get(8..11).and_then(|d| std::str::from_utf8(d).ok()).and_then(|d| d.parse().ok()).unwrap_or(500)
}
