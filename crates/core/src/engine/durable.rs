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
//! stateless ones are capped at [`MAX_HELD_STATELESS`], beyond which the response is dropped
//! (the UA retransmits).

use super::Engine;
use crate::io::Output;
use crate::peer::Peer;
use crate::transaction::TxId;
use bytes::Bytes;
use herald_store::Ticket;
use std::collections::VecDeque;
use std::time::Instant;

/// Stateless responses held at most per engine.
const MAX_HELD_STATELESS: usize = 16_384;

/// Responses waiting for their ticket, oldest first (tickets grow with time within an engine).
#[derive(Default)]
pub(super) struct DurableWaits {
    held: VecDeque<Held>,
    stateless: usize,
    bytes: usize,
}

struct Held {
    since: Instant,
    ticket: Ticket,
    response: HeldResponse,
}

enum HeldResponse {
    Transaction { id: TxId, bytes: Bytes, status: u16 },
    Stateless { to: Peer, bytes: Bytes },
}

impl DurableWaits {
    /// When `handle_timeouts` should look again: at once while anything is held (the runtime
    /// also calls it on every commit).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.held.front().map(|h| h.since)
    }

    /// Bytes of the responses held (counted in the engine's `held_bytes`).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

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
            let peer = self.txs.peer(id);
            let actions = self.txs.on_tu_response(now, id, bytes, status);
            self.apply(now, id, peer, actions, out);
            return;
        }
        self.durable.bytes += bytes.len();
        let response = HeldResponse::Transaction { id, bytes, status };
        self.durable.held.push_back(Held { since: now, ticket, response });
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
        } else if self.durable.stateless < MAX_HELD_STATELESS {
            self.durable.stateless += 1;
            self.durable.bytes += bytes.len();
            self.durable.held.push_back(Held { since: now, ticket, response: HeldResponse::Stateless { to, bytes } });
        }
    }

    /// Sends every held response whose ticket is durable now.
    pub(super) fn release_durable(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.durable.held.is_empty() {
            return;
        }
        let durable = self.store.durable();
        while self.durable.held.front().is_some_and(|h| h.ticket <= durable) {
            let Some(held) = self.durable.held.pop_front() else { break };
            self.durable.bytes -= match &held.response {
                HeldResponse::Transaction { bytes, .. } | HeldResponse::Stateless { bytes, .. } => bytes.len(),
            };
            match held.response {
                HeldResponse::Transaction { id, bytes, status } => {
                    let peer = self.txs.peer(id);
                    let actions = self.txs.on_tu_response(now, id, bytes, status);
                    self.apply(now, id, peer, actions, out);
                }
                HeldResponse::Stateless { to, bytes } => {
                    self.durable.stateless -= 1;
                    out.push(Output::Send { to, bytes });
                }
            }
        }
    }
}
