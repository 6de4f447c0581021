//! What a server would do with the message: the response for an error, and notes for
//! well-formed messages that a proxy would still refuse (RFC 3261 §16.3, RFC 4475 §3.3).

use herald_sip::headers::Contact;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message, ParseError};
use serde_json::{json, Value};

pub fn error_report(size: usize, msg: Option<&Message>, e: &ParseError) -> Value {
    let is_response = msg.map(|m| !m.is_request()).unwrap_or_else(|| e.kind == herald_sip::ErrorKind::StatusCode);
    let action = if is_response {
        // RFC 4475 §3.1.2.5 and §3.1.2.19: malformed responses are discarded.
        json!({ "action": "discard", "why": "malformed responses are dropped, never answered" })
    } else {
        let (code, reason) = e.response();
        json!({ "action": "respond", "status": code, "reason": reason, "close_stream": e.breaks_stream_framing() })
    };
    json!({
        "well_formed": false,
        "input_bytes": size,
        "error": { "message": e.to_string(), "kind": format!("{:?}", e.kind), "offset": e.offset, "header": e.header },
        "server_action": action,
    })
}

/// Observations about a well-formed message that change how a proxy or registrar handles it.
pub fn notes(msg: &Message) -> Vec<String> {
    let mut notes = Vec::new();
    if msg.trailing_octets() > 0 {
        notes.push(format!(
            "{} octets after Content-Length were ignored (RFC 4475 §3.1.1.8: never forward them)",
            msg.trailing_octets()
        ));
    }
    if let Ok(via) = msg.top_via() {
        if via.branch().is_some_and(|b| b == herald_sip::headers::MAGIC_COOKIE) {
            notes.push("top Via branch is the bare magic cookie: no usable transaction id (RFC 4475 §3.2.1)".into());
        } else if !via.has_rfc3261_branch() {
            notes
                .push("top Via has no RFC 3261 branch: transactions match by RFC 2543 rules (RFC 3261 §17.2.3)".into());
        }
    }
    // A proxy forwards a response to the second Via (RFC 3261 §16.7 step 9).
    if let Some(Ok(next)) = msg.vias().nth(1) {
        if matches!(next.host, herald_sip::uri::Host::Ipv4(ip) if ip.is_broadcast()) && !msg.is_request() {
            notes.push("response would go to a broadcast Via: a proxy drops it (RFC 4475 §3.3.10)".into());
        }
    }
    if !msg.is_request() {
        return notes;
    }
    match msg.request_uri() {
        Ok(Uri::Sip(_)) => {}
        Ok(Uri::Tel(_)) => notes.push("tel: Request-URI: a SIP proxy without tel routing answers 416".into()),
        Ok(Uri::Other(u)) => notes.push(format!(
            "Request-URI scheme '{}' is not sip/sips/tel: a proxy answers 416 Unsupported URI Scheme (RFC 3261 §16.3)",
            u.scheme
        )),
        Err(_) => {}
    }
    if msg.max_forwards().ok().flatten() == Some(0) {
        notes.push(if msg.method() == Some(herald_sip::Method::Options) {
            "Max-Forwards is 0: a proxy must not forward it; it answers the OPTIONS itself or 483 Too Many Hops (RFC 3261 §16.3 step 3)".into()
        } else {
            "Max-Forwards is 0: a proxy answers 483 Too Many Hops (RFC 3261 §16.3 step 3)".into()
        });
    }
    let proxy_require: Vec<&str> = msg.tokens(HeaderName::ProxyRequire).filter_map(Result::ok).collect();
    if !proxy_require.is_empty() {
        notes.push(format!(
            "Proxy-Require: {}: a proxy that lacks these answers 420 Bad Extension with Unsupported (RFC 3261 §16.3 step 5)",
            proxy_require.join(", ")
        ));
    }
    if let Some(m) = msg.method().filter(|m| !m.is_known()) {
        notes.push(format!("unknown method {m}: a proxy forwards it, an endpoint answers 501 (RFC 3261 §8.2.1)"));
    }
    if msg.method() == Some(herald_sip::Method::Register) {
        let contacts: Vec<Contact> = msg.contacts().filter_map(Result::ok).collect();
        notes.push(format!("REGISTER with {} Contact value(s)", contacts.len()));
        if let Ok(to) = msg.to_header() {
            if !matches!(to.uri, Uri::Sip(_)) {
                notes.push("To is not a sip/sips URI: a registrar answers 400 (RFC 4475 §3.3.4)".into());
            }
        }
    }
    notes
}
