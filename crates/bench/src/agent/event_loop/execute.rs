//! What the loop does with what the roles asked for ([`Output`]): sends queued on their socket,
//! timers armed, measurements recorded, in order; then the flush that hands each socket's queue
//! to the kernel in one batch and stamps what it carried.

use super::Agent;
use crate::agent::output::{Output, Owner, SendKind, Side};
use std::net::SocketAddr;

impl Agent {
    /// Writes both sockets' queues and stamps what they carried with the time it was handed to
    /// the kernel (taken just before: on loopback the peer may answer while a long batch is
    /// still being written): the requests, and our callee's answers (how long each was held).
    /// The callee's answers go first: they end transactions the proxy already holds and cost it
    /// little to relay, whereas behind a batch of new INVITEs they waited for the proxy's work on
    /// those (at 300 calls/s with a 10 ms quantum, SDD p50 0.33 ms vs 0.09-0.11 ms with no
    /// quantum, when the caller's batch went first).
    pub(super) fn flush(&mut self) {
        // Most flushes of a quiet loop find nothing to write (a turn flushes before it waits
        // and after it handled input): then neither the clock nor the sockets are asked (~100
        // instructions a flush). A stream endpoint is always flushed: its flush also drives a
        // TLS handshake and its deadline.
        if !self.queued && self.caller_ep.is_drained() && self.callee_ep.is_drained() {
            return;
        }
        self.queued = false;
        let at = self.clock();
        self.callee_ep.flush();
        let requested_at = if self.unstamped.is_empty() { at } else { self.clock() };
        self.caller_ep.flush();
        for (owner, id) in self.unstamped.drain(..) {
            match owner {
                Owner::Call { slot, .. } => self.calls.stamp(slot, id, requested_at),
                // REGISTERs leave from the callee's socket.
                Owner::Registration(user) => self.registrations.stamp(user, id, at),
            }
        }
        for (key, due_us) in self.unstamped_answers.drain(..) {
            self.ctx.held.record(key, at.saturating_sub(due_us));
        }
    }

    /// Carries out what the roles asked for, in order, including what that in turn asks for
    /// (a refused send fails its call, whose end lets the user model schedule the next one).
    pub(super) fn execute(&mut self) {
        while !self.out.is_empty() {
            let mut batch = std::mem::take(&mut self.batch);
            self.out.swap_into(&mut batch);
            for output in batch.drain(..) {
                match output {
                    Output::Send { side, bytes, dest, kind } => self.send(side, bytes, dest, kind),
                    Output::Arm { at_us, timer } => self.timers.arm(at_us, timer),
                    Output::Record(measure) => self.stats.record(measure),
                    Output::CallEnded { caller } => {
                        if let Some(w) = &self.workload {
                            w.after_call(&mut self.ctx, caller, &mut self.out);
                        }
                    }
                }
            }
            self.batch = batch;
        }
    }

    /// Queues one message on `side`'s socket; a refusal is handled as `kind` says.
    fn send(&mut self, side: Side, bytes: bytes::Bytes, dest: SocketAddr, kind: SendKind) {
        let ok = self.endpoint(side).send(bytes, dest);
        self.queued |= ok;
        match kind {
            SendKind::Plain => {}
            SendKind::Answer { key, due_us } => {
                if ok {
                    self.unstamped_answers.push((key, due_us));
                }
            }
            SendKind::Retransmission => self.stats.retransmissions += u64::from(ok),
            SendKind::Request { owner, id } if ok => self.unstamped.push((owner, id)),
            SendKind::Request { owner, .. } | SendKind::Essential(owner) if !ok => self.refused(owner),
            SendKind::Essential(_) | SendKind::Request { .. } => {}
        }
    }

    /// The transport refused a request or 2xx ACK of `owner`: that call or registration fails
    /// with the transport's reason.
    fn refused(&mut self, owner: Owner) {
        let why = self.transport_failure();
        match owner {
            Owner::Call { slot, generation } => self.calls.on_send_refused(slot, generation, &why, &mut self.out),
            Owner::Registration(user) => self.registrations.on_send_refused(user, why, &mut self.out),
        }
    }
}
