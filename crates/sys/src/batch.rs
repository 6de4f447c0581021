//! What the batched calls of `recv` and `send` share: how many datagrams one call moves and
//! whether it may sleep.

/// Datagrams per recvmmsg/sendmmsg call: enough to empty a socket queue that a burst filled in
/// few calls, small enough that one batch's slots stay in cache.
pub const BATCH: usize = 32;

/// Whether a batch call may sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Return at once (MSG_DONTWAIT), with `WouldBlock` when nothing could be read or sent.
    Never,
    /// As the socket's blocking mode says. On a blocking socket a receive sleeps until the first
    /// datagram (or SO_RCVTIMEO) and then takes only what is already queued (MSG_WAITFORONE); a
    /// send sleeps until the send buffer has room.
    IfBlocking,
}
