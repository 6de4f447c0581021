//! Hard limits on what the parser accepts. Exceeding one is an error, never an allocation spree.

/// Bounds applied while parsing one message. Every field is configurable by the server; the
/// defaults suit a public-facing proxy (a UDP datagram cannot exceed 65,535 bytes anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Whole message, headers and body, in bytes.
    pub max_message_size: usize,
    /// Number of header lines (a folded header counts once).
    pub max_headers: usize,
    /// Bytes in one header line including folded continuation lines.
    pub max_header_line: usize,
    /// Via values across all Via header lines. A request may cross 70 hops (the initial
    /// Max-Forwards RFC 3261 §8.1.1.6 recommends), so it may carry 70 Vias legitimately;
    /// RFC 4475 §3.1.1.7 (longreq) has 34.
    pub max_via: usize,
    /// Route plus Record-Route values, each counted separately.
    pub max_route: usize,
    /// Bytes of the start line.
    pub max_start_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_size: 65_535,
            max_headers: 128,
            max_header_line: 8_192,
            max_via: 70,
            max_route: 64,
            max_start_line: 8_192,
        }
    }
}

impl Limits {
    /// These limits plus room for what a proxy adds to a message it relays (its Via and
    /// Record-Route, a longer Max-Forwards): what the next hop must accept from herald when
    /// the original sat exactly at a limit.
    pub fn with_relay_room(&self) -> Limits {
        Limits {
            max_message_size: self.max_message_size + 1024,
            max_headers: self.max_headers + 4,
            max_header_line: self.max_header_line + 256,
            max_via: self.max_via + 1,
            max_route: self.max_route + 2,
            ..self.clone()
        }
    }
}

/// Which limit was exceeded; carried by [`crate::ErrorKind::Limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    MessageSize,
    HeaderCount,
    HeaderLine,
    ViaCount,
    RouteCount,
    StartLine,
}

impl Limit {
    pub fn describe(self) -> &'static str {
        match self {
            Limit::MessageSize => "message too large",
            Limit::HeaderCount => "too many header fields",
            Limit::HeaderLine => "header field too long",
            Limit::ViaCount => "too many Via values",
            Limit::RouteCount => "too many Route values",
            Limit::StartLine => "start line too long",
        }
    }
}
