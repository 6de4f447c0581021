//! `[tls]`: certificates for the TLS transport (RFC 3261 §26.2, RFC 5630), and how peers'
//! certificates are verified (RFC 5922).

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `[tls]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    /// PEM file with herald's certificate chain (leaf first). Needed by any `"tls"` listener;
    /// also offered as client certificate on connections herald opens.
    pub certificate: Option<PathBuf>,
    /// PEM file with the private key of `certificate` (PKCS#8, PKCS#1 or SEC1).
    pub private_key: Option<PathBuf>,
    /// Whether clients connecting to herald must show a certificate signed by `client_ca_file`:
    /// `"none"` (never asked), `"optional"` (asked; a client without one is accepted, a bad one
    /// is refused) or `"required"`.
    pub verify_client: ClientVerify,
    /// PEM roots for `verify_client`.
    pub client_ca_file: Option<PathBuf>,
    /// PEM roots that certificates of next hops must chain to. Default: the system bundle
    /// (`/etc/ssl/certs/ca-certificates.crt`).
    pub ca_file: Option<PathBuf>,
    /// Verify the next hop's certificate against `ca_file` and the name herald connects to (the
    /// host of the URI, RFC 5922 §7.1; an IP literal is checked against IP subjectAltNames).
    /// Turning it off makes TLS to next hops unauthenticated: herald logs a warning at start.
    pub verify_server: bool,
    /// How long a TLS handshake may take, in seconds (a client that opens a connection and
    /// sends nothing must not hold it).
    pub handshake_timeout_s: u64,
}

/// `[tls] verify_client`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientVerify {
    None,
    Optional,
    Required,
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            certificate: None,
            private_key: None,
            verify_client: ClientVerify::None,
            client_ca_file: None,
            ca_file: None,
            verify_server: true,
            handshake_timeout_s: 10,
        }
    }
}

/// Where the system's trusted roots are on Debian and its derivatives.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Tls {
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_secs(self.handshake_timeout_s)
    }

    /// The roots for next hops: `ca_file` or the system bundle.
    pub fn server_roots(&self) -> PathBuf {
        self.ca_file.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE))
    }

    /// Checks what needs no file: key pairs and relations. `Err((key, message))`. Run at load,
    /// and again at bind (`--listen-tls` adds listeners after the file was loaded).
    pub(crate) fn validate(&self, has_listener: bool) -> Result<(), (&'static str, String)> {
        if has_listener && self.certificate.is_none() {
            return Err((
                "certificate",
                "a \"tls\" or \"wss\" listener needs [tls] certificate and private_key".into(),
            ));
        }
        match (&self.certificate, &self.private_key) {
            (Some(_), None) => return Err(("private_key", "certificate is set but private_key is not".into())),
            (None, Some(_)) => return Err(("certificate", "private_key is set but certificate is not".into())),
            _ => {}
        }
        if self.verify_client != ClientVerify::None && self.client_ca_file.is_none() {
            return Err((
                "client_ca_file",
                "verify_client needs client_ca_file (the roots client certificates chain to)".into(),
            ));
        }
        if self.handshake_timeout_s == 0 || self.handshake_timeout_s > 300 {
            return Err(("handshake_timeout_s", "must be between 1 and 300 seconds".into()));
        }
        Ok(())
    }
}
