//! The REGISTER answers an engine holds until their change is durable (see module `durable`):
//! a leaf, so that the engine's struct can hold it without importing the module that drives it.

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
    held: VecDeque<(Instant, Ticket, HeldResponse)>,
    stateless: usize,
    bytes: usize,
}

pub(super) enum HeldResponse {
    /// For the server transaction `id`, which stays in Trying until then.
    Transaction { id: TxId, bytes: Bytes, status: u16 },
    /// Stateless mode: the datagram itself.
    Stateless { to: Peer, bytes: Bytes },
}

impl HeldResponse {
    fn len(&self) -> usize {
        match self {
            HeldResponse::Transaction { bytes, .. } | HeldResponse::Stateless { bytes, .. } => bytes.len(),
        }
    }
}

impl DurableWaits {
    /// Holds `response` until `ticket` is durable. A stateless one beyond
    /// [`MAX_HELD_STATELESS`] is dropped (the UA retransmits); a transaction's is bounded by
    /// `limits.max_transactions`.
    pub(super) fn hold(&mut self, since: Instant, ticket: Ticket, response: HeldResponse) {
        if let HeldResponse::Stateless { .. } = response {
            if self.stateless >= MAX_HELD_STATELESS {
                return;
            }
            self.stateless += 1;
        }
        self.bytes += response.len();
        self.held.push_back((since, ticket, response));
    }

    /// The oldest held response if its ticket is durable (`durable`: every ticket up to it is).
    pub(super) fn pop_durable(&mut self, durable: Ticket) -> Option<HeldResponse> {
        if self.held.front().is_none_or(|h| h.1 > durable) {
            return None;
        }
        let (_, _, response) = self.held.pop_front()?;
        self.bytes -= response.len();
        if let HeldResponse::Stateless { .. } = response {
            self.stateless -= 1;
        }
        Some(response)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// When `handle_timeouts` should look again: at once while anything is held (the runtime
    /// also calls it on every commit).
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.held.front().map(|h| h.0)
    }

    /// Bytes of the responses held (counted in the engine's `held_bytes`).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}
