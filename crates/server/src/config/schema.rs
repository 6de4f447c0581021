//! The schema of `herald serve`'s configuration: one serde struct ([`Config`]) and its
//! sections, every field defaulted and documented, and the built-in configuration. Loading is
//! in `load`, the translation for the engine in `engine`, realms in `realms`.

use super::admin::Admin;
use super::auth::Auth;
use super::gateways::GatewaySet;
use super::location::Location;
use super::nat::Nat;
use super::protect::{Flood, Overload};
use super::routing::Route;
use super::tls::Tls;
use super::websocket::WebSocket;
// gethostname(2) and getifaddrs(3) live in herald-sys, with the rest of the unsafe.
use herald_sys::{hostname, interface_addresses};
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The configuration compiled into the binary, used when no `--config` file is given. Keys left
/// out take their defaults; `[[listen]]` is left out on purpose so that the IPv6 wildcard is
/// added only where the machine has IPv6.
pub const DEFAULT_CONFIG: &str = r#"# herald built-in configuration (see herald.example.toml for every key)
[server]
workers = 0

[log]
level = "info"

# Registration and calls from local users need digest authentication; create users with
# `herald users add NAME` (file herald-users.txt, realm = the first domain: the host name).
[auth]
enabled = true
register = true
local_callers = true

# Without --config, herald serve also answers `herald ctl` on 127.0.0.1:5090 (loopback, no
# token; [admin] in herald.example.toml), unless another process holds that port.
"#;

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Names herald is the registrar and proxy for (RFC 3261 §10.3 step 1, §16.4): requests whose
    /// Request-URI host is one of them are routed through the location service. Empty means the
    /// machine's own addresses and host name (see [`Config::effective_domains`]).
    pub domains: Vec<String>,
    /// Further names this proxy is known by (Kamailio's `alias`): DNS names that point at it, a
    /// NAT's public name. A Route, Record-Route or Via naming one of them (or the host name,
    /// `localhost`, or any address of this machine) is herald itself (RFC 3261 §16.4), so a
    /// phone configured with `sip:localhost` or `sip:pbx.example.net` as outbound proxy is
    /// not forwarded back to herald. Unlike `domains`, they are not served by the registrar.
    pub aliases: Vec<String>,
    /// Process-wide settings.
    pub server: Server,
    /// Where to listen. Default: `0.0.0.0:5060` on UDP and TCP, plus `[::]:5060` when the
    /// machine has IPv6.
    pub listen: Vec<Listen>,
    /// RFC 3261 §17 timer base values.
    pub timers: Timers,
    /// Proxy behaviour (RFC 3261 §16).
    pub proxy: Proxy,
    /// Registrar behaviour (RFC 3261 §10.3).
    pub registrar: Registrar,
    /// Bounds on what herald accepts and keeps.
    pub limits: Limits,
    /// Logging.
    pub log: Log,
    /// Digest authentication (RFC 3261 §22): who is challenged, the users file, nonces.
    pub auth: Auth,
    /// The Prometheus metrics endpoint.
    pub metrics: Metrics,
    /// Per-source request and failed-authentication limits, with bans.
    pub flood: Flood,
    /// Shedding new requests when a worker cannot keep up.
    pub overload: Overload,
    /// Certificates for the TLS transport and verification of peers.
    pub tls: Tls,
    /// SIP over WebSocket (RFC 7118): upgrade, origins, keep-alive pings.
    pub websocket: WebSocket,
    /// Phones behind NAT: detection, Contact fixing, keep-alives, the edge proxy's Path.
    pub nat: Nat,
    /// The admin endpoint (JSON-RPC 2.0 over HTTP) that `herald ctl` talks to.
    pub admin: Admin,
    /// `[[route]]`: the routing table, first match wins; empty: herald's default routing.
    pub route: Vec<Route>,
    /// `[[gateway_set]]`: named sets of next hops with selection, failover and probing.
    pub gateway_set: Vec<GatewaySet>,
    /// Durable registrations: memory only, write-back or write-through to a SQLite file.
    pub location: Location,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            domains: Vec::new(),
            aliases: Vec::new(),
            server: Server::default(),
            listen: default_listen(),
            timers: Timers::default(),
            proxy: Proxy::default(),
            registrar: Registrar::default(),
            limits: Limits::default(),
            log: Log::default(),
            auth: Auth::default(),
            metrics: Metrics::default(),
            flood: Flood::default(),
            overload: Overload::default(),
            tls: Tls::default(),
            websocket: WebSocket::default(),
            nat: Nat::default(),
            admin: Admin::default(),
            route: Vec::new(),
            gateway_set: Vec::new(),
            location: Location::default(),
        }
    }
}

/// `[server]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    /// Worker threads, each with its own sockets, handler and timers. 0 = one per CPU core.
    pub workers: usize,
    /// SO_RCVBUF and SO_SNDBUF of every UDP socket, in bytes. Large buffers absorb bursts; the
    /// time a datagram waits there is queueing delay, so bigger is not always better.
    pub udp_buffer_bytes: usize,
    /// On SIGTERM/SIGINT, how long to wait for running transactions to finish before exiting.
    /// The default, 32 s, is 64*T1: the longest a non-INVITE transaction can live (RFC 3261 §17.1.2.2).
    pub drain_timeout_s: u64,
    /// Whether herald's memory may be backed by transparent huge pages. Off by default: while
    /// the heap grows and churns under load, each fault of a fresh 2 MiB page zeroes all of it
    /// inside the receive loop (herald_sys::set_thp_disabled says what was measured). Applies
    /// to herald alone, whatever /sys/kernel/mm/transparent_hugepage says.
    pub transparent_huge_pages: bool,
}

impl Default for Server {
    fn default() -> Self {
        Server { workers: 0, udp_buffer_bytes: 4 << 20, drain_timeout_s: 32, transparent_huge_pages: false }
    }
}

impl Server {
    /// The number of workers to start: `workers`, or the number of CPU cores when it is 0.
    pub fn effective_workers(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// One `[[listen]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// `IP:PORT` to bind (IPv6 in brackets: `[::]:5060`). Port 0 picks a free port.
    pub address: SocketAddr,
    /// Transports on this address: any of `"udp"`, `"tcp"`, `"tls"`, `"ws"`, `"wss"`. Default
    /// `["udp", "tcp"]`. TCP, TLS, WS and WSS are all TCP listeners: each needs its own port
    /// (conventionally 5061 for TLS, RFC 3261 §19.1.2; WebSocket ports are the operator's
    /// choice, RFC 7118 §2: 80/443 or 8080/8443 are common).
    #[serde(default = "both_transports")]
    pub transports: Vec<ListenTransport>,
}

/// A transport herald can listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenTransport {
    Udp,
    Tcp,
    Tls,
    /// SIP over WebSocket (RFC 7118).
    Ws,
    /// SIP over secure WebSocket: WebSocket over TLS, with the `[tls]` certificate.
    Wss,
}

impl ListenTransport {
    pub fn to_transport(self) -> herald_core::Transport {
        match self {
            ListenTransport::Udp => herald_core::Transport::Udp,
            ListenTransport::Tcp => herald_core::Transport::Tcp,
            ListenTransport::Tls => herald_core::Transport::Tls,
            ListenTransport::Ws => herald_core::Transport::Ws,
            ListenTransport::Wss => herald_core::Transport::Wss,
        }
    }

    /// Whether the transport runs over a TCP listener (two of them cannot share a port).
    pub fn is_stream(self) -> bool {
        !matches!(self, ListenTransport::Udp)
    }

    /// Whether the listener needs the `[tls]` certificate.
    pub fn needs_certificate(self) -> bool {
        matches!(self, ListenTransport::Tls | ListenTransport::Wss)
    }
}

fn both_transports() -> Vec<ListenTransport> {
    vec![ListenTransport::Udp, ListenTransport::Tcp]
}

/// The default listen set: `0.0.0.0:5060` and, where the kernel has IPv6, `[::]:5060`.
pub fn default_listen() -> Vec<Listen> {
    let mut v = vec![Listen { address: SocketAddr::from(([0, 0, 0, 0], 5060)), transports: both_transports() }];
    if ipv6_available() {
        v.push(Listen { address: "[::]:5060".parse().expect("literal"), transports: both_transports() });
    }
    v
}

/// Whether an IPv6 socket can be bound on this machine (kernel support, not routing).
pub fn ipv6_available() -> bool {
    std::net::UdpSocket::bind("[::1]:0").is_ok()
}

/// `[timers]`: RFC 3261 §17.1.1.1 and Table 4.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timers {
    /// T1, the round-trip estimate, in ms (RFC 3261 default 500).
    pub t1_ms: u64,
    /// T2, the cap on non-INVITE request and INVITE response retransmit intervals, in ms (4000).
    pub t2_ms: u64,
    /// T4, how long the network may hold a message, in ms (5000).
    pub t4_ms: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers { t1_ms: 500, t2_ms: 4000, t4_ms: 5000 }
    }
}

impl Timers {
    pub fn t1(&self) -> Duration {
        Duration::from_millis(self.t1_ms)
    }
    pub fn t2(&self) -> Duration {
        Duration::from_millis(self.t2_ms)
    }
    pub fn t4(&self) -> Duration {
        Duration::from_millis(self.t4_ms)
    }
}

/// `[proxy]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Proxy {
    /// How a request is forked to several contacts (RFC 3261 §16.6): all at once, or one after
    /// another in q-value order (§16.6 step 1, RFC 3261 §16.7 "sequential search").
    pub forking: Forking,
    /// When to add Record-Route (RFC 3261 §16.6 step 4).
    pub record_route: RecordRoute,
    /// Forward without transaction state (RFC 3261 §16.11). Forking and failover need state, so a
    /// stateless proxy forwards to the first target only.
    pub stateless: bool,
}

impl Default for Proxy {
    fn default() -> Self {
        Proxy { forking: Forking::Parallel, record_route: RecordRoute::Always, stateless: false }
    }
}

/// `proxy.forking`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forking {
    Parallel,
    Sequential,
}

/// `proxy.record_route`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordRoute {
    /// On every dialog-creating request.
    Always,
    /// Only when the request leaves on another transport or address family than it came in on
    /// (the other side could not reach herald's Via address otherwise).
    CrossTransport,
    /// Never: in-dialog requests go end to end.
    Never,
}

/// `[registrar]`: RFC 3261 §10.3.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Registrar {
    /// Expiry granted when a REGISTER gives none, in seconds (RFC 3261 §10.2.1.1: 3600).
    pub default_expires: u32,
    /// Shorter requested expiries are refused with 423 and Min-Expires (§10.3 step 7). 0 never refuses.
    pub min_expires: u32,
    /// Longer requested expiries are lowered to this (§10.3 step 7).
    pub max_expires: u32,
    /// Bindings one address-of-record may hold; more are refused with 503 + Retry-After.
    pub max_bindings_per_aor: u32,
    /// Whether the domain is part of the address-of-record. `true`: `user@domain` (the port and
    /// transport of the To or Request-URI never are). `false`: the user part alone, as
    /// Kamailio's registrar with `use_domain=0`; `bob@a.example` and `bob@b.example` are then
    /// one user, so a multi-domain setup needs `true`.
    pub use_domain: bool,
}

impl Default for Registrar {
    fn default() -> Self {
        Registrar {
            default_expires: 3600,
            min_expires: 60,
            max_expires: 86_400,
            max_bindings_per_aor: 10,
            use_domain: true,
        }
    }
}

/// `[limits]`: parser bounds ([`herald_sip::Limits`]) and runtime bounds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest message, headers and body, in bytes (UDP cannot carry more than 65,535).
    pub max_message_size: usize,
    /// Header lines per message.
    pub max_headers: usize,
    /// Bytes in one header line, folded continuations included.
    pub max_header_line: usize,
    /// Via values per message (70 hops is the largest legitimate path, RFC 3261 §8.1.1.6).
    pub max_via: usize,
    /// Route plus Record-Route values per message.
    pub max_route: usize,
    /// Bytes in the start line.
    pub max_start_line: usize,
    /// Open TCP connections, all workers together. Connections past it are accepted and closed at
    /// once (so the peer learns quickly and the backlog does not fill).
    pub max_tcp_connections: usize,
    /// Open TCP connections accepted from one IP address. More are accepted and closed at once:
    /// one host cannot take the whole `max_tcp_connections` (or the file descriptors).
    pub max_tcp_connections_per_ip: usize,
    /// A TCP message that has begun to arrive must be complete within this many seconds, or the
    /// connection is closed: a slow sender (slowloris) cannot hold a connection and its buffer.
    pub tcp_incomplete_message_timeout_s: u64,
    /// Transactions held, all shards together, finished ones absorbing retransmissions
    /// included (a call leaves about three for 64*T1 = 32 s). A new request past it gets a
    /// stateless 503 with Retry-After (memory stays bounded whatever the offered load). About
    /// 1 KB each with their share of the call's state (`docs/benchmarks.md`).
    pub max_transactions: usize,
    /// Bytes of SIP messages held by transactions and proxy contexts, all shards together:
    /// requests waiting for a final response (the received one and each branch's forwarded
    /// copy), final responses collected from forks, responses kept for retransmission. A count
    /// of transactions alone lets each hold up to a 64 KB message; past this, new requests get
    /// the same stateless 503 as past `max_transactions`.
    pub max_held_bytes: usize,
    /// Transactions one source (an IPv4 address or an IPv6 /64) may hold, as counted by the
    /// runtime's per-source budget (`dispatch::source_budget`): past it, its new requests get
    /// the stateless 503 while other sources are served. Unset: `max_transactions / 64`.
    /// `[flood] trusted` sources, and every source while `[flood]` is off, are exempt.
    #[serde(deserialize_with = "at_least_one")]
    pub max_transactions_per_source: Option<usize>,
    /// Bytes of held messages one source may account for (as `max_transactions_per_source`).
    /// Unset: `max_held_bytes / 64`, and at least room for two largest messages with their
    /// forwarded copies (`4 * max_message_size`).
    #[serde(deserialize_with = "at_least_one")]
    pub max_held_bytes_per_source: Option<usize>,
    /// A TCP connection with no bytes in either direction for this many seconds is closed. Clients
    /// keep connections open with CRLF keep-alives (RFC 5626 §4.4.1).
    pub tcp_idle_timeout_s: u64,
    /// Bytes queued for writing on one TCP connection. A peer that does not read past this has
    /// its connection closed (TCP has no retransmission by herald to fall back on).
    pub tcp_write_queue_bytes: usize,
    /// Messages waiting for one worker's loop: read from its TCP connections, or UDP messages
    /// handed over by a backed-up receiver. When full, the connection readers and receivers wait
    /// (back-pressure). Otherwise UDP messages are handled where read.
    pub inbox_capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let sip = herald_sip::Limits::default();
        Limits {
            max_message_size: sip.max_message_size,
            max_headers: sip.max_headers,
            max_header_line: sip.max_header_line,
            max_via: sip.max_via,
            max_route: sip.max_route,
            max_start_line: sip.max_start_line,
            max_tcp_connections: 65_536,
            max_tcp_connections_per_ip: 256,
            tcp_incomplete_message_timeout_s: 10,
            max_transactions: 500_000,
            max_held_bytes: 1 << 30,
            max_transactions_per_source: None,
            max_held_bytes_per_source: None,
            tcp_idle_timeout_s: 300,
            tcp_write_queue_bytes: 256 * 1024,
            inbox_capacity: 4096,
        }
    }
}

/// A per-source budget: when given, at least 1 (0 would refuse every untrusted source).
fn at_least_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(Some(n)),
    }
}

impl Limits {
    /// `max_transactions_per_source`, or its default: 1/64 of the global budget (issue 16:
    /// sixteen sources filled the global one; each now holds at most a small share of it).
    pub fn transactions_per_source(&self) -> usize {
        self.max_transactions_per_source.unwrap_or((self.max_transactions / 64).max(1))
    }

    /// `max_held_bytes_per_source`, or its default: 1/64 of `max_held_bytes`, but room for two
    /// messages of the largest size, each received and forwarded.
    pub fn held_bytes_per_source(&self) -> usize {
        self.max_held_bytes_per_source.unwrap_or((self.max_held_bytes / 64).max(4 * self.max_message_size))
    }

    /// The parser's share of the limits.
    pub fn sip(&self) -> herald_sip::Limits {
        herald_sip::Limits {
            max_message_size: self.max_message_size,
            max_headers: self.max_headers,
            max_header_line: self.max_header_line,
            max_via: self.max_via,
            max_route: self.max_route,
            max_start_line: self.max_start_line,
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter such as
    /// `info,herald_server=debug`. The RUST_LOG environment variable overrides it.
    pub level: String,
}

impl Default for Log {
    fn default() -> Self {
        Log { level: "info".into() }
    }
}

/// `[metrics]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Metrics {
    /// `IP:PORT` of the HTTP endpoint that answers `GET /metrics` (OpenMetrics text): per
    /// message type counts, socket queue wait, service time, socket drops. Absent or `""`: no
    /// endpoint, and the workers measure nothing (no clock reads per message; the kernel
    /// timestamps stay on when `[overload]` needs them).
    #[serde(deserialize_with = "optional_socket_addr")]
    pub listen: Option<SocketAddr>,
}

/// `""` → `None`, `"IP:PORT"` → `Some`.
pub(super) fn optional_socket_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Ok(None);
    }
    s.trim().parse().map(Some).map_err(|_| {
        serde::de::Error::custom(format!("'{s}' is not IP:PORT (IPv6 in brackets), or \"\" for no endpoint"))
    })
}

impl Config {
    /// The domains herald serves: `domains` when given, else the host name and every address
    /// herald listens on (wildcards expanded to the machine's interface addresses).
    pub fn effective_domains(&self) -> Vec<String> {
        if !self.domains.is_empty() {
            return self.domains.clone();
        }
        let mut out: Vec<String> = Vec::new();
        let mut push = |s: String| {
            if !out.iter().any(|o| o.eq_ignore_ascii_case(&s)) {
                out.push(s);
            }
        };
        if let Some(h) = hostname() {
            push(h);
        }
        let interfaces = interface_addresses();
        for l in &self.listen {
            let ip = l.address.ip();
            if ip.is_unspecified() {
                for a in interfaces.iter().filter(|a| a.is_ipv4() == ip.is_ipv4()) {
                    push(host_literal(*a));
                }
            } else {
                push(host_literal(ip));
            }
        }
        out
    }
}

impl Config {
    /// Names that designate this proxy besides its domains: the host name, `localhost` (when
    /// a listener is on a loopback or wildcard address) and `aliases`.
    pub fn own_names(&self) -> Vec<String> {
        let mut out: Vec<String> = hostname().into_iter().collect();
        if self.listen.iter().any(|l| l.address.ip().is_unspecified() || l.address.ip().is_loopback()) {
            out.push("localhost".into());
        }
        out.extend(self.aliases.iter().cloned());
        out
    }
}

/// An IP as written in a SIP URI host (IPv6 in brackets, RFC 3261 §25.1).
fn host_literal(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}
