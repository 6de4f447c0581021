//! The boundary between the sans-IO core and the server runtime (docs/design/serve.md).

use crate::peer::{Peer, Transport};
use crate::ping::{Ping, PingOutcome};
use bytes::Bytes;
use herald_sip::Message;
use std::net::SocketAddr;
use std::time::Instant;

/// A resolved next hop (RFC 3263 §4: transport, address and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    pub transport: Transport,
    pub addr: SocketAddr,
}

/// What a name lookup is asked for (RFC 3263 §4.1/§4.2 inputs, taken from a SIP URI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveRequest {
    /// Host name (never an IP literal: those need no lookup).
    pub host: String,
    /// Explicit port from the URI: no SRV lookup then (RFC 3263 §4.2).
    pub port: Option<u16>,
    /// Explicit `transport=` parameter: no NAPTR lookup then (RFC 3263 §4.1).
    pub transport: Option<Transport>,
    /// sips: URI: only TLS targets (RFC 3263 §4.1).
    pub secure: bool,
}

/// Why a name gave no target to send to. The runtime maps its resolver's errors onto these; the
/// engine answers every kind the same way (a 503 for the branch, RFC 3263 §4.3 and RFC 3261
/// §16.7 step 6, which do not tell the causes apart), and the kind says in logs and traces
/// whether to look at the name, the network or the name server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResolveError {
    /// The name does not exist (NXDOMAIN, RFC 1035 §4.1.1 RCODE 3).
    NoSuchName,
    /// The name exists, but no record leads to a target herald can use: no address records,
    /// or only transports it does not send on (a sips URI without TLS, RFC 3263 §4.1).
    NoUsableTarget,
    /// No name server answered in time.
    Timeout,
    /// A name server answered with a failure (SERVFAIL, REFUSED, ...), or could not be reached.
    ServerFailure,
    /// The NAPTR/SRV chain needed more lookups than one resolution may make.
    TooManyLookups,
}

impl ResolveError {
    /// A short lower-case phrase, for logs and `Display`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolveError::NoSuchName => "no such name",
            ResolveError::NoUsableTarget => "no usable target",
            ResolveError::Timeout => "timed out",
            ResolveError::ServerFailure => "name server failure",
            ResolveError::TooManyLookups => "too many DNS lookups",
        }
    }
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for ResolveError {}

/// The answer to one [`Output::Resolve`]: targets in preference order, or why there are none.
pub type Resolution = Result<Vec<Target>, ResolveError>;

/// Inputs to a handler.
#[derive(Debug)]
pub enum Input {
    /// A parsed message from `from`, received on the local address `local`.
    Message { from: Peer, local: SocketAddr, msg: Message },
    /// The answer to an [`Output::Resolve`] with the same token; targets in preference order.
    Resolved { token: u64, result: Resolution },
    /// Sending to `to` failed (ICMP error, connection refused or reset) - RFC 3261 §17.1.1.2.
    TransportError { to: Peer },
    /// Send an OPTIONS of herald's own (`crate::ping`): answered by one [`Output::PingDone`]
    /// with the same token. Hand it to the shard of `ping.call_id`.
    Ping { token: u64, ping: Ping },
}

/// Actions a handler asks the runtime to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send bytes to a peer. With `conn: Some`, over that stream connection; a stream peer
    /// without one means "reuse a connection to that address, or open one".
    Send { to: Peer, bytes: Bytes },
    /// Look a name up (RFC 3263) and answer with [`Input::Resolved`].
    Resolve { token: u64, request: ResolveRequest },
    /// How the [`Input::Ping`] with this token ended.
    PingDone { token: u64, outcome: PingOutcome },
}

/// How a handler tells its runtime that its next deadline came earlier between calls (see
/// [`SipHandler::set_timeout_waker`]).
pub type TimeoutWaker = Box<dyn Fn(Instant) + Send + Sync>;

/// What the runtime drives: one instance per engine shard, behind the shard's lock, so called by
/// one thread at a time (any worker's). The runtime sends an [`Input::Resolved`] to the instance
/// whose [`Output::Resolve`] it answers.
pub trait SipHandler: Send + 'static {
    fn handle(&mut self, now: Instant, input: Input, out: &mut Vec<Output>);
    /// Runs every timer due at `now`.
    fn handle_timeouts(&mut self, now: Instant, out: &mut Vec<Output>);
    /// The earliest instant at which `handle_timeouts` has work.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Called once, before serving, by a runtime that sleeps until the next `poll_timeout`: the
    /// handler keeps `wake` to say that its `poll_timeout` came earlier *between* its calls
    /// (state it shares with other handlers changed: the location store's next expiry). `wake`
    /// may be called from any thread, with a lock of the shared state held; it only notes the
    /// instant. The default ignores it: a handler whose deadlines only its own calls change.
    fn set_timeout_waker(&mut self, wake: TimeoutWaker) {
        let _ = wake;
    }
    /// Transactions still waiting for a final response (graceful shutdown waits for this to
    /// reach zero, bounded).
    fn active_transactions(&self) -> usize;
    /// Transactions held in memory, finished ones still absorbing retransmissions included: what
    /// the runtime's `limits.max_transactions` bounds. Called after every `handle`, so it must
    /// be cheap; the default suits handlers whose `active_transactions` is.
    fn transactions(&self) -> usize {
        self.active_transactions()
    }
    /// Bytes of SIP messages the handler holds (requests it may retransmit or forward,
    /// responses it resends): what the runtime's `limits.max_held_bytes` bounds, since a count
    /// of transactions alone allows up to 64 KB each. Called after every `handle`: cheap.
    fn held_bytes(&self) -> usize;
}
