//! Digest credentials: HA1 hashes per user for one realm, kept in memory (seed 002: a database
//! round trip per request cost 3x; an in-memory credential table removed it), stored in a text
//! file that never holds a password, and reloaded when the file changes.
//!
//! * [`Credentials`]: the in-memory table (user → [`UserHa1`]) of one realm.
//! * [`file`]: the file format (`realm NAME` line, then `USER MD5 SHA-256 SHA-512-256` lines),
//!   parsing with `FILE:LINE` errors and an atomic, mode-0600 writer.
//! * [`SharedCredentials`] and [`FileWatcher`]: the current table behind an `Arc` swapped
//!   atomically on reload; a file that fails to parse keeps the previous table.

mod algorithm;
pub mod file;
mod shared;
#[cfg(test)]
mod tests;

pub use algorithm::{from_hex, to_hex, Algorithm, UserHa1};
pub use file::CredentialsError;
pub use shared::{FileWatcher, Reload, SharedCredentials};

use std::collections::HashMap;

/// Longest user name accepted (bytes): names go into quoted strings of every challenge answer.
pub const MAX_USER_LEN: usize = 128;
/// Longest realm accepted (bytes).
pub const MAX_REALM_LEN: usize = 255;

/// The users of one realm and their HA1s.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    realm: String,
    users: HashMap<String, UserHa1>,
}

impl Credentials {
    /// An empty table for `realm`.
    pub fn new(realm: &str) -> Credentials {
        Credentials { realm: realm.to_owned(), users: HashMap::new() }
    }

    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// The HA1s of `user` (names are case-sensitive, RFC 7616 §3.4.1 compares them as given).
    pub fn get(&self, user: &str) -> Option<&UserHa1> {
        self.users.get(user)
    }

    /// Adds or replaces a user. Returns whether the user existed.
    pub fn insert(&mut self, user: &str, ha1: UserHa1) -> bool {
        self.users.insert(user.to_owned(), ha1).is_some()
    }

    /// Removes a user. Returns whether the user existed.
    pub fn remove(&mut self, user: &str) -> bool {
        self.users.remove(user).is_some()
    }

    /// User names, sorted.
    pub fn users(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.users.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// Why a user name cannot be stored, or `None` when it can. Names go verbatim into the quoted
/// `username` of a client's answer (RFC 7616 §3.4), so quotes, backslashes, whitespace and
/// control characters are refused rather than escaped.
pub fn invalid_user_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("a user name must not be empty");
    }
    if name.len() > MAX_USER_LEN {
        return Some("a user name must be at most 128 bytes");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
        return Some("a user name must not contain whitespace, control characters, '\"' or '\\'");
    }
    if name.starts_with('#') {
        return Some("a user name must not start with '#'");
    }
    None
}

/// Why a realm cannot be used, or `None` (same rules as user names: it is quoted on the wire).
pub fn invalid_realm(realm: &str) -> Option<&'static str> {
    if realm.is_empty() {
        return Some("the realm must not be empty");
    }
    if realm.len() > MAX_REALM_LEN {
        return Some("the realm must be at most 255 bytes");
    }
    if realm.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
        return Some("the realm must not contain whitespace, control characters, '\"' or '\\'");
    }
    None
}
