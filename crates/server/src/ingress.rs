//! The one way in: every transport hands what it received - a datagram (module `udp_receiver`)
//! or a frame cut from a stream (module `stream`) - to [`receive`], which classifies it
//! (`herald_core::inbound`: parse, receipt checks, the answer owed to a malformed request),
//! counts it, and holds answers to the source's `[flood]` rate. What comes out is a message for
//! admission and its engine shard (`Dispatcher::route`, on the thread that handles it), bytes
//! to send back, or nothing.

use crate::protect;
use crate::shared::Shared;
use crate::stats::{Bump, WorkerStats};
use bytes::Bytes;
use herald_core::inbound::{self, Dropped, Inbound};
use herald_core::Peer;
use herald_sip::{Framing, Message, ParseError};

/// What became of the bytes received.
pub(crate) enum Arrival {
    /// A well-formed message, for admission and its shard.
    Message(Message),
    /// The answer to a malformed request, for the sender. `close`: a stream's framing is lost,
    /// close the connection once this is sent.
    Answer { bytes: Bytes, close: bool },
    /// Nothing to send (counted). `close` as for [`Arrival::Answer`].
    Dropped { close: bool },
}

/// Classifies one datagram or stream frame from `from`, read by worker `worker`. `truncated`:
/// a datagram longer than the receive buffer.
pub(crate) fn receive(
    shared: &Shared,
    worker: usize,
    bytes: Bytes,
    from: &Peer,
    framing: Framing,
    truncated: bool,
) -> Arrival {
    let stats = &shared.stats.workers[worker];
    // By transport, not framing: a WebSocket message is parsed as a datagram (RFC 7118 §5.1)
    // but arrives on a stream connection.
    match from.transport {
        herald_core::Transport::Udp => stats.udp_received.bump(),
        _ => stats.tcp_received.bump(),
    }
    match inbound::classify(bytes, &shared.limits, framing, truncated) {
        Inbound::Message(msg) => Arrival::Message(msg),
        Inbound::Answer { bytes, close } => answer(shared, stats, from, bytes.freeze(), close),
        Inbound::Drop(Dropped::KeepAlive) => Arrival::Dropped { close: false },
        Inbound::Drop(Dropped::Response) => {
            stats.malformed_responses_dropped.bump();
            Arrival::Dropped { close: false }
        }
        Inbound::Drop(Dropped::Request) => {
            stats.malformed_dropped.bump();
            Arrival::Dropped { close: false }
        }
    }
}

/// A stream whose next frame cannot be cut (`e`; `rest`: the bytes read and not yet framed):
/// the framing is lost (RFC 4475 §3.1.2.3, §3.3.9), so the connection answers what it can and
/// closes. Whatever cannot be answered counts as a dropped request.
pub(crate) fn framing_lost(shared: &Shared, worker: usize, rest: &[u8], e: &ParseError, from: &Peer) -> Arrival {
    let stats = &shared.stats.workers[worker];
    match inbound::answer_unparsed(rest, e, &shared.limits) {
        Inbound::Answer { bytes, .. } => answer(shared, stats, from, bytes.freeze(), true),
        _ => {
            stats.malformed_dropped.bump();
            Arrival::Dropped { close: true }
        }
    }
}

/// An answer to a malformed request goes back where the request came from (RFC 3261 §18.2.2
/// would use the Via, which a malformed request's is not trusted for; rport does the same). That
/// address may be forged: the answer counts against its rate (issue 16 item 6).
fn answer(shared: &Shared, stats: &WorkerStats, from: &Peer, bytes: Bytes, close: bool) -> Arrival {
    if !protect::may_answer(shared.flood.as_deref(), from) {
        // Over its rate (over a connection: banned now), no answer.
        stats.malformed_dropped.bump();
        return Arrival::Dropped { close };
    }
    stats.malformed_answered.bump();
    Arrival::Answer { bytes, close }
}
