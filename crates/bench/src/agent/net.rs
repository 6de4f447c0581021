//! The generator's sockets: non-blocking UDP with recvmmsg(2)/sendmmsg(2) batching, or one TCP
//! connection to the proxy, optionally inside TLS ([`super::tls`], RFC 3261 §26.2), that carries
//! SIP framed by Content-Length (RFC 3261 §18.3) or in WebSocket messages (RFC 7118,
//! [`super::ws`]): see [`StreamCodec`]. Both ends of the generator (callers, callees) own one
//! endpoint each; the event loop polls them with ppoll(2).
//!
//! Memory is bounded: a UDP send queue or TCP write buffer that grows past its limit makes
//! further sends fail (the call is counted as a transport failure), and the stream framer rejects
//! a message larger than the parser limits.

pub use super::framing::Incoming;
use super::framing::{MAX_TCP_BUFFER, STREAM_CHUNK};
use super::router::Mailbox;
use super::stream_codec::StreamCodec;
use super::tls::TlsEndpoint;
use super::tls_config::TlsClient;
use bytes::{Bytes, BytesMut};
use herald_sip::{Framing, Limits};
use herald_sys::{RecvBatch, Wait, BATCH};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// Receive slot size: the largest UDP payload.
const SLOT: usize = 65_535;
/// Queued datagrams beyond which sends fail instead of buffering more.
const MAX_UDP_QUEUE: usize = 65_536;
/// Room beyond which a UDP endpoint's receive buffer is not kept for the next batch (a full
/// batch of 1-KiB datagrams takes 32 KiB; one of the largest datagrams, 2 MiB).
const MAX_KEPT_RECEIVE_BUFFER: usize = 1 << 20;

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

/// A connected, non-blocking TCP stream from `ip` to `peer` (Nagle off: SIP messages are small
/// and latency is what the generator measures).
fn connect_stream(ip: std::net::IpAddr, peer: SocketAddr) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(peer), socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    socket.connect_timeout(&peer.into(), Duration::from_secs(5))?;
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// A UDP socket bound to `addr`, non-blocking, with large kernel buffers so that a burst does
/// not overflow the receive queue of the generator itself, and kernel receive stamps.
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    let s2 = socket2::SockRef::from(&socket);
    let _ = s2.set_recv_buffer_size(8 << 20);
    let _ = s2.set_send_buffer_size(8 << 20);
    // Kernel receive stamps keep latencies exact although the loop reads a socket up to one
    // scheduling quantum after a datagram arrived (see the event loop's `step`).
    let _ = herald_sys::enable_rx_timestamps(&socket);
    Ok(socket)
}

pub struct UdpEndpoint {
    socket: UdpSocket,
    local: SocketAddr,
    queue: Vec<(Bytes, SocketAddr)>,
    input: Input,
    /// The buffer received datagrams are copied into and split from, kept from batch to batch:
    /// the messages of a batch are handled and dropped before the next one is read, so
    /// `reserve` finds the buffer unshared again and reuses it where a new one cost an
    /// allocation, and the first split of it a second one, per batch (~400 instructions a
    /// call at 50 calls/s, where a batch holds one or two datagrams; callgrind).
    received: BytesMut,
}

/// Where a UDP endpoint's input comes from.
enum Input {
    /// Its own reads of the socket.
    Socket(RecvBatch),
    /// What the router of a socket shared by several event loops posted for this one.
    Mailbox(Arc<Mailbox>),
}

impl UdpEndpoint {
    fn flush(&mut self) {
        let mut sent_total = 0;
        loop {
            let (n, err) = herald_sys::send_batch(&self.socket, &self.queue[sent_total..], Wait::Never);
            sent_total += n;
            let Some(err) = err else { break };
            match err.kind() {
                io::ErrorKind::WouldBlock => break, // retried when poll says writable
                io::ErrorKind::Interrupted => continue,
                // A datagram the kernel refuses (e.g. ICMP-reported unreachable on a previous
                // send): drop it; the transaction timers account for the loss.
                _ => sent_total += 1,
            }
        }
        self.queue.drain(..sent_total);
    }

    /// Drains the socket: recvmmsg until a batch comes back less than full (then the queue is
    /// empty, so no extra call just to see EAGAIN).
    fn receive(&mut self, out: &mut Vec<Incoming>) {
        let recv = match &mut self.input {
            Input::Socket(recv) => recv,
            Input::Mailbox(mailbox) => return mailbox.take(out),
        };
        loop {
            // EAGAIN (drained) or an error such as ECONNREFUSED from ICMP: try later.
            let Ok(n) = recv.recv(&self.socket, Wait::Never) else { return };
            // The batch's payloads copied into one buffer that each message is split from: no
            // allocation per datagram, and none per batch while the buffer is not shared (see
            // `received`). Sized by a guess (walking the batch once more to add up the lengths
            // parses its control messages again); a batch that outgrows it gets one more.
            let batch = &mut self.received;
            if batch.capacity() > MAX_KEPT_RECEIVE_BUFFER {
                // A burst of large datagrams grew it: not held for the rest of the run.
                *batch = BytesMut::new();
            }
            batch.reserve(n * 1024);
            for d in recv.iter() {
                if let Some(from) = d.source {
                    batch.extend_from_slice(d.payload);
                    out.push(Incoming { bytes: batch.split().freeze(), from, kernel_ns: d.kernel_ns });
                }
            }
            if n < BATCH {
                return;
            }
        }
    }
}

pub struct TcpEndpoint {
    stream: TcpStream,
    local: SocketAddr,
    peer: SocketAddr,
    input: BytesMut,
    output: Vec<u8>,
    /// Read buffer, kept: a fresh zeroed array per read was a 16 KiB memset each time.
    chunk: Box<[u8]>,
    codec: StreamCodec,
    closed: bool,
    error: Option<String>,
}

impl TcpEndpoint {
    fn flush(&mut self) {
        while !self.output.is_empty() && !self.closed {
            match self.stream.write(&self.output) {
                Ok(0) => self.closed = true,
                Ok(n) => {
                    self.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
        }
    }

    fn receive(&mut self, out: &mut Vec<Incoming>, limits: &Limits) {
        while !self.closed {
            match self.stream.read(&mut self.chunk) {
                Ok(0) => {
                    self.closed = true;
                    if self.codec.is_upgrading() {
                        self.error = Some("WebSocket: connection closed before the upgrade was answered".into());
                    }
                }
                Ok(n) => self.input.extend_from_slice(&self.chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
            // Cut messages as they complete so that the buffer never holds more than one
            // message's limit of unframed bytes.
            if let Err(why) = self.codec.receive(&mut self.input, limits, self.peer, out, &mut self.output) {
                // What the codec answered last (a WebSocket close reply) still goes out, once,
                // without waiting; the connection is over either way.
                let _ = self.stream.write(&self.output);
                self.closed = true;
                self.error = Some(why);
            }
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
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, TcpListener};

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn a_kept_receive_buffer_is_reused_only_when_no_message_holds_it() {
        let mut a = Endpoint::udp(LO).unwrap();
        let mut b = Endpoint::udp(LO).unwrap();
        let mut round = |fill: u8, got: &mut Vec<Incoming>| {
            assert!(a.send(Bytes::from(vec![fill; 300]), b.local_addr()));
            a.flush();
            for _ in 0..100 {
                wait([&b], 10_000);
                b.receive(got, &Limits::default());
                if !got.is_empty() {
                    break;
                }
            }
            got.pop().expect("received").bytes
        };
        let mut got = Vec::new();
        let first = round(1, &mut got);
        let at = first.as_ptr();
        // Still held: the next datagram goes elsewhere, and the held one is unchanged.
        let second = round(2, &mut got);
        assert_ne!(second.as_ptr(), at);
        assert_eq!(first[..], [1u8; 300][..]);
        assert_eq!(second[..], [2u8; 300][..]);
        // Both dropped: the buffer of the last batch is taken again from its start.
        let at = second.as_ptr();
        drop((first, second));
        let third = round(3, &mut got);
        assert_eq!(third.as_ptr(), at);
        assert_eq!(third[..], [3u8; 300][..]);
    }

    #[test]
    fn udp_batches_round_trip() {
        let mut a = Endpoint::udp(LO).unwrap();
        let mut b = Endpoint::udp(LO).unwrap();
        for i in 0..40u8 {
            assert!(a.send(Bytes::from(vec![i; 100]), b.local_addr()));
        }
        a.flush();
        assert!(!a.wants_write());
        let mut got = Vec::new();
        for _ in 0..100 {
            wait([&b], 10_000);
            b.receive(&mut got, &Limits::default());
            if got.len() == 40 {
                break;
            }
        }
        assert_eq!(got.len(), 40);
        assert_eq!(got[39].bytes[..], [39u8; 100][..]);
        assert_eq!(got[0].from, a.local_addr());
        // SO_TIMESTAMPNS: every datagram carries the kernel's CLOCK_REALTIME receive time.
        let realtime = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        for g in &got {
            let stamp = g.kernel_ns.expect("SCM_TIMESTAMPNS");
            assert!(stamp <= realtime && realtime - stamp < 10_000_000_000, "{stamp} vs {realtime}");
        }
    }

    #[test]
    fn tcp_frames_messages_and_detects_close() {
        let listener = TcpListener::bind((LO, 0)).unwrap();
        let mut client = Endpoint::tcp(LO, listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let msg = b"OPTIONS sip:x SIP/2.0\r\nContent-Length: 2\r\n\r\nhi";
        server.write_all(&[&msg[..], b"\r\n", &msg[..10]].concat()).unwrap();
        let mut got = Vec::new();
        for _ in 0..100 {
            wait([&client], 10_000);
            client.receive(&mut got, &Limits::default());
            if !got.is_empty() {
                break;
            }
        }
        assert_eq!(got.len(), 1);
        assert_eq!(&got[0].bytes[..], &msg[..]);
        drop(server);
        for _ in 0..100 {
            wait([&client], 10_000);
            client.receive(&mut got, &Limits::default());
            if client.is_closed() {
                break;
            }
        }
        assert!(client.is_closed());
        assert!(!client.send(Bytes::from_static(b"x"), listener.local_addr().unwrap()));
    }
}
