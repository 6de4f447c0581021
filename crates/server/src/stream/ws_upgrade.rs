//! The server side of the WebSocket opening handshake (RFC 6455 §4.2) for SIP (RFC 7118 §4):
//! tungstenite parses the request and checks the upgrade and the key; this module adds what SIP
//! asks for (the `sip` subprotocol, the origin allow-list) and writes the HTTP answers.

use tungstenite::error::{Error, ProtocolError};
use tungstenite::handshake::machine::TryParse;
use tungstenite::handshake::server::{create_response, write_response, Request};
use tungstenite::http::HeaderValue;

/// The largest upgrade request read: a browser's is well under 2 KB, cookies included.
pub(super) const MAX_REQUEST: usize = 8192;

/// The subprotocol of SIP over WebSocket (RFC 7118 §4.1).
const SUBPROTOCOL: &str = "sip";

/// What the bytes received so far make of the upgrade.
#[derive(Debug)]
pub(super) enum Upgrade {
    /// The request is not complete yet.
    Partial,
    /// 101 Switching Protocols: `response` to send; the request took the first `used` bytes
    /// (what follows is already WebSocket frames).
    Accepted { response: Vec<u8>, used: usize },
    /// Refused: `response` to send, then close.
    Refused { response: Vec<u8>, why: String },
}

/// Answers the upgrade request at the start of `buf`. `origins`: the allowed origins (empty:
/// any).
pub(super) fn answer(buf: &[u8], origins: &[String]) -> Upgrade {
    let request = match Request::try_parse(buf) {
        Ok(Some(r)) => r,
        Ok(None) if buf.len() > MAX_REQUEST => {
            return refuse(431, "Request Header Fields Too Large", "", "the upgrade request is too large")
        }
        Ok(None) => return Upgrade::Partial,
        // RFC 6455 §4.1: the method MUST be GET, the HTTP version at least 1.1.
        Err(Error::Protocol(ProtocolError::WrongHttpMethod)) => {
            return refuse(405, "Method Not Allowed", "Allow: GET\r\n", "a WebSocket upgrade is a GET request")
        }
        Err(Error::Protocol(ProtocolError::WrongHttpVersion)) => {
            return refuse(400, "Bad Request", "", "a WebSocket upgrade needs HTTP/1.1 or later")
        }
        Err(e) => return refuse(400, "Bad Request", "", &format!("not an HTTP request: {e}")),
    };
    let (used, request) = request;
    let mut response = match create_response(&request) {
        Ok(r) => r,
        // §4.2.2 / §4.4: a version the server does not speak gets 426 and the versions it does.
        Err(Error::Protocol(ProtocolError::MissingSecWebSocketVersionHeader))
            if request.headers().contains_key("Sec-WebSocket-Version") =>
        {
            return refuse(426, "Upgrade Required", "Sec-WebSocket-Version: 13\r\n", "unsupported WebSocket version")
        }
        Err(e) => return refuse(400, "Bad Request", "", &format!("not a WebSocket upgrade: {e}")),
    };
    // RFC 6455 §10.2: the origin protects browsers' users; other clients send none.
    if !origins.is_empty() {
        if let Some(origin) = request.headers().get("Origin") {
            let allowed = origin.to_str().is_ok_and(|o| origins.iter().any(|a| a.eq_ignore_ascii_case(o)));
            if !allowed {
                let shown = String::from_utf8_lossy(origin.as_bytes()).into_owned();
                return refuse(403, "Forbidden", "", &format!("origin {shown} is not allowed"));
            }
        }
    }
    // RFC 7118 §4.1: the client offers `sip`; a server speaking only SIP refuses anything else
    // (RFC 6455 §4.2.2 lets it refuse instead of answering without a subprotocol).
    let offered = request
        .headers()
        .get_all("Sec-WebSocket-Protocol")
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|p| p.trim() == SUBPROTOCOL)));
    if !offered {
        return refuse(400, "Bad Request", "", "the sip subprotocol is required (Sec-WebSocket-Protocol: sip)");
    }
    response.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static(SUBPROTOCOL));
    let mut bytes = Vec::with_capacity(160);
    match write_response(&mut bytes, &response) {
        Ok(()) => Upgrade::Accepted { response: bytes, used },
        Err(e) => refuse(500, "Internal Server Error", "", &format!("cannot write the answer: {e}")),
    }
}

/// An HTTP answer that refuses the upgrade; the connection closes after it.
fn refuse(code: u16, reason: &str, extra: &str, why: &str) -> Upgrade {
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\n{extra}Connection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{why}\n",
        why.len() + 1
    );
    Upgrade::Refused { response: response.into_bytes(), why: format!("{code} {reason}: {why}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(extra: &str) -> String {
        format!(
            "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        )
    }

    fn status(u: &Upgrade) -> u16 {
        let bytes = match u {
            Upgrade::Accepted { response, .. } | Upgrade::Refused { response, .. } => response,
            Upgrade::Partial => return 0,
        };
        std::str::from_utf8(&bytes[9..12]).unwrap().parse().unwrap()
    }

    #[test]
    fn a_sip_upgrade_is_accepted_with_the_accept_key_and_the_subprotocol() {
        let r = request("Sec-WebSocket-Protocol: sip\r\n");
        let u = answer(r.as_bytes(), &[]);
        let Upgrade::Accepted { response, used } = &u else { panic!("{u:?}") };
        assert_eq!(*used, r.len());
        let text = String::from_utf8_lossy(response);
        // RFC 6455 §1.3's example key and accept value.
        assert!(text.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{text}");
        assert!(text.contains("sec-websocket-protocol: sip"), "{text}");
        assert_eq!(status(&u), 101);
    }

    #[test]
    fn an_incomplete_request_waits_and_a_huge_one_is_refused() {
        let r = request("Sec-WebSocket-Protocol: sip\r\n");
        assert!(matches!(answer(&r.as_bytes()[..40], &[]), Upgrade::Partial));
        let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_REQUEST));
        assert_eq!(status(&answer(huge.as_bytes(), &[])), 431);
    }

    #[test]
    fn refusals_carry_the_rfc_status() {
        let cases = [
            (request(""), 400),                                       // no subprotocol
            (request("Sec-WebSocket-Protocol: mqtt, chat\r\n"), 400), // not sip
            (request("Sec-WebSocket-Protocol: sip\r\n").replace("13", "8"), 426),
            (request("Sec-WebSocket-Protocol: sip\r\n").replace("dGhlIHNhbXBsZSBub25jZQ==", "short"), 400),
            (request("Sec-WebSocket-Protocol: sip\r\n").replace("HTTP/1.1", "HTTP/1.0"), 400),
            (request("Sec-WebSocket-Protocol: sip\r\n").replace("GET", "POST"), 405),
            ("GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_string(), 400), // not an upgrade
            ("\x16\x03\x01 garbage\r\n\r\n".to_string(), 400),
        ];
        for (r, code) in cases {
            let u = answer(r.as_bytes(), &[]);
            assert!(matches!(u, Upgrade::Refused { .. }), "{r:?}: {u:?}");
            assert_eq!(status(&u), code, "{r:?}");
        }
        let u = answer(request("Sec-WebSocket-Version: 8\r\n").as_bytes(), &[]);
        assert!(matches!(u, Upgrade::Refused { .. }), "two version headers: {u:?}");
    }

    #[test]
    fn the_origin_list_binds_browsers_only() {
        let allowed = ["https://phone.example.com".to_string()];
        let from = |o: &str| request(&format!("Sec-WebSocket-Protocol: sip\r\nOrigin: {o}\r\n"));
        assert_eq!(status(&answer(from("https://phone.example.com").as_bytes(), &allowed)), 101);
        assert_eq!(status(&answer(from("https://evil.example").as_bytes(), &allowed)), 403);
        assert_eq!(status(&answer(request("Sec-WebSocket-Protocol: sip\r\n").as_bytes(), &allowed)), 101);
        assert_eq!(status(&answer(from("https://evil.example").as_bytes(), &[])), 101);
    }
}
