//! TLS for the hostile corpus: rustls' blocking `StreamOwned` over a `TcpStream`, trusting the
//! test CA (tests/tls_support), so every batch mode and probe of module `wire` runs over TLS.

use super::wire::{Connector, Stream};
use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Connects to herald's TLS listener: the address it is given with the port replaced by
/// `port` (the batch code knows herald by its UDP/TCP address).
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    port: u16,
}

impl TlsConnector {
    pub fn new(ca: &Path, port: u16) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConnector { config: Arc::new(config), port }
    }
}

struct TlsStream(StreamOwned<ClientConnection, TcpStream>);

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Stream for TlsStream {
    fn shutdown_write(&mut self) {
        self.0.conn.send_close_notify();
        let _ = self.0.flush();
        let _ = self.0.sock.shutdown(Shutdown::Write);
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.0.sock.set_read_timeout(t)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.sock.local_addr()
    }
}

impl Connector for TlsConnector {
    fn via(&self) -> &'static str {
        "TLS"
    }

    fn connect(&self, to: SocketAddr) -> io::Result<Box<dyn Stream>> {
        let addr = SocketAddr::new(to.ip(), self.port);
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        sock.set_nodelay(true)?;
        sock.set_write_timeout(Some(Duration::from_secs(5)))?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))?;
        let conn = ClientConnection::new(self.config.clone(), ServerName::IpAddress(to.ip().into()))
            .map_err(io::Error::other)?;
        let mut s = StreamOwned::new(conn, sock);
        // The handshake now, so that a mutant's bytes are the first application data.
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Box::new(TlsStream(s)))
    }
}
