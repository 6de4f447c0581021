#![allow(dead_code)] // shared by several test binaries, each using part of it
//! Test certificates made with the `openssl` command (no key material in the repository): a CA
//! and a leaf certificate for 127.0.0.1 and localhost, signed by it, usable as TLS server and
//! client certificate (extendedKeyUsage serverAuth, clientAuth).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A CA and one leaf certificate with its key, as PEM files in `dir`.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out =
        Command::new("openssl").args(args).current_dir(dir).stdin(Stdio::null()).output().unwrap_or_else(|e| {
            panic!("openssl not runnable ({e}): install the openssl package (scripts/test.sh does)")
        });
    assert!(out.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

impl Pki {
    /// Makes `NAME-ca.pem`, `NAME-cert.pem` and `NAME-key.pem` in `dir` (P-256 keys, 30 days)
    /// for 127.0.0.1 and localhost.
    pub fn generate(dir: &Path, name: &str) -> Pki {
        Pki::generate_for(dir, name, "IP:127.0.0.1,DNS:localhost")
    }

    /// [`Pki::generate`] with the leaf's subjectAltName `san` (e.g. `IP:10.98.1.1`).
    pub fn generate_for(dir: &Path, name: &str, san: &str) -> Pki {
        let f = |what: &str| format!("{name}-{what}");
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        let mut ca_args = vec!["req", "-x509"];
        ca_args.extend(ec);
        let (ca_key, ca, key, csr, cert, ext) =
            (f("ca-key.pem"), f("ca.pem"), f("key.pem"), f("req.pem"), f("cert.pem"), f("ext.cnf"));
        let ca_subject = format!("/CN=herald test CA {name}");
        ca_args.extend(["-keyout", &ca_key, "-out", &ca, "-days", "30", "-subj", &ca_subject]);
        openssl(dir, &ca_args);
        let mut req_args = vec!["req"];
        req_args.extend(ec);
        req_args.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"]);
        openssl(dir, &req_args);
        fs::write(
            dir.join(&ext),
            format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
            ),
        )
        .unwrap();
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "30",
                "-extfile",
                &ext,
            ],
        );
        Pki { ca: dir.join(ca), cert: dir.join(cert), key: dir.join(key) }
    }

    /// The `[tls]` section of a herald config using this certificate, trusting `roots`.
    pub fn herald_toml(&self, roots: &Path, extra: &str) -> String {
        format!(
            "[tls]\ncertificate = \"{}\"\nprivate_key = \"{}\"\nca_file = \"{}\"\n{extra}",
            self.cert.display(),
            self.key.display(),
            roots.display()
        )
    }

    /// A Kamailio tls module config (tls.cfg) serving and connecting with this certificate,
    /// verifying peers against `roots`.
    pub fn kamailio_tls_cfg(&self, roots: &Path) -> String {
        let (cert, key, ca) = (self.cert.display(), self.key.display(), roots.display());
        format!(
            "[server:default]\nmethod = TLSv1.2+\nverify_certificate = no\nrequire_certificate = no\n\
             certificate = {cert}\nprivate_key = {key}\nca_list = {ca}\n\n\
             [client:default]\nmethod = TLSv1.2+\nverify_certificate = yes\nrequire_certificate = yes\n\
             certificate = {cert}\nprivate_key = {key}\nca_list = {ca}\n"
        )
    }
}
