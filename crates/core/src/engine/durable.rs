//! Write-through registrations (issue 19, `[location] mode = "write-through"`): the 200 OK to a
//! REGISTER leaves only once the change it answers is committed to the durable copy.
//!
//! The registrar's change returns a ticket ([`Ticket`]); while the store's journal has not
//! reported it durable, the response is held here instead of being given to the server
//! transaction. The transaction stays in Trying, so a retransmitted REGISTER is absorbed
//! (RFC 3261 §17.2.2: no response to resend yet) and never gets a 200 before the commit. The
//! runtime runs `handle_timeouts` when the journal commits (and on its tick): each held
//! response whose ticket is durable is then handed to its transaction and sent. In stateless
//! mode there is no transaction: the response itself waits, and a retransmission, which is
//! applied again, waits for its own ticket.
//!
//! Bounded: a held response belongs to a transaction (bounded by `limits.max_transactions`);
//! stateless ones are capped (module `durable_waits`), beyond which the response is dropped
//! (the UA retransmits).

use super::durable_waits::HeldResponse;
use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::transaction::{Actions, TxId};
use bytes::Bytes;
use herald_store::Ticket;
use std::time::Instant;

impl Engine {
    /// Answers REGISTER transaction `id` with `bytes` once `ticket` is durable.
    pub(super) fn respond_when_durable(
        &mut self,
        now: Instant,
        id: TxId,
        (bytes, status): (Bytes, u16),
        ticket: Ticket,
        out: &mut Vec<Output>,
    ) {
        if ticket <= self.store.durable() {
            self.answer_held(now, HeldResponse::Transaction { id, bytes, status }, out);
        } else {
            self.durable.hold(now, ticket, HeldResponse::Transaction { id, bytes, status });
        }
    }

    /// Sends a stateless REGISTER answer to `to` once `ticket` is durable.
    pub(super) fn send_when_durable(
        &mut self,
        now: Instant,
        to: Peer,
        bytes: Bytes,
        ticket: Ticket,
        out: &mut Vec<Output>,
    ) {
        if ticket <= self.store.durable() {
            out.push(Output::Send { to, bytes });
        } else {
            self.durable.hold(now, ticket, HeldResponse::Stateless { to, bytes });
        }
    }

    /// Sends every held response whose ticket is durable now.
    pub(super) fn release_durable(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.durable.is_empty() {
            return;
        }
        let durable = self.store.durable();
        while let Some(response) = self.durable.pop_durable(durable) {
            self.answer_held(now, response, out);
        }
    }

    fn answer_held(&mut self, now: Instant, response: HeldResponse, out: &mut Vec<Output>) {
        match response {
            HeldResponse::Transaction { id, bytes, status } => {
                let (mut peer, mut actions) = (None, Actions::new());
                self.txs.on_tu_response_into(now, id, (bytes, status), &mut peer, &mut actions);
                self.apply(now, id, peer, &mut actions, out);
            }
            HeldResponse::Stateless { to, bytes } => out.push(Output::Send { to, bytes }),
        }
    }
}
