//! One Digest answer (an Authorization or Proxy-Authorization value, RFC 7616 §3.4) and the
//! response it must carry (RFC 7616 §3.4.1, qop=auth).

use herald_credentials::{from_hex, request_digest, to_hex, Algorithm, Qop};
use herald_sip::headers::AuthValue;
use std::borrow::Cow;

/// Longest value accepted for any parameter: nothing legitimate comes close, and the bounds
/// keep hashing cost per request small.
const MAX_PARAM: usize = 1024;

/// Why credentials of our realm cannot be used at all (answered with 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// The parameters of a Digest answer, unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestAnswer<'a> {
    pub username: Cow<'a, str>,
    pub realm: Cow<'a, str>,
    pub nonce: Cow<'a, str>,
    pub uri: Cow<'a, str>,
    pub response: Cow<'a, str>,
    /// `None`: MD5 (RFC 7616 §3.3: the default when absent).
    pub algorithm: Option<Cow<'a, str>>,
    pub qop: Option<Cow<'a, str>>,
    pub cnonce: Option<Cow<'a, str>>,
    pub nc: Option<Cow<'a, str>>,
    /// RFC 7616 §3.4.4: a hashed user name. herald never offers it.
    pub userhash: bool,
}

impl<'a> DigestAnswer<'a> {
    /// The parameters of a Digest credentials value. `value.realm` was already read by the
    /// caller; everything else required must be present and sane.
    pub fn from_value(value: &AuthValue<'a>) -> Result<DigestAnswer<'a>, Malformed> {
        let get = |name: &'static str| -> Result<Option<Cow<'a, str>>, Malformed> {
            match value.param(name) {
                Some(v) if v.len() > MAX_PARAM => Err(Malformed("credentials parameter too long")),
                other => Ok(other),
            }
        };
        let need = |name: &'static str, why: &'static str| -> Result<Cow<'a, str>, Malformed> {
            get(name)?.ok_or(Malformed(why))
        };
        let answer = DigestAnswer {
            username: need("username", "credentials without username")?,
            realm: need("realm", "credentials without realm")?,
            nonce: need("nonce", "credentials without nonce")?,
            uri: need("uri", "credentials without uri")?,
            response: need("response", "credentials without response")?,
            algorithm: get("algorithm")?,
            qop: get("qop")?,
            cnonce: get("cnonce")?,
            nc: get("nc")?,
            userhash: get("userhash")?.is_some_and(|v| v.eq_ignore_ascii_case("true")),
        };
        if answer.qop.is_some() {
            // RFC 7616 §3.4: with qop, cnonce and nc MUST be present.
            if answer.cnonce.as_deref().is_none_or(str::is_empty) {
                return Err(Malformed("qop without cnonce"));
            }
            if answer.nonce_count().is_none() {
                return Err(Malformed("qop without a valid nc (8 hex digits)"));
            }
        }
        Ok(answer)
    }

    /// The nonce-count: exactly 8 hex digits (RFC 7616 §3.4).
    pub fn nonce_count(&self) -> Option<u32> {
        let nc = self.nc.as_deref()?;
        if nc.len() != 8 {
            return None;
        }
        let mut b = [0u8; 4];
        from_hex(nc, &mut b)?;
        Some(u32::from_be_bytes(b))
    }

    /// The response the client must have sent for `method`, given the user's HA1 (raw bytes)
    /// under `alg` (RFC 7616 §3.4.1, qop=auth; see [`request_digest`]).
    pub fn expected(&self, alg: Algorithm, ha1: &[u8], method: &str) -> Vec<u8> {
        let qop = Qop {
            qop: self.qop.as_deref().unwrap_or(""),
            nc: self.nc.as_deref().unwrap_or(""),
            cnonce: self.cnonce.as_deref().unwrap_or(""),
        };
        request_digest(alg, &to_hex(ha1), &self.nonce, method, &self.uri, Some(qop))
    }

    /// The client's response as bytes, when it is hex of the algorithm's length.
    pub fn response_bytes(&self, alg: Algorithm) -> Option<Vec<u8>> {
        let mut out = vec![0u8; alg.output_len()];
        from_hex(&self.response, &mut out)?;
        Some(out)
    }
}
