//! Admission: what the runtime's protections make of a message before its engine shard sees it.
//! Responses are never limited: they belong to transactions herald started.

use crate::protect::FloodVerdict;
use crate::shared::{Shared, WorkerCommon};
use crate::stats::Bump;
use bytes::Bytes;
use herald_core::inbound;
use herald_core::Peer;
use herald_sip::{Message, Method};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What becomes of a message.
pub(crate) enum Admission {
    /// Handle it. `charge`: the request counts against its source's budget
    /// (`limits.*_per_source`), as of this instant.
    Handle { charge: Option<Instant> },
    /// Refused: send this stateless 503 back to the source.
    Refuse(Bytes),
    /// Dropped (counted).
    Drop,
}

/// Decides on `msg` from `from` for worker `common.id`: a banned
/// source's requests are dropped unanswered; new requests (not ACK, CANCEL or in-dialog: those
/// finish what is running, seed 001) are dropped while draining, and answered 503 while this
/// worker is overloaded, the transaction limit is reached, or their source holds its own budget
/// (`limits.*_per_source`, module `source_budget`); the ACKs of those 503s are absorbed.
/// `now`: when the message's batch was read. `refresh_gauges`: brings the worker's copy of
/// the load over all shards up to date (`shards::LoadGauges`), asked only before a new request
/// is judged: nothing else reads it, and a sum over every shard before each batch was ~450
/// instructions per call (callgrind, issue 21). `shedding`: the worker whose receiver read the
/// message sheds (a message handed over unparsed is admitted by its shard's owner, module
/// `balance`, as its reader would have admitted it).
pub(crate) fn admit(
    shared: &Shared,
    common: &WorkerCommon,
    from: &Peer,
    msg: &Message,
    now: Instant,
    shedding: bool,
    refresh_gauges: impl FnOnce(),
) -> Admission {
    // The instant this request is charged to its source's budget (None: exempt, or a response).
    let mut charge = None;
    if msg.is_request() {
        let stats = &shared.stats.workers[common.id];
        if let Some(flood) = &shared.flood {
            let (verdict, trusted) = flood.check_request_of(from, now);
            if verdict == FloodVerdict::Drop {
                return Admission::Drop; // counted by the guard
            }
            // An ACK starts no transaction; trusted sources have no per-source budget.
            charge = (msg.method() != Some(Method::Ack) && !trusted).then_some(now);
        }
        // Only new requests are refused (draining, overloaded or full), so only they are weighed.
        if inbound::is_new_request(msg) {
            refresh_gauges();
            if shared.draining.load(Ordering::Relaxed) {
                stats.drain_dropped.bump();
                return Admission::Drop;
            }
            let limits = &shared.config.limits;
            let full = common.transactions.load(Ordering::Relaxed) >= limits.max_transactions
                || common.held_bytes.load(Ordering::Relaxed) >= limits.max_held_bytes
                || charge.is_some_and(|now| shared.budgets.over(from.addr.ip(), now));
            let overloaded = shedding || overloaded(shared, common);
            if overloaded || full {
                if overloaded {
                    stats.overload_rejected.bump();
                } else {
                    stats.transactions_rejected.bump();
                }
                return Admission::Refuse(inbound::busy(msg, shared.config.overload.retry_after_s));
            }
        } else if inbound::is_ack_of_busy(msg) {
            stats.stateless_acks_absorbed.bump();
            return Admission::Drop;
        }
    }
    Admission::Handle { charge }
}

/// Whether new requests are refused now: a UDP receiver's socket-queue wait says so, or (TCP's
/// signal, which has no kernel timestamps) this worker's inbox - its connections' messages and
/// those handed over to it - is over half full.
fn overloaded(shared: &Shared, common: &WorkerCommon) -> bool {
    if common.shedding.load(Ordering::Relaxed) > 0 {
        return true;
    }
    let inbox = &shared.inboxes[common.id];
    shared.config.overload.enabled && inbox.max_capacity() - inbox.capacity() > shared.config.limits.inbox_capacity / 2
}
