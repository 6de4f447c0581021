//! Accepting any server certificate: RFC 3261 §26.3.1 wants the client to check the server's
//! certificate against the host it meant to reach; labs with self-signed peers turn that off
//! explicitly (herald warns at start, the bench needs a flag). Only the certificate chain and
//! the name go unchecked: the handshake signatures are still verified with the provider's
//! algorithms, so the peer must hold the key of the certificate it sent (a forged
//! CertificateVerify still fails) and the connection is encrypted, if not authenticated.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::sync::Arc;

/// A [`ServerCertVerifier`] that accepts every certificate chain for every name, and checks
/// handshake signatures with `provider`'s algorithms.
#[derive(Debug)]
pub struct AcceptAnyServerCert {
    provider: Arc<CryptoProvider>,
}

impl AcceptAnyServerCert {
    /// `provider`: the one the client configuration is built with, so that the signature
    /// schemes offered are the ones it can verify.
    pub fn new(provider: Arc<CryptoProvider>) -> AcceptAnyServerCert {
        AcceptAnyServerCert { provider }
    }
}

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::PrivateKeyDer;
    use std::path::Path;
    use std::process::{Command, Stdio};

    /// A self-signed P-256 certificate for `cn` and its key, made with the `openssl` command (no
    /// key material in the repository, as in tests/tls_support).
    fn self_signed(dir: &Path, cn: &str) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", &format!("/CN={cn}"), "-addext", &format!("subjectAltName=DNS:{cn}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdin(Stdio::null())
            .output()
            .expect("openssl not runnable: install the openssl package (scripts/test.sh does)");
        assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
        let chain = CertificateDer::pem_file_iter(&cert).unwrap().collect::<Result<Vec<_>, _>>().unwrap();
        (chain, PrivateKeyDer::from_pem_file(&key).unwrap())
    }

    /// Runs a handshake in memory; `Err` is the first error either side reports.
    fn handshake(client: ClientConfig, server: ServerConfig, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name)?;
        let mut s = ServerConnection::new(Arc::new(server))?;
        let mut wire = Vec::new();
        for _ in 0..10 {
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
            wire.clear();
            c.write_tls(&mut wire).unwrap();
            s.read_tls(&mut wire.as_slice()).unwrap();
            s.process_new_packets()?;
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            c.read_tls(&mut wire.as_slice()).unwrap();
            c.process_new_packets()?;
        }
        panic!("handshake did not finish");
    }

    #[test]
    fn any_certificate_for_any_name_is_accepted_where_verification_would_refuse_it() {
        let dir = std::env::temp_dir().join(format!("herald-tls-accept-any-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (chain, key) = self_signed(&dir, "lab.invalid");
        let _ = std::fs::remove_dir_all(&dir);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = || {
            ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain.clone(), key.clone_key())
                .unwrap()
        };
        let client =
            ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();

        let verifying = client.clone().with_root_certificates(RootCertStore::empty()).with_no_client_auth();
        assert!(handshake(verifying, server(), "other.example").is_err(), "an unknown issuer is refused normally");

        let any = client
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider.clone())))
            .with_no_client_auth();
        handshake(any, server(), "other.example").expect("self-signed, wrong name: accepted");
    }
}
