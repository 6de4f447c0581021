//! Who is calling the admin API: the bearer token (RFC 6750 §2.1) and the name it was given in
//! `[[admin.token]]`, or, where no token is configured (the endpoint then listens on loopback
//! only), the local peer address. Every change is logged with this.

use std::net::SocketAddr;
use std::sync::{PoisonError, RwLock};

/// The one who made a call, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Authenticated by the token of this name.
    Token { name: String, peer: SocketAddr },
    /// No token is configured; the endpoint is on loopback, so this is a local process.
    Loopback { peer: SocketAddr },
    /// A signal to the process (SIGHUP: reload).
    Signal(&'static str),
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Token { name, peer } => write!(f, "token:{name} from {peer}"),
            Caller::Loopback { peer } => write!(f, "loopback {peer}"),
            Caller::Signal(name) => write!(f, "signal {name}"),
        }
    }
}

/// Why a request is refused before any method runs (answered 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header, though tokens are configured.
    Missing,
    /// A bearer token that is none of the configured ones.
    Unknown,
}

/// The configured tokens, replaced as a whole by a config reload (tokens can be rotated without
/// a restart).
#[derive(Debug, Default)]
pub struct Tokens {
    named: RwLock<Vec<(String, String)>>,
}

impl Tokens {
    /// `(name, secret)` pairs (`[admin]` checked them at load).
    pub fn new(named: Vec<(String, String)>) -> Tokens {
        Tokens { named: RwLock::new(named) }
    }

    /// The `(name, secret)` pairs in force.
    pub fn named(&self) -> Vec<(String, String)> {
        self.named.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn replace(&self, named: Vec<(String, String)>) {
        *self.named.write().unwrap_or_else(PoisonError::into_inner) = named;
    }

    /// Who `authorization` (the header's value, if any) is, for a request from `peer`.
    pub fn identify(&self, authorization: Option<&[u8]>, peer: SocketAddr) -> Result<Caller, Refusal> {
        let named = self.named.read().unwrap_or_else(PoisonError::into_inner);
        if named.is_empty() {
            return Ok(Caller::Loopback { peer });
        }
        let presented = authorization.and_then(bearer).ok_or(Refusal::Missing)?;
        // Compare with every token in constant time each, so the time taken tells nothing of
        // which one (or which prefix) was close.
        let mut found = None;
        for (name, secret) in named.iter() {
            if constant_time_eq(presented, secret.as_bytes()) {
                found = Some(name.clone());
            }
        }
        found.map(|name| Caller::Token { name, peer }).ok_or(Refusal::Unknown)
    }
}

/// The token of `Bearer TOKEN` (scheme case-insensitive, RFC 6750 §2.1 / RFC 9110 §11.1).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Equal in time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:40000".parse().unwrap()
    }

    #[test]
    fn without_tokens_the_caller_is_the_local_peer() {
        let t = Tokens::default();
        assert_eq!(t.identify(None, peer()), Ok(Caller::Loopback { peer: peer() }));
        assert_eq!(Caller::Loopback { peer: peer() }.to_string(), "loopback 127.0.0.1:40000");
    }

    #[test]
    fn with_tokens_only_a_known_bearer_token_passes() {
        let t = Tokens::new(vec![("ops".into(), "0123456789abcdef".into()), ("ci".into(), "fedcba9876543210".into())]);
        assert_eq!(t.identify(None, peer()), Err(Refusal::Missing));
        assert_eq!(t.identify(Some(b"Basic b3BzOng="), peer()), Err(Refusal::Missing));
        assert_eq!(t.identify(Some(b"Bearer 0123456789abcdeX"), peer()), Err(Refusal::Unknown));
        assert_eq!(t.identify(Some(b"Bearer 0123456789abcde"), peer()), Err(Refusal::Unknown));
        let ok = t.identify(Some(b"bearer  fedcba9876543210 "), peer()).unwrap();
        assert_eq!(ok, Caller::Token { name: "ci".into(), peer: peer() });
        assert_eq!(ok.to_string(), "token:ci from 127.0.0.1:40000");
        t.replace(vec![("new".into(), "aaaaaaaaaaaaaaaa".into())]);
        assert_eq!(t.identify(Some(b"Bearer fedcba9876543210"), peer()), Err(Refusal::Unknown), "rotated out");
    }
}
