//! Nonces that need no server state (RFC 7616 §3.3 "nonce" and §5.4; RFC 3261 §22.4):
//!
//! ```text
//! nonce = hex( issued (8 bytes, big-endian Unix seconds) || salt (8 bytes) || tag (16 bytes) )
//! tag   = HMAC-SHA256(secret, issued || salt || realm)[..16]
//! ```
//!
//! Any engine (and any node configured with the same secret) can check a nonce it never saw:
//! the tag proves herald issued it for this realm, `issued` says how old it is. The salt makes
//! every nonce unique, so two clients challenged in the same second never share nonce-count
//! state ([`super::replay`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::atomic::{AtomicU64, Ordering};

type HmacSha256 = Hmac<Sha256>;

const TAG_LEN: usize = 16;
/// Bytes of a decoded nonce.
const RAW_LEN: usize = 8 + 8 + TAG_LEN;
/// Characters of a nonce on the wire.
pub const NONCE_LEN: usize = RAW_LEN * 2;

/// What a valid nonce tells: when it was issued, and its identity for nonce-count tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceInfo {
    /// Unix seconds at issue.
    pub issued: u64,
    /// issued || salt: unique per nonce.
    pub id: [u8; 16],
}

/// Mints and checks nonces for one realm.
pub struct NonceKey {
    mac: HmacSha256,
    realm: String,
    /// Salts: a counter starting at a random value, so nonces are unique within the process and
    /// (with high probability) across processes sharing the secret.
    next_salt: AtomicU64,
}

impl std::fmt::Debug for NonceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceKey").field("realm", &self.realm).finish_non_exhaustive()
    }
}

impl NonceKey {
    /// `secret`: any length (HMAC keys of any length are valid, RFC 2104 §3). `salt_seed`:
    /// random bits for the first salt.
    pub fn new(secret: &[u8], realm: &str, salt_seed: u64) -> NonceKey {
        let mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
        NonceKey { mac, realm: realm.to_owned(), next_salt: AtomicU64::new(salt_seed) }
    }

    fn tag(&self, issued: u64, salt: u64) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(&issued.to_be_bytes());
        m.update(&salt.to_be_bytes());
        m.update(self.realm.as_bytes());
        m
    }

    /// A fresh nonce issued at `unix_secs`.
    pub fn mint(&self, unix_secs: u64) -> String {
        let salt = self.next_salt.fetch_add(1, Ordering::Relaxed);
        let tag = self.tag(unix_secs, salt).finalize().into_bytes();
        let mut raw = [0u8; RAW_LEN];
        raw[..8].copy_from_slice(&unix_secs.to_be_bytes());
        raw[8..16].copy_from_slice(&salt.to_be_bytes());
        raw[16..].copy_from_slice(&tag[..TAG_LEN]);
        herald_credentials::to_hex(&raw)
    }

    /// The nonce's issue time and id if herald issued it for this realm (tag checked in
    /// constant time); `None` for anything else.
    pub fn check(&self, nonce: &str) -> Option<NonceInfo> {
        let mut raw = [0u8; RAW_LEN];
        herald_credentials::from_hex(nonce, &mut raw)?;
        let issued = u64::from_be_bytes(raw[..8].try_into().ok()?);
        let salt = u64::from_be_bytes(raw[8..16].try_into().ok()?);
        self.tag(issued, salt).verify_truncated_left(&raw[16..]).ok()?;
        let mut id = [0u8; 16];
        id.copy_from_slice(&raw[..16]);
        Some(NonceInfo { issued, id })
    }
}
