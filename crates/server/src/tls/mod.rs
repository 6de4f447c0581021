//! The TLS transport (RFC 3261 §26.2, RFC 5630) with rustls: the server and client
//! configurations built from `[tls]`, and the names next hops must prove. A TLS connection is a
//! stream connection like TCP whose codec is a rustls connection (`stream::tls`).
//!
//! Name checks (RFC 5922 §7): herald verifies a next hop's certificate against the host it was
//! asked to reach. The engine hands the runtime addresses, not names, so the runtime remembers
//! which name each TLS address was resolved from ([`TlsContext::learn`]); an address reached
//! from an IP literal is checked against the certificate's IP subjectAltNames.

use crate::config::{ClientVerify, Tls};
use crate::pem;
use herald_core::{Target, Transport};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::ServerName;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Names remembered for TLS addresses at most; past it the table starts over (a lost name
/// makes one connection check the IP instead, it never lets a wrong certificate through).
const MAX_NAMES: usize = 65_536;

/// What every worker needs for TLS: built once at start from `[tls]`.
pub(crate) struct TlsContext {
    /// `None` when no certificate is configured (then herald has no TLS listener, but can
    /// still open TLS connections to next hops).
    pub(crate) server: Option<Arc<ServerConfig>>,
    /// For connections herald opens to next hops.
    pub(crate) client: Arc<ClientConfig>,
    pub(crate) handshake_timeout: Duration,
    names: Mutex<HashMap<SocketAddr, String>>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsContext {
    /// Loads certificates and roots. `Err` names the file and the problem.
    pub(crate) fn new(cfg: &Tls) -> Result<TlsContext, String> {
        let identity = match (&cfg.certificate, &cfg.private_key) {
            (Some(c), Some(k)) => Some(pem::Identity::load(c, k)?),
            _ => None,
        };
        let server = match &identity {
            Some(id) => Some(Arc::new(server_config(cfg, id)?)),
            None => None,
        };
        let client = Arc::new(client_config(cfg, identity)?);
        Ok(TlsContext { server, client, handshake_timeout: cfg.handshake_timeout(), names: Mutex::default() })
    }

    /// Remembers that `targets` were resolved from `host`, for the name check of TLS
    /// connections to them.
    pub(crate) fn learn(&self, host: &str, targets: &[Target]) {
        if !targets.iter().any(|t| t.transport == Transport::Tls) {
            return; // most lookups are for UDP/TCP: no lock for them
        }
        let mut names = self.names.lock().expect("names lock");
        for t in targets.iter().filter(|t| t.transport == Transport::Tls) {
            if names.len() >= MAX_NAMES {
                names.clear();
            }
            names.insert(t.addr, host.to_ascii_lowercase());
        }
    }

    /// The name a connection to `addr` must present a certificate for.
    pub(crate) fn server_name(&self, addr: SocketAddr) -> ServerName<'static> {
        let learned = self.names.lock().expect("names lock").get(&addr).cloned();
        learned.and_then(|n| ServerName::try_from(n).ok()).unwrap_or_else(|| ServerName::IpAddress(addr.ip().into()))
    }
}

/// A server name as a person writes it.
pub(crate) fn shown(name: &ServerName<'_>) -> String {
    match name {
        ServerName::DnsName(n) => n.as_ref().to_string(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

fn server_config(cfg: &Tls, id: &pem::Identity) -> Result<ServerConfig, String> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match (cfg.verify_client, &cfg.client_ca_file) {
        (ClientVerify::None, _) | (_, None) => builder.with_no_client_auth(),
        (mode, Some(ca)) => {
            let roots = Arc::new(pem::roots(ca)?);
            let v = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let v = if mode == ClientVerify::Optional { v.allow_unauthenticated() } else { v };
            builder.with_client_cert_verifier(v.build().map_err(|e| format!("client_ca_file: {e}"))?)
        }
    };
    let cert = cfg.certificate.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
    builder
        .with_single_cert(id.chain.clone(), id.key.clone_key())
        .map_err(|e| format!("{cert}: cannot use certificate and key: {e}"))
}

fn client_config(cfg: &Tls, identity: Option<pem::Identity>) -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if cfg.verify_server {
        let roots = match pem::roots(&cfg.server_roots()) {
            Ok(r) => r,
            // No system bundle and no ca_file: every next hop fails verification, which the
            // log says when it happens; herald itself still starts.
            Err(e) if cfg.ca_file.is_none() => {
                tracing::warn!(error = %e, "no trusted roots: TLS connections to next hops will fail verification; set [tls] ca_file");
                RootCertStore::empty()
            }
            Err(e) => return Err(e),
        };
        builder.with_root_certificates(roots)
    } else {
        tracing::warn!("[tls] verify_server = false: certificates of next hops are not checked");
        builder.dangerous().with_custom_certificate_verifier(Arc::new(herald_tls::AcceptAnyServerCert::new(provider())))
    };
    // herald's own certificate doubles as client certificate (mutual TLS between proxies,
    // RFC 5922 §7.4): a next hop that asks for one gets it.
    match identity {
        Some(id) => builder.with_client_auth_cert(id.chain, id.key).map_err(|e| format!("client certificate: {e}")),
        None => Ok(builder.with_no_client_auth()),
    }
}
