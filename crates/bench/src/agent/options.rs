//! What a run is asked to do: the options behind `herald bench calls|register|users`, built by
//! the CLI or by the capacity search.

use super::tls_config::TlsOptions;
use super::users::User;
use crate::arrivals::Arrivals;
use crate::workload::UserModel;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Udp,
    Tcp,
    /// TCP inside TLS (RFC 3261 §26.2), configured by [`CommonOptions::tls`].
    Tls,
    /// SIP over WebSocket (RFC 7118) over TCP.
    Ws,
    /// SIP over WebSocket over TLS, configured by [`CommonOptions::tls`] as TLS is.
    Wss,
}

impl TransportKind {
    pub fn parse(s: &str) -> Result<TransportKind, String> {
        match s.to_ascii_lowercase().as_str() {
            "udp" => Ok(TransportKind::Udp),
            "tcp" => Ok(TransportKind::Tcp),
            "tls" => Ok(TransportKind::Tls),
            "ws" => Ok(TransportKind::Ws),
            "wss" => Ok(TransportKind::Wss),
            _ => Err(format!("unknown transport '{s}': use udp, tcp, tls, ws or wss")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Udp => "udp",
            TransportKind::Tcp => "tcp",
            TransportKind::Tls => "tls",
            TransportKind::Ws => "ws",
            TransportKind::Wss => "wss",
        }
    }

    /// Whether the connection is inside TLS (and needs [`CommonOptions::tls`]).
    pub fn uses_tls(self) -> bool {
        matches!(self, TransportKind::Tls | TransportKind::Wss)
    }
}

/// Default of [`CommonOptions::quantum_us`]: 10 ms, SIPp's default `-timer_resol`. Waking for
/// every datagram (0) cost ~5 wake-ups and 4 sendmmsg per call, each waking the proxy (issue 21:
/// 1.0-1.9x SIPp's calls per CPU-second); with 10 ms a wake-up handles whatever arrived, about
/// one per call at 100 calls/s and one per arrival above. Latencies do not suffer: receive times
/// are kernel stamps, requests are stamped as they go to the kernel, and the time our callee
/// held an answer (up to a quantum) is left out of what the callers measure
/// ([`super::held::Held`]; before that, a 1 ms quantum tripled the SRD median, 0.30 → 0.95 ms).
pub const DEFAULT_QUANTUM_US: u64 = 10_000;

/// Options every load-generating run shares.
#[derive(Debug, Clone)]
pub struct CommonOptions {
    /// The proxy or registrar.
    pub target: SocketAddr,
    pub transport: TransportKind,
    /// CA, server name and client certificate when `transport` is TLS or WSS (ignored
    /// otherwise).
    pub tls: TlsOptions,
    /// Address the generator's sockets bind to (and put in Via and Contact).
    pub local_ip: IpAddr,
    /// Domain of the users' addresses-of-record (the host part of To/From/Request-URI).
    pub domain: String,
    /// Length of the measurement window.
    pub duration: Duration,
    /// The users the generator plays (with passwords when authenticating).
    pub users: Vec<User>,
    /// Server processes on this machine whose CPU and memory to report.
    pub server_pids: Vec<u32>,
    /// herald's Prometheus endpoint, scraped before and after the window.
    pub metrics_url: Option<String>,
    pub label: String,
    /// Show progress on stderr once a second.
    pub progress: bool,
    /// Random seed (arrival gaps, tags, user model); None draws one.
    pub seed: Option<u64>,
    /// Scheduling quantum of the event loop, µs: after handling input it does not look at the
    /// sockets again for this long (timers still fire on time), so that one wake-up handles
    /// many datagrams. The price: answers go out up to one quantum late (SIPp's `-timer_resol`);
    /// our callee's part of that is left out of the latencies measured. 0 wakes for every
    /// datagram.
    pub quantum_us: u64,
    /// UDP port of the callee's socket (`None`: any free port): a fixed one lets a proxy name
    /// the callee as a static next hop (a gateway set's destination, scripts/bench-gateway.sh).
    pub callee_port: Option<u16>,
    /// UDP: callers and callees share one socket, so that everything reaches the proxy from one
    /// address and port - one 4-tuple, as from an SBC or trunk (`--single-socket`).
    pub single_socket: bool,
    /// Event loops (threads) driving the one socket of `single_socket` (`--threads`, calls
    /// only); 1 otherwise.
    pub threads: usize,
}

impl CommonOptions {
    /// Defaults for everything but the target and users: UDP, 127.0.0.1, domain = target's IP.
    pub fn new(target: SocketAddr, users: Vec<User>, duration: Duration) -> CommonOptions {
        CommonOptions {
            target,
            transport: TransportKind::Udp,
            tls: TlsOptions::default(),
            local_ip: IpAddr::from([127, 0, 0, 1]),
            domain: domain_of(target),
            duration,
            users,
            server_pids: Vec::new(),
            metrics_url: None,
            label: String::new(),
            progress: false,
            seed: None,
            quantum_us: DEFAULT_QUANTUM_US,
            callee_port: None,
            single_socket: false,
            threads: 1,
        }
    }
}

/// The host of `target` as a SIP host (IPv6 in brackets).
pub fn domain_of(target: SocketAddr) -> String {
    match target.ip() {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

/// `herald bench calls`.
#[derive(Debug, Clone)]
pub struct CallsOptions {
    pub common: CommonOptions,
    pub arrivals: Arrivals,
    /// How long the callee rings before answering.
    pub ring: Duration,
    /// How long the caller holds the answered call before BYE.
    pub hold: Duration,
}

/// `herald bench register`.
#[derive(Debug, Clone)]
pub struct RegisterOptions {
    pub common: CommonOptions,
    /// When each REGISTER (a refresh of the next user, round-robin) starts.
    pub arrivals: Arrivals,
    /// Expires of every registration.
    pub expires: Duration,
}

/// `herald bench users`.
#[derive(Debug, Clone)]
pub struct UsersOptions {
    pub common: CommonOptions,
    pub model: UserModel,
}
