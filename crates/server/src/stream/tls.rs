//! TLS as a [`Codec`] (RFC 3261 §26.2, RFC 5630): a rustls connection driven sans-IO, as the
//! bench agent does. The loop hands it the socket's bytes (`read_tls`, `process_new_packets`,
//! `reader`) and takes the records to send (`writer`, `write_tls`); the handshake runs inside the
//! same loop, bounded by its deadline.

use super::codec::{append, Codec};
use crate::stats::WorkerStats;
use bytes::{Bytes, BytesMut};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use rustls_pki_types::ServerName;
use std::io::{self, Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// One TLS connection, server or client side.
pub(crate) struct TlsCodec {
    tls: Connection,
    handshake_timeout: Duration,
}

impl TlsCodec {
    /// The server side of an accepted connection.
    pub(crate) fn accept(config: Arc<ServerConfig>, handshake_timeout: Duration) -> Result<TlsCodec, rustls::Error> {
        Ok(TlsCodec { tls: ServerConnection::new(config)?.into(), handshake_timeout })
    }

    /// The client side of a connection herald opened to a next hop that must prove `name`.
    pub(crate) fn connect(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        handshake_timeout: Duration,
    ) -> Result<TlsCodec, rustls::Error> {
        Ok(TlsCodec { tls: ClientConnection::new(config, name)?.into(), handshake_timeout })
    }
}

impl Codec for TlsCodec {
    fn read<R: Read>(&mut self, wire: &mut R, sip: &mut BytesMut) -> io::Result<usize> {
        let n = self.tls.read_tls(wire)?;
        if n == 0 {
            return Ok(0);
        }
        if let Err(e) = self.tls.process_new_packets() {
            // rustls queued an alert for the peer: the loop's close flush sends it.
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        loop {
            match append(&mut self.tls.reader(), sip) {
                // close_notify (RFC 8446 §6.1): the peer is done.
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                Err(e) => return Err(e),
            }
        }
    }

    fn write(&mut self, queued: &[Bytes], skip: usize, wire: &mut dyn Write) -> io::Result<usize> {
        let mut taken = 0;
        if !self.tls.is_handshaking() {
            for (i, item) in queued.iter().enumerate() {
                let bytes = if i == 0 { &item[skip..] } else { &item[..] };
                let n = self.tls.writer().write(bytes)?;
                taken += n;
                if n < bytes.len() {
                    break; // rustls's send buffer is full: the rest after the socket took some
                }
            }
        }
        self.flush(wire)?;
        Ok(taken)
    }

    fn wants_write(&self) -> bool {
        self.tls.wants_write()
    }

    fn flush(&mut self, wire: &mut dyn Write) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(wire) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn handshaking(&self) -> bool {
        self.tls.is_handshaking()
    }

    fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    fn close(&mut self) {
        self.tls.send_close_notify();
    }

    fn handshake_counters(stats: &WorkerStats) -> Option<(&AtomicU64, &AtomicU64)> {
        Some((&stats.tls_handshakes, &stats.tls_handshake_failures))
    }
}
