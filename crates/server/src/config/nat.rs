//! `[nat]`: phones behind NAT (Kamailio's nathelper): what counts as NAT, the Contact fix, the
//! keep-alives herald sends to NATed UDP bindings, and the Path herald adds as an edge proxy in
//! front of another registrar (RFC 3327).

use herald_core::nat::{NatConfig, NatDetect};
use serde::Deserialize;
use std::time::Duration;

/// `[nat]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Nat {
    /// What makes a UDP phone one behind NAT. `"private"`: its Contact is a private address
    /// (RFC 1918, RFC 6598 100.64/10, RFC 4193 fc00::/7, link-local) other than the packet's
    /// source, or (for requests) its top Via names another address than the source.
    /// `"contact_differs"`: also any Contact address or port other than the source's (a NAT in
    /// front of public addresses); it takes a third-party registration (another host
    /// registering the phone's contact) for NAT too.
    pub detect: Detect,
    /// Rewrite the Contact of requests and responses from NATed phones that herald forwards to
    /// the address and port they came from (nathelper `fix_nated_contact`), so that the far
    /// end's in-dialog requests come back through the NAT.
    pub fix_contact: bool,
    /// Keep-alives to NATed UDP bindings, sent from herald's SIP port so that the NAT keeps its
    /// pinhole open: `"off"`, `"crlf"` (a "\r\n\r\n" datagram, RFC 5626 §3.5.1 style, Kamailio's
    /// `nat_keepalive`) or `"options"` (an OPTIONS request; the binding is removed after
    /// `keepalive_max_failures` unanswered in a row).
    pub keepalive: Keepalive,
    /// Seconds between two keep-alives to one binding (NATs commonly forget a UDP mapping after
    /// 30 to 120 s of silence).
    pub keepalive_interval_s: u64,
    /// With `keepalive = "options"`: unanswered OPTIONS in a row after which the binding is
    /// removed (any response counts as an answer).
    pub keepalive_max_failures: u32,
    /// When herald forwards a REGISTER for a domain it does not serve (an edge proxy in front of
    /// another registrar), add a Path header with its own URI (RFC 3327 §4), so that the
    /// registrar's requests for the phone come back through herald; for a phone behind NAT with
    /// a flow token of the phone's flow (RFC 5626 §5.1), so that they leave over the NAT's
    /// mapping: `"off"`, `"supported"` (only when the UA lists `path` in Supported, as RFC 3327
    /// §5.1 asks) or `"always"` (also otherwise, with `Require: path` so that a registrar
    /// without Path support refuses rather than ignores it, §5.1). A REGISTER from an Outbound
    /// UA gets its Path in any case (RFC 5626 §5.1).
    pub edge_path: EdgePath,
}

/// `[nat] detect`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detect {
    #[default]
    Private,
    ContactDiffers,
}

/// `[nat] keepalive`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Keepalive {
    Off,
    #[default]
    Crlf,
    Options,
}

/// `[nat] edge_path`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgePath {
    Off,
    #[default]
    Supported,
    Always,
}

impl Default for Nat {
    fn default() -> Self {
        Nat {
            detect: Detect::Private,
            fix_contact: true,
            keepalive: Keepalive::Crlf,
            keepalive_interval_s: 30,
            keepalive_max_failures: 3,
            edge_path: EdgePath::Supported,
        }
    }
}

impl Nat {
    /// What the engine is told.
    pub fn engine(&self) -> NatConfig {
        NatConfig {
            detect: match self.detect {
                Detect::Private => NatDetect::Private,
                Detect::ContactDiffers => NatDetect::ContactDiffers,
            },
            fix_contact: self.fix_contact,
            edge_path: match self.edge_path {
                EdgePath::Off => herald_core::nat::EdgePath::Off,
                EdgePath::Supported => herald_core::nat::EdgePath::Supported,
                EdgePath::Always => herald_core::nat::EdgePath::Always,
            },
        }
    }

    /// The keep-alive period; `None` when keep-alives are off.
    pub fn keepalive_interval(&self) -> Option<Duration> {
        (self.keepalive != Keepalive::Off).then(|| Duration::from_secs(self.keepalive_interval_s))
    }

    /// Ranges. `Err((key, message))`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(1..=3600).contains(&self.keepalive_interval_s) {
            return Err(("keepalive_interval_s", format!("{} is outside 1..=3600", self.keepalive_interval_s)));
        }
        if !(1..=100).contains(&self.keepalive_max_failures) {
            return Err(("keepalive_max_failures", format!("{} is outside 1..=100", self.keepalive_max_failures)));
        }
        Ok(())
    }
}
