//! The one way in: every transport hands what it received - a datagram (module `udp_receiver`)
//! or a frame cut from a stream (module `stream`) - to [`receive`], which classifies it
//! (`herald_core::inbound`: parse, receipt checks, the answer owed to a malformed request),
//! counts it, and holds answers to the source's `[flood]` rate. What comes out is a message for
//! admission and its engine shard (`Dispatcher::route`, on the thread that handles it), bytes
//! to send back, or nothing. A UDP datagram that is STUN, not SIP, is a keep-alive of RFC 5626
//! §8: a Binding request is answered (`herald_core::inbound::stun`), at the same per-source
//! rate as answers to malformed requests; anything else STUN-shaped is dropped.

use crate::protect;
use crate::shared::Shared;
use crate::stats::{Bump, WorkerStats};
use bytes::{Bytes, BytesMut};
use herald_core::inbound::{self, stun, Dropped, Inbound};
use herald_core::{Peer, Transport};
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
    if let Some(stun) = screen(shared, worker, from, &bytes, truncated) {
        return stun;
    }
    let stats = &shared.stats.workers[worker];
    arrival(shared, stats, from, inbound::classify(bytes, &shared.limits, framing, truncated))
}

/// What [`receive`] does before the classification: counts what was received and answers a
/// STUN keep-alive, which is then all there is to it (`Some`). For the UDP receiver, which
/// classifies the rest itself and hands a message on at once (the others go to
/// [`not_a_message`]): through [`receive`] and its [`Arrival`], the parsed message was written
/// out twice more and a frame set up, ~40 instructions a message (callgrind, issue 21).
#[inline(always)]
pub(crate) fn screen(shared: &Shared, worker: usize, from: &Peer, bytes: &Bytes, truncated: bool) -> Option<Arrival> {
    let stats = &shared.stats.workers[worker];
    // By transport, not framing: a WebSocket message is parsed as a datagram (RFC 7118 §5.1)
    // but arrives on a stream connection.
    match from.transport {
        Transport::Udp => stats.udp_received.bump(),
        _ => stats.tcp_received.bump(),
    }
    // RFC 5626 §8 mixes STUN and SIP on a UDP port only (a stream's keep-alive is CRLF, §4.4.1).
    (from.transport == Transport::Udp && stun::is_stun(bytes))
        .then(|| stun_keep_alive(shared, stats, from, bytes, truncated))
}

/// [`receive`]'s end for what the UDP receiver classified (after [`screen`]) and found not to
/// be a message: an answer to send or nothing (counted).
#[cold]
#[inline(never)]
pub(crate) fn not_a_message(shared: &Shared, worker: usize, from: &Peer, inbound: Inbound) -> Arrival {
    arrival(shared, &shared.stats.workers[worker], from, inbound)
}

/// What the classification of one message means for the runtime (counted). Inline, with what
/// is not a message out of line: a call of its own per message cost ~26 instructions (~156 per
/// UDP call, callgrind, issue 21).
#[inline]
fn arrival(shared: &Shared, stats: &WorkerStats, from: &Peer, inbound: Inbound) -> Arrival {
    match inbound {
        Inbound::Message(msg) => Arrival::Message(msg),
        Inbound::Answer { bytes, close } => answer_malformed(shared, stats, from, bytes, close),
        Inbound::Drop(why) => dropped(stats, why),
    }
}

#[inline(never)]
fn answer_malformed(shared: &Shared, stats: &WorkerStats, from: &Peer, bytes: BytesMut, close: bool) -> Arrival {
    answer(shared, stats, from, bytes.freeze(), close)
}

/// Counts a dropped message by why it was dropped.
#[inline(never)]
fn dropped(stats: &WorkerStats, why: Dropped) -> Arrival {
    match why {
        Dropped::KeepAlive => {}
        Dropped::Response => stats.malformed_responses_dropped.bump(),
        Dropped::Request => stats.malformed_dropped.bump(),
    }
    Arrival::Dropped { close: false }
}

/// [`receive`] for a stream message the framing parsed already (`herald_sip::framing::next_cut`):
/// counted, checked and answered as [`receive`] does with the same message's bytes. Inline: once
/// per stream message, from the framer's one call site.
#[inline]
pub(crate) fn receive_parsed(shared: &Shared, worker: usize, msg: Message, from: &Peer) -> Arrival {
    let stats = &shared.stats.workers[worker];
    stats.tcp_received.bump();
    arrival(shared, stats, from, inbound::classify_parsed(msg))
}

/// A STUN datagram: a Binding request gets its Binding success response, sent back to the
/// source address alone and no larger than the request plus XOR-MAPPED-ADDRESS. The source may
/// be forged, so the answer counts against its rate like any other answer to unauthenticated
/// bytes (`protect::may_answer`).
fn stun_keep_alive(shared: &Shared, stats: &WorkerStats, from: &Peer, datagram: &[u8], truncated: bool) -> Arrival {
    let answer = if truncated { None } else { stun::answer(datagram, from.addr).ok() };
    match answer {
        Some(bytes) if protect::may_answer(shared.flood.as_deref(), from) => {
            stats.stun_requests_answered.bump();
            Arrival::Answer { bytes, close: false }
        }
        _ => {
            stats.stun_dropped.bump();
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
