//! Turns a parsed message into a JSON tree (start line, each header with its typed value, body),
//! and renders that tree as text.

use herald_sip::headers::{Contact, NameAddr, Params, Typed, Via};
use herald_sip::uri::{Host, Uri};
use herald_sip::{Message, StartLine};
use serde_json::{json, Map, Value};
use std::fmt::Write;

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn message(msg: &Message) -> Value {
    let start = match msg.start_line() {
        StartLine::Request { .. } => json!({
            "type": "request",
            "method": msg.method().map(|m| m.as_str().to_owned()),
            "request_uri": msg.request_uri_bytes().map(lossy),
            "request_uri_parsed": msg.request_uri().map(|u| uri(&u)).unwrap_or(Value::Null),
        }),
        StartLine::Response { .. } => json!({
            "type": "response",
            "status": msg.status(),
            "reason": msg.reason().map(lossy),
        }),
    };
    let headers: Vec<Value> = msg
        .headers()
        .iter()
        .map(|h| {
            let typed = match msg.typed(h) {
                Ok(t) => typed_value(&t),
                Err(e) => json!({ "error": e.to_string() }),
            };
            json!({
                "name": lossy(msg.name_of(h)),
                "canonical": h.name.canonical(),
                "raw": lossy(msg.value_of(h)),
                "offset": h.line.start,
                "value": typed,
            })
        })
        .collect();
    json!({
        "start_line": start,
        "headers": headers,
        "body": {
            "length": msg.body().len(),
            "content_length_header": msg.content_length(),
            "content_type": msg.get(herald_sip::HeaderName::ContentType).map(lossy),
        },
        "trailing_octets_ignored": msg.trailing_octets(),
    })
}

fn host(h: &Host) -> Value {
    match h {
        Host::Name(n) => json!(n),
        Host::Ipv4(ip) => json!(ip.to_string()),
        Host::Ipv6(ip) => json!(format!("[{ip}]")),
    }
}

fn params<'a>(p: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> Value {
    Value::Array(p.map(|(n, v)| json!({ "name": n, "value": v })).collect())
}

pub fn uri(u: &Uri) -> Value {
    match u {
        Uri::Sip(s) => json!({
            "scheme": u.scheme(),
            "user": s.user,
            "user_unescaped": s.user_unescaped().map(|b| lossy(&b)),
            "password": s.password,
            "host": host(&s.host),
            "port": s.port,
            "params": params(s.params()),
            "headers": Value::Array(s.headers().map(|(n, v)| json!({ "name": n, "value": v })).collect()),
        }),
        Uri::Tel(t) => json!({
            "scheme": "tel",
            "number": t.number,
            "global": t.is_global(),
            "phone_context": t.phone_context(),
        }),
        Uri::Other(o) => json!({ "scheme": o.scheme, "opaque": o.rest }),
    }
}

fn gen_params(p: &Params) -> Value {
    params(p.iter())
}

fn name_addr(a: &NameAddr) -> Value {
    json!({
        "display_name": a.display_name,
        "uri": a.uri.as_str(),
        "uri_parsed": uri(&a.uri),
        "params": gen_params(&a.params),
    })
}

fn via(v: &Via) -> Value {
    json!({
        "protocol": format!("{}/{}", v.protocol_name, v.protocol_version),
        "transport": v.transport,
        "host": host(&v.host),
        "port": v.port,
        "branch": v.branch(),
        "received": v.received(),
        "rport": v.rport().map(|p| p.map_or(json!(true), |p| json!(p))),
        "maddr": v.maddr(),
        "ttl": v.ttl(),
        "params": gen_params(&v.params),
    })
}

fn typed_value(t: &Typed) -> Value {
    match t {
        Typed::Vias(v) => Value::Array(v.iter().map(via).collect()),
        Typed::Address(a) => name_addr(a),
        Typed::Addresses(a) => Value::Array(a.iter().map(name_addr).collect()),
        Typed::Contacts(c) => Value::Array(
            c.iter()
                .map(|c| match c {
                    Contact::Star => json!("*"),
                    Contact::Address(a) => {
                        let mut v = name_addr(a);
                        v["expires"] = json!(c.expires());
                        v["q"] = json!(c.q().map(|q| f64::from(q) / 1000.0));
                        v
                    }
                })
                .collect(),
        ),
        Typed::CallId(c) => json!(c),
        Typed::CSeq(c) => json!({ "seq": c.seq, "method": c.method.as_str() }),
        Typed::MaxForwards(n) => json!(n),
        Typed::Seconds(n) | Typed::ContentLength(n) => json!(n),
        Typed::MediaType(m) => json!({ "type": m.top, "subtype": m.sub, "params": gen_params(&m.params) }),
        Typed::MediaTypes(ms) => Value::Array(
            ms.iter().map(|m| json!({ "type": m.top, "subtype": m.sub, "params": gen_params(&m.params) })).collect(),
        ),
        Typed::Tokens(t) => json!(t),
        Typed::Auth(a) => json!({
            "scheme": a.scheme,
            "params": Value::Object(a.params.iter().map(|(n, v)| (n.to_owned(), json!(v))).collect::<Map<_, _>>()),
            "token68": a.token68,
        }),
        Typed::AuthInfo(p) => Value::Object(p.iter().map(|(n, v)| (n.to_owned(), json!(v))).collect()),
        Typed::RetryAfter(r) => json!({ "seconds": r.seconds, "comment": r.comment, "params": gen_params(&r.params) }),
        Typed::Date(secs) => json!({ "unix_seconds": secs }),
        Typed::Text(s) => json!(s),
        Typed::Raw(b) => json!({ "uninterpreted": lossy(b) }),
    }
}

/// One-line rendering of a JSON value for the text report: objects as `key=value` pairs
/// (nulls and empty lists left out), arrays comma-separated.
fn flat(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => printable(s),
        Value::Array(a) => a.iter().map(flat).collect::<Vec<_>>().join(" | "),
        Value::Object(o) => o
            .iter()
            .filter(|(k, v)| !v.is_null() && v != &&json!([]) && !k.ends_with("_parsed"))
            .map(|(k, v)| match v {
                Value::Object(_) | Value::Array(_) => format!("{k}=[{}]", flat(v)),
                _ => format!("{k}={}", flat(v)),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

/// Shows text as written, except control characters (a folded CRLF, an escaped NUL), which
/// would garble a terminal: those become `\r`, `\n`, `\t` or `\xNN`.
fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

pub fn render_text(r: &Value) -> String {
    let mut out = String::new();
    let s = &r["start_line"];
    match s["type"].as_str() {
        Some("request") => {
            let _ = writeln!(out, "request  {} {}", flat(&s["method"]), flat(&s["request_uri"]));
            if !s["request_uri_parsed"].is_null() {
                let _ = writeln!(out, "  uri    {}", flat(&s["request_uri_parsed"]));
            }
        }
        Some("response") => {
            let _ = writeln!(out, "response {} {}", s["status"], flat(&s["reason"]));
        }
        _ => {}
    }
    if let Some(headers) = r["headers"].as_array() {
        let _ = writeln!(out, "headers  {}", headers.len());
        for h in headers {
            let name = h["name"].as_str().unwrap_or("");
            let shown = match h["canonical"].as_str() {
                Some(c) if c != name => format!("{c} (as '{name}')"),
                _ => name.to_owned(),
            };
            let _ = writeln!(out, "  {shown}: {}", flat(&h["value"]));
        }
    }
    if !r["body"].is_null() {
        let _ = writeln!(out, "body     {} bytes  {}", r["body"]["length"], flat(&r["body"]["content_type"]));
    }
    if r["well_formed"] == json!(true) {
        let _ = writeln!(out, "verdict  well-formed");
        for n in r["notes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  note   {}", n.as_str().unwrap_or(""));
        }
    } else {
        let _ = writeln!(out, "verdict  MALFORMED: {}", flat(&r["error"]["message"]));
        let a = &r["server_action"];
        match a["action"].as_str() {
            Some("respond") => {
                let close = if a["close_stream"] == json!(true) { " and close the stream connection" } else { "" };
                let _ = writeln!(out, "  action answer {} {}{close}", a["status"], flat(&a["reason"]));
            }
            _ => {
                let _ = writeln!(out, "  action discard ({})", flat(&a["why"]));
            }
        }
    }
    out
}
