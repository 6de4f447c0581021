//! The generator's sockets: non-blocking UDP with recvmmsg(2)/sendmmsg(2) batching, or one TCP
//! connection to the proxy, optionally inside TLS ([`super::tls`], RFC 3261 §26.2), that carries
//! SIP framed by Content-Length (RFC 3261 §18.3) or in WebSocket messages (RFC 7118,
//! [`super::ws`]): see [`StreamCodec`]. Both ends of the generator (callers, callees) own one
//! endpoint each; the event loop polls them with ppoll(2).
//!
//! Memory is bounded: a UDP send queue or TCP write buffer that grows past its limit makes
//! further sends fail (the call is counted as a transport failure), and the stream framer rejects
//! a message larger than the parser limits.

mod tcp;
mod udp;

pub use super::framing::Incoming;
use super::framing::{MAX_TCP_BUFFER, STREAM_CHUNK};
use super::router::Mailbox;
use super::stream_codec::StreamCodec;
use super::tls::TlsEndpoint;
use super::tls_config::TlsClient;
use bytes::{Bytes, BytesMut};
use herald_sip::{Framing, Limits};
use herald_sys::RecvBatch;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;
use tcp::connect_stream;
pub use tcp::TcpEndpoint;
pub use udp::{udp_socket, UdpEndpoint};
use udp::{Input, MAX_UDP_QUEUE};

/// Receive slot size: the largest UDP payload (also the first room of a stream's input).
const SLOT: usize = 65_535;

pub enum Endpoint {
    Udp(UdpEndpoint),
    Tcp(TcpEndpoint),
    /// Boxed: a rustls connection is far larger than the other variants.
    Tls(Box<TlsEndpoint>),
}

impl Endpoint {
    /// A UDP socket bound to `ip` on a free port, with large kernel buffers so that a burst does
    /// not overflow the receive queue of the generator itself.
    pub fn udp(ip: std::net::IpAddr) -> io::Result<Endpoint> {
        Endpoint::udp_on(SocketAddr::new(ip, 0))
    }

    /// [`Endpoint::udp`] bound to `addr` (port 0: a free one).
    pub fn udp_on(addr: SocketAddr) -> io::Result<Endpoint> {
        let socket = udp_socket(addr)?;
        let local = socket.local_addr()?;
        let input = Input::Socket(RecvBatch::new(SLOT));
        Ok(Endpoint::Udp(UdpEndpoint { socket, local, queue: Vec::new(), input, received: BytesMut::new() }))
    }

    /// An endpoint that sends from `socket`, shared with other event loops, and reads what a
    /// [`super::router::Router`] posts to `mailbox` (`--single-socket --threads N`).
    pub fn routed(socket: UdpSocket, mailbox: Arc<Mailbox>) -> io::Result<Endpoint> {
        let local = socket.local_addr()?;
        let input = Input::Mailbox(mailbox);
        Ok(Endpoint::Udp(UdpEndpoint { socket, local, queue: Vec::new(), input, received: BytesMut::new() }))
    }

    /// A second endpoint on this UDP socket (the same file, its own send queue); None for a
    /// stream. Whichever of the two reads a datagram gets it.
    pub fn shared_udp(&self) -> Option<io::Result<Endpoint>> {
        let Endpoint::Udp(u) = self else { return None };
        let socket = match u.socket.try_clone() {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        let input = match &u.input {
            Input::Socket(_) => Input::Socket(RecvBatch::new(SLOT)),
            Input::Mailbox(mailbox) => Input::Mailbox(mailbox.clone()),
        };
        let received = BytesMut::new();
        Some(Ok(Endpoint::Udp(UdpEndpoint { socket, local: u.local, queue: Vec::new(), input, received })))
    }

    /// A TCP connection from `ip` to `peer`.
    pub fn tcp(ip: std::net::IpAddr, peer: SocketAddr) -> io::Result<Endpoint> {
        let stream = connect_stream(ip, peer)?;
        let local = stream.local_addr()?;
        Ok(Endpoint::Tcp(TcpEndpoint {
            stream,
            local,
            peer,
            input: BytesMut::with_capacity(SLOT),
            output: Vec::new(),
            chunk: vec![0; STREAM_CHUNK].into_boxed_slice(),
            codec: StreamCodec::Sip,
            closed: false,
            error: None,
        }))
    }

    /// A WebSocket connection (RFC 7118) from `ip` to `peer`, over TLS when `tls` is given
    /// (`wss`); the upgrade runs in the event loop like a TLS handshake.
    pub fn ws(
        ip: std::net::IpAddr,
        peer: SocketAddr,
        tls: Option<&TlsClient>,
        limits: &Limits,
    ) -> io::Result<Endpoint> {
        let secure = tls.is_some();
        let mut endpoint = match tls {
            Some(client) => Endpoint::tls(ip, peer, client)?,
            None => Endpoint::tcp(ip, peer)?,
        };
        let (codec, output) = match &mut endpoint {
            Endpoint::Tcp(t) => (&mut t.codec, &mut t.output),
            Endpoint::Tls(t) => t.codec_and_output(),
            Endpoint::Udp(_) => unreachable!("opened as a stream above"),
        };
        *codec = StreamCodec::ws(peer, secure, limits, output).map_err(io::Error::other)?;
        Ok(endpoint)
    }

    /// A TLS connection from `ip` to `peer`; the handshake runs in the event loop like any other
    /// I/O (its failure closes the endpoint with the reason in [`Endpoint::error`]).
    pub fn tls(ip: std::net::IpAddr, peer: SocketAddr, client: &TlsClient) -> io::Result<Endpoint> {
        Ok(Endpoint::Tls(Box::new(TlsEndpoint::connect(connect_stream(ip, peer)?, peer, client)?)))
    }

    pub fn local_addr(&self) -> SocketAddr {
        match self {
            Endpoint::Udp(u) => u.local,
            Endpoint::Tcp(t) => t.local,
            Endpoint::Tls(t) => t.local,
        }
    }

    pub fn is_stream(&self) -> bool {
        !matches!(self, Endpoint::Udp(_))
    }

    fn codec(&self) -> Option<&StreamCodec> {
        match self {
            Endpoint::Udp(_) => None,
            Endpoint::Tcp(t) => Some(&t.codec),
            Endpoint::Tls(t) => Some(t.codec()),
        }
    }

    fn is_ws(&self) -> bool {
        matches!(self.codec(), Some(StreamCodec::Ws(_)))
    }

    /// How the messages this endpoint receives are delimited (see [`StreamCodec::framing`]).
    pub fn framing(&self) -> Framing {
        self.codec().map_or(Framing::Datagram, StreamCodec::framing)
    }

    /// The transport token of Via (RFC 3261 §18.2.1, §20.42; RFC 7118 §5.2 for WS and WSS).
    pub fn via_transport(&self) -> &'static str {
        match (self, self.is_ws()) {
            (Endpoint::Udp(_), _) => "UDP",
            (Endpoint::Tcp(_), false) => "TCP",
            (Endpoint::Tcp(_), true) => "WS",
            (Endpoint::Tls(_), false) => "TLS",
            (Endpoint::Tls(_), true) => "WSS",
        }
    }

    /// The host (and port) of Via sent-by and of Contact URIs. A WebSocket client cannot accept
    /// connections, so RFC 7118 §5 has it name a host under `.invalid` that nobody can resolve
    /// (as browser phones do): the proxy answers over the connection, and reaches a registered
    /// contact over the connection its REGISTER came on. The name is made from the local
    /// address, so the caller and callee sides differ.
    pub fn sent_by(&self) -> String {
        let local = self.local_addr();
        if !self.is_ws() {
            return local.to_string();
        }
        let ip = match local.ip() {
            std::net::IpAddr::V4(a) => u128::from(u32::from(a)),
            std::net::IpAddr::V6(a) => u128::from(a),
        };
        format!("{ip:x}-{:x}.invalid", local.port())
    }

    /// The transport parameter of this side's Contact URIs (RFC 3261 §19.1.1). TLS contacts
    /// stay `sip:` with `;transport=tls` rather than `sips:`: the proxy reaches our callee back
    /// over the very connection the REGISTER came in on (connection reuse, as RFC 5626 does and
    /// herald does for TCP), so the URI only has to name that flow, and a `sips:` Contact would
    /// also demand TLS on every hop behind the proxy (RFC 5630 §3.1.3), which the generator
    /// neither needs nor can check.
    pub fn uri_param(&self) -> &'static str {
        match (self, self.is_ws()) {
            (Endpoint::Udp(_), _) => "",
            (Endpoint::Tcp(_), false) => ";transport=tcp",
            (Endpoint::Tcp(_), true) => ";transport=ws",
            (Endpoint::Tls(_), false) => ";transport=tls",
            (Endpoint::Tls(_), true) => ";transport=wss",
        }
    }

    pub fn fd(&self) -> RawFd {
        match self {
            Endpoint::Udp(u) => match &u.input {
                Input::Socket(_) => u.socket.as_raw_fd(),
                Input::Mailbox(mailbox) => mailbox.fd(),
            },
            Endpoint::Tcp(t) => t.stream.as_raw_fd(),
            Endpoint::Tls(t) => t.fd(),
        }
    }

    /// A UDP endpoint with nothing queued: flushing it would do nothing.
    pub fn is_drained(&self) -> bool {
        matches!(self, Endpoint::Udp(u) if u.queue.is_empty())
    }

    /// Something is waiting to be written.
    pub fn wants_write(&self) -> bool {
        match self {
            Endpoint::Udp(u) => !u.queue.is_empty(),
            Endpoint::Tcp(t) => !t.output.is_empty(),
            Endpoint::Tls(t) => t.wants_write(),
        }
    }

    /// Queues one message for `dest` (ignored on TCP: everything goes over the connection to the
    /// proxy, which then acts as the outbound proxy of RFC 3261 §8.1.2). False: the queue is
    /// full or the connection is gone.
    pub fn send(&mut self, bytes: Bytes, dest: SocketAddr) -> bool {
        match self {
            Endpoint::Udp(u) => {
                if u.queue.len() >= MAX_UDP_QUEUE {
                    return false;
                }
                u.queue.push((bytes, dest));
                true
            }
            Endpoint::Tcp(t) => {
                if t.closed || t.output.len() + bytes.len() > MAX_TCP_BUFFER {
                    return false;
                }
                t.codec.send(bytes, &mut t.output)
            }
            Endpoint::Tls(t) => t.send(bytes),
        }
    }

    /// Writes what is queued as far as the kernel takes it.
    pub fn flush(&mut self) {
        match self {
            Endpoint::Udp(u) => u.flush(),
            Endpoint::Tcp(t) => t.flush(),
            Endpoint::Tls(t) => t.flush(),
        }
    }

    /// Ends a stream connection politely at the end of a run (a WebSocket close frame, a TLS
    /// close_notify), written as far as the socket takes it without waiting; UDP has nothing
    /// to say. The endpoint is closed afterwards.
    pub fn close(&mut self) {
        match self {
            Endpoint::Udp(_) => {}
            Endpoint::Tcp(t) => {
                if !t.closed {
                    t.codec.close(&mut t.output);
                    t.flush();
                    t.closed = true;
                }
            }
            Endpoint::Tls(t) => t.close(),
        }
    }

    /// Reads everything available into `out`.
    pub fn receive(&mut self, out: &mut Vec<Incoming>, limits: &Limits) {
        match self {
            Endpoint::Udp(u) => u.receive(out),
            Endpoint::Tcp(t) => t.receive(out, limits),
            Endpoint::Tls(t) => t.receive(out, limits),
        }
    }

    /// The stream connection was closed or broke (never true for UDP).
    pub fn is_closed(&self) -> bool {
        match self {
            Endpoint::Udp(_) => false,
            Endpoint::Tcp(t) => t.closed,
            Endpoint::Tls(t) => t.is_closed(),
        }
    }

    /// The connection is still being set up (a TLS handshake or a WebSocket upgrade in
    /// progress).
    pub fn is_connecting(&self) -> bool {
        let handshaking = matches!(self, Endpoint::Tls(t) if t.is_handshaking());
        !self.is_closed() && (handshaking || self.codec().is_some_and(StreamCodec::is_upgrading))
    }

    /// Why the connection closed, when the transport knows more than "closed": the TLS
    /// handshake, certificate or alert error as rustls words it, a refused WebSocket upgrade, a
    /// lost stream framing. None on UDP, and on TCP closed by the peer, whose failures keep the
    /// plain reason "transport".
    pub fn error(&self) -> Option<&str> {
        match self {
            Endpoint::Tls(t) => t.error(),
            Endpoint::Tcp(t) => t.error.as_deref(),
            Endpoint::Udp(_) => None,
        }
    }
}

/// Waits until one of `endpoints` is readable (or writable, when it has queued output) or
/// `timeout_us` passed; sub-millisecond timeouts are honoured (ppoll takes nanoseconds). Returns,
/// per endpoint, whether it has input (or a hang-up or error) to read, so that the loop reads
/// only sockets that have something. With no endpoints it simply sleeps.
pub fn wait<const N: usize>(endpoints: [&Endpoint; N], timeout_us: u64) -> [bool; N] {
    let mut fds = endpoints.map(|e| libc::pollfd {
        // A negative fd is ignored by ppoll (a closed stream is not polled).
        fd: if e.is_closed() { -1 } else { e.fd() },
        events: libc::POLLIN | if e.wants_write() { libc::POLLOUT } else { 0 },
        revents: 0,
    });
    let n = herald_sys::poll(&mut fds, Duration::from_micros(timeout_us)).unwrap_or(0);
    fds.map(|p| n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
}

#[cfg(test)]
mod tests;
