//! OPTIONS that herald sends on its own (RFC 3261 §11): the gateway prober's probes and the
//! NAT keep-alives of registered phones. The runtime asks with [`crate::Input::Ping`] and the
//! engine answers with [`crate::Output::PingDone`] carrying the same token, once per ping.
//!
//! A ping is a real non-INVITE client transaction (§17.1.2): retransmitted over UDP by Timer E,
//! ended by Timer F (64*T1) or the ping's own shorter `timeout`, matched by its branch when the
//! response reaches herald's listening socket. The response comes back to the shard the
//! runtime routes it to by Call-ID (`inbound::shard_of`), so the runtime must hand the ping to
//! the shard of its `call_id`.

use crate::peer::Peer;
use std::time::Duration;

/// Where a ping goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingTarget {
    /// A known peer: a phone's flow (its source address, its connection for streams).
    Peer(Peer),
    /// A URI to route by (RFC 3263 for a host name): a gateway destination.
    Uri(String),
}

/// One OPTIONS to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    pub target: PingTarget,
    /// Request-URI and To URI. `None`: the target's URI (`PingTarget::Uri`), or
    /// `sip:<address>` with the peer's transport (`PingTarget::Peer`). A NAT keep-alive names
    /// the phone's registered Contact here, so that the phone takes it as addressed to it.
    pub uri: Option<String>,
    /// The Call-ID: chosen by the runtime, which hands the ping to the shard of this Call-ID
    /// (`inbound::shard_of`), where its response will be routed.
    pub call_id: String,
    /// Max-Forwards (RFC 3261 §8.1.1.6): 1 for a keep-alive or a probe of the next hop itself
    /// (a proxy answers rather than forwards it, §16.3 step 3 ... §11).
    pub max_forwards: u8,
    /// Give up (and report [`PingOutcome::TimedOut`]) after this long, when shorter than
    /// Timer F: a prober that probes every 10 s does not wait 32 s for an answer.
    pub timeout: Option<Duration>,
}

/// How a ping ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingOutcome {
    /// A final response with this status (provisional ones are not reported).
    Answered(u16),
    /// No final response within Timer F or the ping's timeout.
    TimedOut,
    /// Sending failed (ICMP error, connection refused or reset): RFC 3261 §17.1.2.2.
    TransportError,
    /// The target's name gave no address (RFC 3263): why, as `ResolveError::as_str` says
    /// (this leaf module does not name the I/O types).
    Unresolved(&'static str),
    /// Nothing was sent: the URI is not sip:/sips:, herald has no listener of its transport
    /// and family, or the engine already has [`MAX_PINGS_IN_FLIGHT`] pings out.
    NotSent(&'static str),
}

impl PingOutcome {
    /// Whether the peer answered at all (any final response).
    pub fn answered(self) -> Option<u16> {
        match self {
            PingOutcome::Answered(s) => Some(s),
            _ => None,
        }
    }
}

/// Pings one engine keeps in flight at most; more are refused at once
/// ([`PingOutcome::NotSent`]), so a runaway prober cannot fill a shard's transaction table.
pub const MAX_PINGS_IN_FLIGHT: usize = 4096;
