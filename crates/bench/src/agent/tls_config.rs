//! What `--transport tls` needs before it can connect: the CA certificates that verify the
//! server (RFC 3261 §26.3.1: the client checks the server's certificate against the host it
//! meant to reach), the name to check it against, an optional client certificate (mutual TLS,
//! §26.3.2.2), or the explicit choice to verify nothing. Turned into a rustls [`ClientConfig`]
//! once per run.

use herald_tls::AcceptAnyServerCert;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// TLS settings of a run (all None / false for UDP and TCP).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM file of the CA certificates trusted to sign the server's certificate.
    pub ca: Option<PathBuf>,
    /// Name the server's certificate must carry (DNS name or IP address); None: the target's IP.
    pub server_name: Option<String>,
    /// PEM client certificate chain and its private key, for servers that ask for one.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Accept any server certificate (a test lab's self-signed server). Signatures in the
    /// handshake are still checked, so the connection is encrypted, but not authenticated.
    pub insecure_skip_verify: bool,
}

/// A ready client configuration and the name every connection of the run asks for.
#[derive(Debug, Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl TlsOptions {
    /// Checks that the options make sense together (without touching files).
    pub fn check(&self) -> Result<(), String> {
        match (&self.ca, self.insecure_skip_verify) {
            (None, false) => return Err("TLS needs --tls-ca FILE (or --tls-insecure-skip-verify)".into()),
            (Some(_), true) => return Err("--tls-ca and --tls-insecure-skip-verify exclude each other".into()),
            _ => {}
        }
        if self.cert.is_some() != self.key.is_some() {
            return Err("--tls-cert and --tls-key go together".into());
        }
        Ok(())
    }

    /// Reads the PEM files and builds the rustls configuration for connections to `target`.
    pub fn client(&self, target: IpAddr) -> Result<TlsClient, String> {
        self.check()?;
        // An explicit provider rather than the process default: with another rustls provider
        // feature enabled elsewhere in the build, the default would be ambiguous.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &self.ca {
            Some(ca) => builder.with_root_certificates(roots(ca)?),
            // `--tls-insecure-skip-verify`: any chain and name pass, handshake signatures are
            // still checked (herald-tls).
            None => builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider))),
        };
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| format!("TLS client certificate: {e}"))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(TlsClient { config: Arc::new(config), server_name: server_name(self.server_name.as_deref(), target)? })
    }
}

/// `name` as a rustls server name (an IP literal, bracketed or not, gives an IP name, which the
/// certificate must carry as an IP subjectAltName), else the target's address.
pub fn server_name(name: Option<&str>, target: IpAddr) -> Result<ServerName<'static>, String> {
    let Some(name) = name else { return Ok(ServerName::IpAddress(target.into())) };
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    ServerName::try_from(bare.to_string()).map_err(|e| format!("TLS server name '{name}': {e}"))
}

/// Every certificate of a PEM file; an empty file is an error (it would trust nothing).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let what = |e: rustls_pki_types::pem::Error| format!("{}: {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path).map_err(what)?.collect::<Result<Vec<_>, _>>().map_err(what)?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

fn roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path)? {
        roots.add(cert).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_together() {
        let ca = Some(PathBuf::from("ca.pem"));
        assert!(TlsOptions::default().check().unwrap_err().contains("--tls-ca"));
        assert!(TlsOptions { ca: ca.clone(), ..Default::default() }.check().is_ok());
        assert!(TlsOptions { insecure_skip_verify: true, ..Default::default() }.check().is_ok());
        assert!(TlsOptions { ca: ca.clone(), insecure_skip_verify: true, ..Default::default() }.check().is_err());
        let half = TlsOptions { ca, cert: Some("c.pem".into()), ..Default::default() };
        assert!(half.check().unwrap_err().contains("together"));
    }

    #[test]
    fn server_names_default_to_the_target_and_parse_ip_literals() {
        let lo = IpAddr::from([127, 0, 0, 1]);
        assert!(matches!(server_name(None, lo).unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name(Some("127.0.0.2"), lo).unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name(Some("[::1]"), lo).unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name(Some("sip.example.com"), lo).unwrap(), ServerName::DnsName(_)));
        assert!(server_name(Some("not a name"), lo).is_err());
    }

    #[test]
    fn missing_or_empty_pem_files_are_errors() {
        let dir = std::env::temp_dir().join(format!("herald-bench-tls-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let lo = IpAddr::from([127, 0, 0, 1]);
        let err = TlsOptions { ca: Some(empty), ..Default::default() }.client(lo).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");
        let err = TlsOptions { ca: Some(dir.join("absent.pem")), ..Default::default() }.client(lo).unwrap_err();
        assert!(err.contains("absent.pem"), "{err}");
        // Skipping verification needs no file.
        assert!(TlsOptions { insecure_skip_verify: true, ..Default::default() }.client(lo).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
