//! Who a message came from or goes to.

use std::fmt;
use std::net::SocketAddr;

/// SIP transports (RFC 3261 §18, RFC 7118 for WebSocket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Udp,
    Tcp,
    Tls,
    Ws,
    Wss,
}

impl Transport {
    /// Reliable transports get no retransmissions (RFC 3261 §17.1.1.2, §17.1.2.2).
    pub fn is_reliable(self) -> bool {
        !matches!(self, Transport::Udp)
    }

    /// Transports that carry SIP over TLS (RFC 3261 §26.2, RFC 7118 §5): what a SIPS URI needs.
    pub fn is_secure(self) -> bool {
        matches!(self, Transport::Tls | Transport::Wss)
    }

    /// The token used in a Via sent-protocol (RFC 3261 §18.2.1, RFC 7118 §5).
    pub fn as_via_str(self) -> &'static str {
        match self {
            Transport::Udp => "UDP",
            Transport::Tcp => "TCP",
            Transport::Tls => "TLS",
            Transport::Ws => "WS",
            Transport::Wss => "WSS",
        }
    }

    /// The `transport=` URI parameter value (RFC 3261 §19.1.1).
    pub fn as_param(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Tls => "tls",
            Transport::Ws => "ws",
            Transport::Wss => "wss",
        }
    }

    /// Parses a Via transport or a `transport=` value, case-insensitively.
    pub fn parse(s: &str) -> Option<Transport> {
        [Transport::Udp, Transport::Tcp, Transport::Tls, Transport::Ws, Transport::Wss]
            .into_iter()
            .find(|t| t.as_via_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_via_str())
    }
}

/// A stream connection, unique within one herald process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A remote end: transport, address and, for streams, the connection it is reached over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    pub transport: Transport,
    pub addr: SocketAddr,
    pub conn: Option<ConnId>,
}

impl Peer {
    pub fn udp(addr: SocketAddr) -> Peer {
        Peer { transport: Transport::Udp, addr, conn: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names() {
        assert_eq!(Transport::parse("tcp"), Some(Transport::Tcp));
        assert_eq!(Transport::parse("SCTP"), None);
        assert!(Transport::Tls.is_reliable());
        assert!(!Transport::Udp.is_reliable());
    }
}
