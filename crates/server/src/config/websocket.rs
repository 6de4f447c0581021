//! `[websocket]`: SIP over WebSocket (RFC 7118) on `"ws"` and `"wss"` listeners: the upgrade,
//! who may open one, the keep-alive pings and the largest message.

use serde::Deserialize;
use std::time::Duration;

/// `[websocket]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSocket {
    /// A connection that has received nothing for this many seconds is sent a WebSocket ping
    /// (RFC 6455 §5.5.2); one that then receives nothing (no pong, no message) for as long again
    /// is taken for dead and closed: a browser that vanished without a close frame is freed
    /// within two intervals. 0 turns the pings off (then only `[limits] tcp_idle_timeout_s`
    /// frees a silent connection).
    pub ping_interval_s: u64,
    /// Origins (RFC 6454, as browsers send them: `"https://phone.example.com"`) allowed to open
    /// a connection; an upgrade from any other origin is refused with 403 (RFC 6455 §10.2).
    /// Empty: any origin. A request without Origin (not a browser) is always accepted: only
    /// browsers are bound by it.
    pub allowed_origins: Vec<String>,
    /// Largest WebSocket message (and frame) accepted, in bytes; a larger one closes the
    /// connection with status 1009 (RFC 6455 §7.4.1). One message carries one SIP message (RFC
    /// 7118 §5), so unset means `[limits] max_message_size`.
    pub max_message_size: Option<usize>,
    /// How long the HTTP upgrade may take, in seconds, from the connection's start; on a
    /// `"wss"` listener the TLS handshake comes first and `[tls] handshake_timeout_s` is added.
    pub handshake_timeout_s: u64,
}

impl Default for WebSocket {
    fn default() -> Self {
        WebSocket { ping_interval_s: 30, allowed_origins: Vec::new(), max_message_size: None, handshake_timeout_s: 10 }
    }
}

impl WebSocket {
    /// The keep-alive interval; `None` when pings are off.
    pub fn ping_interval(&self) -> Option<Duration> {
        (self.ping_interval_s > 0).then(|| Duration::from_secs(self.ping_interval_s))
    }

    /// The largest message, given the SIP limit.
    pub fn message_limit(&self, max_sip_message: usize) -> usize {
        self.max_message_size.unwrap_or(max_sip_message)
    }

    /// Ranges and forms. `Err((key, message))`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.ping_interval_s > 86_400 {
            return Err(("ping_interval_s", "must be at most 86400 seconds (0 turns pings off)".into()));
        }
        if self.handshake_timeout_s == 0 || self.handshake_timeout_s > 300 {
            return Err(("handshake_timeout_s", "must be between 1 and 300 seconds".into()));
        }
        if let Some(n) = self.max_message_size {
            if !(512..=16 << 20).contains(&n) {
                return Err(("max_message_size", format!("{n} is outside 512..=16777216")));
            }
        }
        for o in &self.allowed_origins {
            // RFC 6454 §6.2: scheme "://" host [":" port], nothing after.
            let rest = o.strip_prefix("https://").or_else(|| o.strip_prefix("http://"));
            if rest.is_none_or(|r| r.is_empty() || r.contains(['/', ' ', ','])) {
                return Err((
                    "allowed_origins",
                    format!("'{o}' is not an origin (scheme://host[:port], as a browser sends it)"),
                ));
            }
        }
        Ok(())
    }
}
