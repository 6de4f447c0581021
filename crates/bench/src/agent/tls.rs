//! SIP over TLS (RFC 3261 §26.2, RFC 5630): one non-blocking TCP connection to the proxy wrapped
//! in a rustls [`ClientConnection`] driven through its low-level API, so that it fits the
//! generator's single-threaded ppoll loop like plain TCP: `read_tls` + `process_new_packets` +
//! `reader()` when the socket is readable, `writer()` + `write_tls` when there is something to
//! write, and POLLOUT only while rustls has records to send. The handshake is just the first
//! bytes of that exchange, so it needs no thread and no blocking call.
//!
//! Failures (handshake, certificate, alerts, a peer that closes) close the endpoint and keep
//! rustls's own wording in [`TlsEndpoint::error`]; the event loop turns it into the failure reason of
//! every call and registration that was lost with the connection. Memory is bounded as for TCP:
//! plaintext waiting for rustls is capped at `MAX_TCP_BUFFER`, rustls's own buffers at its
//! default limit (64 KiB), and received plaintext is framed as soon as it is decrypted.

use super::framing::{Incoming, MAX_TCP_BUFFER, STREAM_CHUNK};
use super::stream_codec::StreamCodec;
use super::tls_config::TlsClient;
use bytes::{Bytes, BytesMut};
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
    /// Buffer of decrypted reads, kept: a fresh zeroed array per read was a 16 KiB memset.
    chunk: Box<[u8]>,
    /// What the plaintext carries: SIP framed by Content-Length, or WebSocket (`wss`).
    codec: StreamCodec,
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
            chunk: vec![0; STREAM_CHUNK].into_boxed_slice(),
            codec: StreamCodec::Sip,
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
    pub fn send(&mut self, bytes: Bytes) -> bool {
        if self.closed || self.output.len() + bytes.len() > MAX_TCP_BUFFER {
            return false;
        }
        self.codec.send(bytes, &mut self.output)
    }

    pub(super) fn codec(&self) -> &StreamCodec {
        &self.codec
    }

    /// For putting another codec on the connection before anything is sent.
    pub(super) fn codec_and_output(&mut self) -> (&mut StreamCodec, &mut Vec<u8>) {
        (&mut self.codec, &mut self.output)
    }

    /// Ends the connection politely: the codec's goodbye (a WebSocket close frame), then a
    /// TLS close_notify alert (RFC 8446 §6.1), written as far as the socket takes them now.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.codec.close(&mut self.output);
        self.flush();
        if !self.closed && !self.conn.is_handshaking() {
            self.conn.send_close_notify();
            self.flush();
        }
        self.closed = true;
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
                match self.conn.reader().read(&mut self.chunk) {
                    // close_notify: what came before it is still good and framed below.
                    Ok(0) => {
                        self.fail("TLS: connection closed by the peer (close_notify)".into());
                        break;
                    }
                    Ok(n) => self.input.extend_from_slice(&self.chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        self.fail(format!("TLS: {e}"));
                        break;
                    }
                }
            }
            if let Err(why) = self.codec.receive(&mut self.input, limits, self.peer, out, &mut self.output) {
                // What the codec answered last (a WebSocket close reply) still goes out, once,
                // without waiting.
                let _ = self.conn.writer().write(&self.output);
                let _ = self.conn.write_tls(&mut self.stream);
                let why = if matches!(self.codec, StreamCodec::Sip) { format!("TLS: {why}") } else { why };
                self.fail(why);
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
    pub(super) fn expire_handshake(&mut self) {
        self.handshake_deadline = Instant::now();
    }
}
