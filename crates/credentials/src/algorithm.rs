//! The digest hash algorithms herald offers (RFC 7616 §3.2, RFC 8760 §2.1) and the HA1 of a user
//! under each of them.

use crate::hex::to_hex;
use md5::Md5;
use sha2::{Digest, Sha256, Sha512_256};

/// A Digest `algorithm` (RFC 7616 §3.3). The `-sess` variants are not offered: they need the
/// server to keep per-session state (RFC 7616 §3.4.2) and SIP clients rarely implement them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Md5,
    Sha256,
    Sha512_256,
}

impl Algorithm {
    /// Every algorithm, strongest first: the order of the challenges (RFC 8760 §2.4: a UAC uses
    /// the topmost challenge whose algorithm it supports).
    pub const ALL: [Algorithm; 3] = [Algorithm::Sha512_256, Algorithm::Sha256, Algorithm::Md5];

    /// The token as written in `algorithm=` (RFC 7616 §6.1 registry names).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Sha256 => "SHA-256",
            Algorithm::Sha512_256 => "SHA-512-256",
        }
    }

    /// The algorithm named by an `algorithm=` token (case-insensitive, RFC 7616 §3.3). `-sess`
    /// variants and unknown names are `None`.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// H(data) as raw bytes (16 for MD5, 32 for the others).
    pub fn hash(self, parts: &[&[u8]]) -> Vec<u8> {
        fn run<D: Digest>(parts: &[&[u8]]) -> Vec<u8> {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            d.finalize().to_vec()
        }
        match self {
            Algorithm::Md5 => run::<Md5>(parts),
            Algorithm::Sha256 => run::<Sha256>(parts),
            Algorithm::Sha512_256 => run::<Sha512_256>(parts),
        }
    }

    /// H(data) in lowercase hex, the form every digest value takes on the wire (RFC 7616 §3.4.1).
    pub fn hex_hash(self, parts: &[&[u8]]) -> String {
        to_hex(&self.hash(parts))
    }

    /// HA1 = H(username ":" realm ":" password) as raw bytes (RFC 7616 §3.4.2): what a client
    /// computes from the password it was given, and what the users file keeps instead of it.
    pub fn ha1(self, user: &str, realm: &str, password: &str) -> Vec<u8> {
        self.hash(&[user.as_bytes(), b":", realm.as_bytes(), b":", password.as_bytes()])
    }

    /// Length of the hash in bytes.
    pub fn output_len(self) -> usize {
        match self {
            Algorithm::Md5 => 16,
            Algorithm::Sha256 | Algorithm::Sha512_256 => 32,
        }
    }
}

/// HA1 = H(username ":" realm ":" password) under each algorithm (RFC 7616 §3.4.2). This is what
/// the credentials file keeps instead of the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserHa1 {
    pub md5: [u8; 16],
    pub sha256: [u8; 32],
    pub sha512_256: [u8; 32],
}

impl UserHa1 {
    pub fn from_password(user: &str, realm: &str, password: &str) -> UserHa1 {
        let mut out = UserHa1 { md5: [0; 16], sha256: [0; 32], sha512_256: [0; 32] };
        out.md5.copy_from_slice(&Algorithm::Md5.ha1(user, realm, password));
        out.sha256.copy_from_slice(&Algorithm::Sha256.ha1(user, realm, password));
        out.sha512_256.copy_from_slice(&Algorithm::Sha512_256.ha1(user, realm, password));
        out
    }

    /// The HA1 for `alg`, raw bytes.
    pub fn get(&self, alg: Algorithm) -> &[u8] {
        match alg {
            Algorithm::Md5 => &self.md5,
            Algorithm::Sha256 => &self.sha256,
            Algorithm::Sha512_256 => &self.sha512_256,
        }
    }
}
