//! Reading certificates, keys and roots from PEM files. Every error names the file and says
//! what is wrong with it, never prints key material.

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

/// A certificate chain (leaf first) and its private key.
pub(crate) struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Identity {
    pub(crate) fn load(certificate: &Path, private_key: &Path) -> Result<Identity, String> {
        Ok(Identity { chain: certificates(certificate)?, key: private_key_of(private_key)? })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

/// Every certificate of a PEM file (at least one).
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: bad PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no CERTIFICATE block in the file", path.display()));
    }
    Ok(certs)
}

/// The first private key of a PEM file.
pub(crate) fn private_key_of(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            format!("{}: no PRIVATE KEY block (PKCS#8, RSA or EC) in the file", path.display())
        }
        e => format!("{}: bad PEM: {e}", path.display()),
    })
}

/// A root store from a PEM bundle. Certificates the store rejects (expired roots in the system
/// bundle, for one) are skipped; a bundle with no usable root is an error.
pub(crate) fn roots(path: &Path) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certificates(path)?);
    if added == 0 {
        return Err(format!("{}: no usable root certificate", path.display()));
    }
    Ok(store)
}

/// Checks that the files of `[tls]` load and that the key belongs to the certificate, so that
/// a mistake is reported at start with the config key, not at the first handshake.
/// `Err((key, message))`.
pub(crate) fn check(
    identity: Option<(&Path, &Path)>,
    client_ca_file: Option<&Path>,
    ca_file: Option<&Path>,
) -> Result<(), (&'static str, String)> {
    if let Some((cert, key)) = identity {
        let chain = certificates(cert).map_err(|m| ("certificate", m))?;
        let key_der = private_key_of(key).map_err(|m| ("private_key", m))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)
            .map_err(|e| ("private_key", format!("{}: unsupported key: {e}", key.display())))?;
        let certified = rustls::sign::CertifiedKey::new(chain, signing);
        certified
            .keys_match()
            .map_err(|e| ("private_key", format!("{} does not belong to {}: {e}", key.display(), cert.display())))?;
    }
    if let Some(ca) = client_ca_file {
        roots(ca).map_err(|m| ("client_ca_file", m))?;
    }
    if let Some(ca) = ca_file {
        roots(ca).map_err(|m| ("ca_file", m))?;
    }
    Ok(())
}
