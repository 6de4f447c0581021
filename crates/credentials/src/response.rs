//! The request-digest (RFC 7616 §3.4.1): the value of `response=` that proves knowledge of the
//! password. The server computes it to check an answer (`herald_core::auth`), a client to give
//! one (the bench agent); both go through [`request_digest`], so they cannot disagree.

use crate::algorithm::Algorithm;

/// The `qop` part of an answer (RFC 7616 §3.4): the protection asked for, the nonce count as
/// sent (8 hex digits) and the client's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qop<'a> {
    pub qop: &'a str,
    pub nc: &'a str,
    pub cnonce: &'a str,
}

/// The response `alg` gives for an answer to `nonce`, for `method` on `uri` (qop=auth: the body
/// is not hashed), from the HA1 in hex:
///
/// ```text
/// HA2 = H(method ":" uri)
/// with qop:    H(HA1 ":" nonce ":" nc ":" cnonce ":" qop ":" HA2)     RFC 7616 §3.4.1
/// without qop: H(HA1 ":" nonce ":" HA2)                               RFC 2617 §3.2.2.1
/// ```
///
/// Raw bytes; the wire form is their lowercase hex ([`crate::to_hex`]).
pub fn request_digest(
    alg: Algorithm,
    ha1_hex: &str,
    nonce: &str,
    method: &str,
    uri: &str,
    qop: Option<Qop<'_>>,
) -> Vec<u8> {
    let ha2 = alg.hex_hash(&[method.as_bytes(), b":", uri.as_bytes()]);
    match qop {
        Some(q) => alg.hash(&[
            ha1_hex.as_bytes(),
            b":",
            nonce.as_bytes(),
            b":",
            q.nc.as_bytes(),
            b":",
            q.cnonce.as_bytes(),
            b":",
            q.qop.as_bytes(),
            b":",
            ha2.as_bytes(),
        ]),
        None => alg.hash(&[ha1_hex.as_bytes(), b":", nonce.as_bytes(), b":", ha2.as_bytes()]),
    }
}

/// The HA1 of a `-sess` algorithm in hex: H(HA1 ":" nonce ":" cnonce) over the plain HA1 in hex
/// (RFC 7616 §3.4.2). herald never offers `-sess` (it would need per-session state), but a
/// client answers servers that do.
pub(crate) fn session_ha1(alg: Algorithm, ha1_hex: &str, nonce: &str, cnonce: &str) -> String {
    alg.hex_hash(&[ha1_hex.as_bytes(), b":", nonce.as_bytes(), b":", cnonce.as_bytes()])
}
