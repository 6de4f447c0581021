//! SIP over TLS (RFC 3261 §26.2, RFC 5630): one non-blocking TCP connection to the proxy wrapped
//! in a rustls [`ClientConnection`] driven through its low-level API, so that it fits the
//! generator's single-threaded ppoll loop like plain TCP: `read_tls` + `process_new_packets` +
//! `reader()` when the socket is readable, `writer()` + `write_tls` when there is something to
//! write, and POLLOUT only while rustls has records to send. The handshake is just the first
//! bytes of that exchange, so it needs no thread and no blocking call.
//!
//! Failures (handshake, certificate, alerts, a peer that closes) close the endpoint and keep
//! rustls's own wording in [`TlsEndpoint::error`]; the engine turns it into the failure reason of
//! every call and registration that was lost with the connection. Memory is bounded as for TCP:
//! plaintext waiting for rustls is capped at `MAX_TCP_BUFFER`, rustls's own buffers at its
//! default limit (64 KiB), and received plaintext is framed as soon as it is decrypted.

use super::net::{cut_frames, Incoming, MAX_TCP_BUFFER, STREAM_CHUNK};
use super::tls_config::TlsClient;
use bytes::BytesMut;
use herald_sip::Limits;
use rustls::ClientConnection;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// A handshake not finished by then fails the connection: a peer that accepts TCP but never
/// speaks TLS (a plain SIP/TCP port, say) would otherwise only show up as 64·T1 timeouts.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct TlsEndpoint {
    stream: TcpStream,
    conn: ClientConnection,
    pub(super) local: SocketAddr,
    peer: SocketAddr,
    /// Decrypted bytes not yet framed into messages.
    input: BytesMut,
    /// Plaintext not yet handed to rustls (it takes more only as its records go out).
    output: Vec<u8>,
    handshake_deadline: Instant,
    closed: bool,
    error: Option<String>,
}

impl TlsEndpoint {
    /// Starts the handshake on a connected, non-blocking `stream` (the ClientHello is queued
    /// and goes out with the first flush).
    pub fn connect(stream: TcpStream, peer: SocketAddr, client: &TlsClient) -> io::Result<TlsEndpoint> {
        let conn = ClientConnection::new(client.config.clone(), client.server_name.clone())
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        Ok(TlsEndpoint {
            local: stream.local_addr()?,
            stream,
            conn,
            peer,
            input: BytesMut::with_capacity(STREAM_CHUNK),
            output: Vec::new(),
            handshake_deadline: Instant::now() + HANDSHAKE_TIMEOUT,
            closed: false,
            error: None,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The handshake has not finished yet (and has not failed either).
    pub fn is_handshaking(&self) -> bool {
        !self.closed && self.conn.is_handshaking()
    }

    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Records are waiting for the socket. Plaintext waiting for the handshake does not count:
    /// polling for POLLOUT then would only spin on a writable socket until the server answers.
    pub fn wants_write(&self) -> bool {
        !self.closed && (self.conn.wants_write() || (!self.output.is_empty() && !self.conn.is_handshaking()))
    }

    /// Queues one message; false when the connection is gone or the buffer is full.
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        if self.closed || self.output.len() + bytes.len() > MAX_TCP_BUFFER {
            return false;
        }
        self.output.extend_from_slice(bytes);
        true
    }

    /// Moves plaintext into rustls and its records onto the socket until one of them is full.
    pub fn flush(&mut self) {
        if !self.closed && self.conn.is_handshaking() && Instant::now() >= self.handshake_deadline {
            self.fail(format!("TLS: handshake not finished within {} s", HANDSHAKE_TIMEOUT.as_secs()));
        }
        while !self.closed {
            if !self.output.is_empty() {
                // Before the handshake ends rustls buffers plaintext up to its limit; after, it
                // encrypts it into records up to the same limit. Either way it may take less.
                match self.conn.writer().write(&self.output) {
                    Ok(n) => drop(self.output.drain(..n)),
                    Err(e) => return self.fail(format!("TLS: {e}")),
                }
            }
            if !self.conn.wants_write() {
                return; // everything is out, or the rest waits for the handshake
            }
            match self.conn.write_tls(&mut self.stream) {
                Ok(0) => self.fail("TLS: connection closed".into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.fail(format!("TLS: {e}")),
            }
        }
    }

    /// Reads, decrypts and frames everything available.
    pub fn receive(&mut self, out: &mut Vec<Incoming>, limits: &Limits) {
        let mut chunk = [0u8; STREAM_CHUNK];
        while !self.closed {
            match self.conn.read_tls(&mut self.stream) {
                Ok(0) => {
                    let when = if self.conn.is_handshaking() { "during the handshake" } else { "by the peer" };
                    return self.fail(format!("TLS: connection closed {when}"));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.fail(format!("TLS: {e}")),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued an alert telling the peer why (RFC 8446 §6.2): try to send it,
                // once, without waiting; the connection is over either way.
                let _ = self.conn.write_tls(&mut self.stream);
                return self.fail(format!("TLS: {e}"));
            }
            loop {
                match self.conn.reader().read(&mut chunk) {
                    // close_notify: what came before it is still good and framed below.
                    Ok(0) => {
                        self.fail("TLS: connection closed by the peer (close_notify)".into());
                        break;
                    }
                    Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        self.fail(format!("TLS: {e}"));
                        break;
                    }
                }
            }
            if !cut_frames(&mut self.input, limits, self.peer, out, &mut self.output) {
                self.fail("TLS: stream framing lost (RFC 3261 §18.3)".into());
            }
        }
    }

    /// Closes the endpoint, keeping the first reason (later ones are consequences).
    fn fail(&mut self, why: String) {
        if !self.closed {
            self.closed = true;
            self.error = Some(why);
        }
    }

    #[cfg(test)]
    fn expire_handshake(&mut self) {
        self.handshake_deadline = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::super::net::{wait, Endpoint};
    use super::super::tls_config::TlsOptions;
    use super::*;
    use bytes::Bytes;
    use rustls::{ServerConfig, ServerConnection, StreamOwned};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use std::net::{IpAddr, Ipv4Addr, TcpListener};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::Arc;

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// A CA (`NAME-ca.pem`) and a server certificate for IP 127.0.0.1 signed by it
    /// (`NAME-server.pem`, `NAME-server.key`), made with the openssl command.
    fn make_pki(dir: &Path, name: &str) {
        let run = |args: &[&str]| {
            let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let (ca, ca_key) = (format!("{name}-ca.pem"), format!("{name}-ca.key"));
        let (crt, key, csr) = (format!("{name}-server.pem"), format!("{name}-server.key"), format!("{name}.csr"));
        let ext = format!("{name}.ext");
        std::fs::write(dir.join(&ext), "subjectAltName=IP:127.0.0.1\n").unwrap();
        let subject = format!("/CN=herald bench {name} test CA");
        run(&[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj",
            &subject,
        ]);
        run(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
        let sign = ["x509", "-req", "-in", &csr, "-CA", &ca, "-CAkey", &ca_key, "-CAcreateserial"];
        run(&[&sign[..], &["-out", &crt, "-extfile", &ext]].concat());
    }

    fn pki_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("herald-bench-tls-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A blocking rustls server on a free loopback port; `serve` runs on the accepted stream.
    fn server(dir: &Path, serve: fn(&mut StreamOwned<ServerConnection, std::net::TcpStream>)) -> SocketAddr {
        let chain: Vec<_> =
            CertificateDer::pem_file_iter(dir.join("good-server.pem")).unwrap().map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_file(dir.join("good-server.key")).unwrap();
        let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let listener = TcpListener::bind((LO, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let config = Arc::new(config);
        std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut stream = StreamOwned::new(ServerConnection::new(config).unwrap(), tcp);
            serve(&mut stream);
        });
        addr
    }

    fn client(dir: &Path, ca: &str, peer: SocketAddr) -> Endpoint {
        let options = TlsOptions { ca: Some(dir.join(ca)), ..Default::default() };
        Endpoint::tls(LO, peer, &options.client(LO).unwrap()).unwrap()
    }

    /// Runs the client's side of the loop until `done` or 5 s.
    fn pump(ep: &mut Endpoint, got: &mut Vec<Incoming>, done: impl Fn(&Endpoint, &[Incoming]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done(ep, got) && Instant::now() < deadline {
            ep.flush();
            if wait([&*ep], 10_000)[0] {
                ep.receive(got, &Limits::default());
            }
        }
    }

    const MSG: &[u8] = b"OPTIONS sip:x SIP/2.0\r\nContent-Length: 2\r\n\r\nhi";

    #[test]
    fn handshake_frames_messages_both_ways_and_answers_pings() {
        let dir = pki_dir("ok");
        make_pki(&dir, "good");
        let peer = server(&dir, |s| {
            // Read one message from the client, then send one back split across records, with
            // an RFC 5626 ping between its halves, and expect the pong.
            let mut buf = vec![0u8; MSG.len()];
            s.read_exact(&mut buf).unwrap();
            assert_eq!(buf, MSG);
            s.write_all(&MSG[..10]).unwrap();
            s.flush().unwrap();
            s.write_all(&MSG[10..]).unwrap();
            s.write_all(b"\r\n\r\n").unwrap();
            s.flush().unwrap();
            let mut pong = [0u8; 2];
            s.read_exact(&mut pong).unwrap();
            assert_eq!(&pong, b"\r\n");
            s.write_all(MSG).unwrap();
            s.conn.send_close_notify();
            s.flush().unwrap();
        });
        let mut ep = client(&dir, "good-ca.pem", peer);
        assert_eq!(ep.via_transport(), "TLS");
        assert_eq!(ep.uri_param(), ";transport=tls");
        assert!(ep.is_stream());
        assert!(ep.send(Bytes::from_static(MSG), peer));
        let mut got = Vec::new();
        pump(&mut ep, &mut got, |ep, got| got.len() == 2 && ep.is_closed());
        assert_eq!(got.len(), 2, "{:?}", ep.error());
        assert!(got.iter().all(|m| &m.bytes[..] == MSG && m.from == peer));
        // The server's close_notify closed us, with a reason; sends now fail.
        assert!(ep.is_closed());
        assert!(ep.error().unwrap().contains("close_notify"), "{:?}", ep.error());
        assert!(!ep.send(Bytes::from_static(MSG), peer));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_untrusted_certificate_closes_with_the_rustls_reason() {
        let dir = pki_dir("wrong-ca");
        make_pki(&dir, "good");
        make_pki(&dir, "other");
        let peer = server(&dir, |s| {
            let mut buf = [0u8; 1];
            let _ = s.read(&mut buf); // the handshake fails in here
        });
        let mut ep = client(&dir, "other-ca.pem", peer);
        assert!(ep.send(Bytes::from_static(MSG), peer));
        let mut got = Vec::new();
        pump(&mut ep, &mut got, |ep, _| ep.is_closed());
        assert!(ep.is_closed());
        assert!(got.is_empty());
        let error = ep.error().unwrap();
        assert!(error.contains("invalid peer certificate") && error.contains("UnknownIssuer"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_peer_that_never_speaks_tls_times_out() {
        let dir = pki_dir("silent");
        make_pki(&dir, "good");
        let listener = TcpListener::bind((LO, 0)).unwrap();
        let mut ep = client(&dir, "good-ca.pem", listener.local_addr().unwrap());
        let (_silent, _) = listener.accept().unwrap();
        ep.flush();
        assert!(!ep.is_closed());
        let Endpoint::Tls(t) = &mut ep else { unreachable!() };
        t.expire_handshake();
        ep.flush();
        assert!(ep.is_closed());
        assert!(ep.error().unwrap().contains("handshake not finished"), "{:?}", ep.error());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
