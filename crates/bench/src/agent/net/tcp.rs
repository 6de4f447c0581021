//! A TCP endpoint of the generator: one non-blocking connection to the proxy carrying SIP framed
//! by Content-Length (RFC 3261 §18.3) or WebSocket messages (RFC 7118), per its codec.

use super::Incoming;
use crate::agent::stream_codec::StreamCodec;
use bytes::BytesMut;
use herald_sip::Limits;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A connected, non-blocking TCP stream from `ip` to `peer` (Nagle off: SIP messages are small
/// and latency is what the generator measures).
pub(super) fn connect_stream(ip: std::net::IpAddr, peer: SocketAddr) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(peer), socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    socket.connect_timeout(&peer.into(), Duration::from_secs(5))?;
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

pub struct TcpEndpoint {
    pub(super) stream: TcpStream,
    pub(super) local: SocketAddr,
    pub(super) peer: SocketAddr,
    pub(super) input: BytesMut,
    pub(super) output: Vec<u8>,
    /// Read buffer, kept: a fresh zeroed array per read was a 16 KiB memset each time.
    pub(super) chunk: Box<[u8]>,
    pub(super) codec: StreamCodec,
    pub(super) closed: bool,
    pub(super) error: Option<String>,
}

impl TcpEndpoint {
    pub(super) fn flush(&mut self) {
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

    pub(super) fn receive(&mut self, out: &mut Vec<Incoming>, limits: &Limits) {
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
