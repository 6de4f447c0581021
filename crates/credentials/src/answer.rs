//! A client's Digest answer (RFC 7616 §3.4): the Authorization or Proxy-Authorization value a
//! user agent sends back for a challenge. herald itself only checks answers
//! (`herald_core::auth`); the bench agent, the simulator's user agents and tests write them, all
//! with this one function.

use crate::algorithm::Algorithm;
use crate::hex::to_hex;
use crate::response::{request_digest, session_ha1, Qop};
use std::fmt::Write;

/// What an answer is for: the challenge's parameters and the request it authorizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer<'a> {
    pub algorithm: Algorithm,
    /// The `-sess` variant of the algorithm (RFC 7616 §3.4.2: the HA1 also covers both nonces).
    pub sess: bool,
    pub user: &'a str,
    pub realm: &'a str,
    pub nonce: &'a str,
    /// The `uri` parameter: the Request-URI as the client sends it (RFC 7616 §3.4).
    pub uri: &'a str,
    /// `Some(nc)`: `qop=auth` with this nonce count (the requests sent with this nonce);
    /// `None`: the RFC 2617 §3.2.2.1 form without qop, for servers that offer none.
    pub nc: Option<u32>,
    /// The client's nonce, fresh per request: sent with `qop=auth`, hashed into a `-sess` HA1.
    pub cnonce: &'a str,
    /// Echoed unchanged when the challenge carried one (RFC 7616 §3.4).
    pub opaque: Option<&'a str>,
}

impl Answer<'_> {
    /// The header value answering for `method` with `password`.
    pub fn header_value(&self, method: &str, password: &str) -> String {
        let alg = self.algorithm;
        let mut ha1 = to_hex(&alg.ha1(self.user, self.realm, password));
        if self.sess {
            ha1 = session_ha1(alg, &ha1, self.nonce, self.cnonce);
        }
        let nc = self.nc.map(|nc| format!("{nc:08x}"));
        let qop = nc.as_deref().map(|nc| Qop { qop: "auth", nc, cnonce: self.cnonce });
        let response = to_hex(&request_digest(alg, &ha1, self.nonce, method, self.uri, qop));
        let sess = if self.sess { "-sess" } else { "" };
        let mut out = format!(
            "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", response=\"{response}\", algorithm={}{sess}",
            self.user,
            self.realm,
            self.nonce,
            self.uri,
            alg.name()
        );
        if let Some(nc) = &nc {
            let _ = write!(out, ", qop=auth, nc={nc}, cnonce=\"{}\"", self.cnonce);
        }
        if let Some(opaque) = self.opaque {
            let _ = write!(out, ", opaque=\"{opaque}\"");
        }
        out
    }
}
