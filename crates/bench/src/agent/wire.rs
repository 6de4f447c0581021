//! Building the generator's messages. Requests are assembled from pre-formatted pieces (the
//! local sent-by, domain and transport are formatted once per run); responses copy the header
//! lines RFC 3261 §8.2.6.2 requires verbatim from the request.

mod echo;

pub use echo::{echo, echo_tagging};
pub(crate) use echo::{push_to_line, Head};

use super::find::find_either;
use bytes::Bytes;
use herald_core::transaction::AckSource;
use herald_sip::text::push_dec;
use herald_sip::{HeaderName, Message};
use std::fmt::Write;
use std::ops::Range;

/// The SDP offer the caller sends and the answer the callee returns: the size of a real audio
/// call's bodies, so the proxy parses realistic messages (seed 000's SIPp scenarios carry SDP).
pub const SDP_OFFER: &str = "v=0\r\no=bench 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
m=audio 6000 RTP/AVP 0 8\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n";
pub const SDP_ANSWER: &str = "v=0\r\no=bench 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
m=audio 6002 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n";

/// The header the caller uses to tell its own callee how long to ring (both ends are this
/// generator; a proxy forwards unknown headers untouched, RFC 3261 §16.6).
pub const RING_HEADER: &str = "X-Herald-Ring";

/// Everything constant about one side's messages.
#[derive(Debug, Clone)]
pub struct Local {
    /// "UDP" or "TCP" for Via.
    pub transport: &'static str,
    /// host:port of this side's socket (Via sent-by, Contact).
    pub hostport: String,
    /// ";transport=tcp" or "" for Contact URIs.
    pub uri_param: &'static str,
    pub domain: String,
    /// `SIP/2.0/{transport} {hostport};branch=`: a Via value up to its branch.
    via_start: String,
    /// `@{hostport}{uri_param}>` CRLF: a Contact line after its user. Both written once per run,
    /// each in one copy per message instead of four (~700 instructions a call, callgrind).
    contact_end: String,
}

/// The parts of one request.
pub struct Request<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub branch: &'a str,
    /// From value including its tag.
    pub from: &'a str,
    /// To value (with tag inside a dialog).
    pub to: &'a str,
    pub call_id: &'a str,
    pub cseq: u32,
    /// Route values in order (already with `<>`).
    pub routes: &'a [String],
    /// Contact user part, when the request carries a Contact.
    pub contact_user: Option<&'a str>,
    /// (header name, value) for credentials.
    pub auth: Option<(&'a str, &'a str)>,
    /// Extra complete header lines (each ending in CRLF).
    pub extra: &'a str,
    /// (Content-Type, body).
    pub body: Option<(&'a str, &'a str)>,
}

/// Where [`Local::write`] put the fields an ACK copies (byte offsets into the request).
struct Marks {
    uri: Range<usize>,
    via: Range<usize>,
    from: Range<usize>,
    call_id: Range<usize>,
    /// Offset of the first `Route: ` line.
    routes: usize,
}

impl Local {
    pub fn new(transport: &'static str, hostport: String, uri_param: &'static str, domain: String) -> Local {
        let via_start = ["SIP/2.0/", transport, " ", &hostport, ";branch="].concat();
        let contact_end = ["@", &hostport, uri_param, ">\r\n"].concat();
        Local { transport, hostport, uri_param, domain, via_start, contact_end }
    }

    pub fn request(&self, r: &Request<'_>) -> Bytes {
        Bytes::from(self.write(r).0)
    }

    /// An INVITE and what the ACK of a non-2xx final copies from it (RFC 3261 §17.1.1.3), as
    /// slices of the INVITE itself: herald-core's transaction takes them instead of parsing
    /// back what this generator just wrote.
    pub fn invite(&self, r: &Request<'_>) -> (Bytes, AckSource) {
        let (text, marks) = self.write(r);
        let bytes = Bytes::from(text);
        let mut at = marks.routes;
        let routes = r
            .routes
            .iter()
            .map(|route| {
                let value = at + "Route: ".len()..at + "Route: ".len() + route.len();
                at = value.end + 2;
                bytes.slice(value)
            })
            .collect();
        let ack = AckSource {
            request_uri: bytes.slice(marks.uri),
            top_via: bytes.slice(marks.via),
            routes,
            from: bytes.slice(marks.from),
            call_id: bytes.slice(marks.call_id),
            cseq: r.cseq,
        };
        (bytes, ack)
    }

    fn write(&self, r: &Request<'_>) -> (String, Marks) {
        let body = r.body.map(|(_, b)| b).unwrap_or("");
        let mut m = String::with_capacity(512 + body.len());
        let field = |m: &mut String, value: &str| {
            let start = m.len();
            m.push_str(value);
            start..m.len()
        };
        m.push_str(r.method);
        m.push(' ');
        let uri = field(&mut m, r.uri);
        m.push_str(" SIP/2.0\r\nVia: ");
        let via_start = m.len();
        m.push_str(&self.via_start);
        m.push_str(r.branch);
        let via = via_start..m.len() + ";rport".len();
        m.push_str(";rport\r\nMax-Forwards: 70\r\nFrom: ");
        let from = field(&mut m, r.from);
        for part in ["\r\nTo: ", r.to, "\r\nCall-ID: "] {
            m.push_str(part);
        }
        let call_id = field(&mut m, r.call_id);
        m.push_str("\r\nCSeq: ");
        push_dec(&mut m, u64::from(r.cseq));
        for part in [" ", r.method, "\r\n"] {
            m.push_str(part);
        }
        let routes = m.len();
        for route in r.routes {
            for part in ["Route: ", route, "\r\n"] {
                m.push_str(part);
            }
        }
        if let Some(user) = r.contact_user {
            self.push_contact(&mut m, user);
        }
        if let Some((name, value)) = r.auth {
            for part in [name, ": ", value, "\r\n"] {
                m.push_str(part);
            }
        }
        m.push_str(r.extra);
        if let Some((content_type, _)) = r.body {
            for part in ["Content-Type: ", content_type, "\r\n"] {
                m.push_str(part);
            }
        }
        push_body(&mut m, body);
        (m, Marks { uri, via, from, call_id, routes })
    }

    /// A response to a request whose copied lines are `echo` (see [`echo`]) and whose To line
    /// (with the local tag) is `to_line`.
    pub fn response(&self, status: u16, reason: &str, echo: &str, to_line: &str, contact_user: Option<&str>) -> Bytes {
        let answer = status / 100 == 2 && contact_user.is_some();
        // Room for all of it: the 200 with its answer outgrew the former guess (256 + echo) and
        // was copied once more while being written (~400 instructions a call, callgrind).
        let contact = contact_user.map_or(0, |user| user.len() + self.hostport.len() + 32);
        let body = if answer { SDP_ANSWER.len() + 32 } else { 0 };
        let mut m = String::with_capacity(64 + reason.len() + echo.len() + to_line.len() + contact + body);
        push_status_line(&mut m, status, reason);
        for part in [echo, to_line] {
            m.push_str(part);
        }
        if let Some(user) = contact_user {
            self.push_contact(&mut m, user);
        }
        if answer {
            m.push_str("Content-Type: application/sdp\r\n");
            push_body(&mut m, SDP_ANSWER);
        } else {
            push_body(&mut m, "");
        }
        Bytes::from(m)
    }

    /// Whether the top Via of `response` carries `branch` ([`top_via_has_branch`]), first
    /// checked as the Via this side wrote, copied back verbatim (§8.2.6.2): its sent-by and the
    /// branch as the first parameter, compared as bytes (~110 instructions a response less than
    /// the search for the parameter, which any other Via still gets).
    pub fn wrote_top_via(&self, response: &Message, branch: &str) -> bool {
        self.wrote_via(response.get(HeaderName::Via), branch)
    }

    /// [`Local::wrote_top_via`] of a response whose first Via line's value is `via`.
    pub fn wrote_via(&self, via: Option<&[u8]>, branch: &str) -> bool {
        let Some(via) = via else { return false };
        let ours = via.strip_prefix(self.via_start.as_bytes()).and_then(|rest| rest.strip_prefix(branch.as_bytes()));
        if ours
            .is_some_and(|after| after.first().is_none_or(|b| matches!(b, b';' | b',' | b' ' | b'\t' | b'\r' | b'\n')))
        {
            return true;
        }
        via_has_branch(via, branch)
    }

    /// The URI of `user`'s Contact (what [`Local::push_contact`] writes between `<>`).
    pub fn contact_uri(&self, user: &str) -> String {
        ["sip:", user, "@", &self.hostport, self.uri_param].concat()
    }

    /// The response without Contact or body to `request` ([`echo`] with no Record-Route, `tag`
    /// for a To without one), written straight into its buffer: what [`Local::response`] makes
    /// of [`echo`]'s two strings, without them (two allocations and a copy of the lines less
    /// for every BYE's 200).
    pub fn reply(&self, request: &Message, status: u16, reason: &str, tag: &str) -> Bytes {
        let mut m = String::with_capacity(request.as_bytes().len() + reason.len() + tag.len() + 64);
        push_status_line(&mut m, status, reason);
        echo::push_echo(&mut m, request, false, tag);
        push_body(&mut m, "");
        Bytes::from(m)
    }

    /// `Contact: <sip:user@our-socket;transport=...>` (a line).
    fn push_contact(&self, m: &mut String, user: &str) {
        for part in ["Contact: <sip:", user, &self.contact_end] {
            m.push_str(part);
        }
    }
}

/// `SIP/2.0 {status} {reason}` CRLF.
pub fn push_status_line(m: &mut String, status: u16, reason: &str) {
    match status {
        // The answers of every call, written whole (a number formatted is ~75 instructions).
        180 => m.push_str("SIP/2.0 180 "),
        200 => m.push_str("SIP/2.0 200 "),
        _ => {
            m.push_str("SIP/2.0 ");
            push_dec(m, u64::from(status));
            m.push(' ');
        }
    }
    m.push_str(reason);
    m.push_str("\r\n");
}

/// Content-Length, the end of the header section, and the body.
pub fn push_body(m: &mut String, body: &str) {
    if body.is_empty() {
        // Four of a call's six messages: no number to format.
        m.push_str("Content-Length: 0\r\n\r\n");
        return;
    }
    m.push_str("Content-Length: ");
    push_dec(m, body.len() as u64);
    m.push_str("\r\n\r\n");
    m.push_str(body);
}

/// Whether the top Via of `response` carries `;branch=` + `branch`: the branch half of matching a
/// response to a client transaction (RFC 3261 §17.1.3; the owner compares the CSeq method). The
/// top Via of a response to this generator is the one it wrote, copied back verbatim (§8.2.6.2,
/// §18.2.2; a proxy at most appends `received` or an `rport` value), so finding its own
/// parameter in the first Via value is enough; parsing the whole Via for it cost ~1.9k
/// instructions per response, a tenth of the generator's work per call. A Via this generator
/// did not write simply does not match.
pub fn top_via_has_branch(response: &Message, branch: &str) -> bool {
    response.get(HeaderName::Via).is_some_and(|via| via_has_branch(via, branch))
}

/// [`top_via_has_branch`] of the first Via line's value `via`.
fn via_has_branch(mut rest: &[u8], branch: &str) -> bool {
    // From one ';' to the next within the top value (which ends at the first ','): our branch
    // is the first parameter, so this rarely reads past the sent-by.
    loop {
        let Some(at) = find_either(rest, 0, b';', b',') else { return false };
        if rest[at] == b',' {
            return false;
        }
        rest = &rest[at + 1..];
        let value = rest.strip_prefix(b"branch=").and_then(|v| v.strip_prefix(branch.as_bytes()));
        if value
            .is_some_and(|after| after.first().is_none_or(|b| matches!(b, b';' | b',' | b' ' | b'\t' | b'\r' | b'\n')))
        {
            return true;
        }
    }
}

/// The ACK for a non-2xx final response (RFC 3261 §17.1.1.3): same Request-URI (the To URI for
/// this generator's requests, which never differ), the top Via of the response (so the same
/// branch), From, To with the response's tag, Call-ID, and the CSeq number with method ACK.
/// Built from the response alone so that even a retransmitted final for a call that is already
/// over is acknowledged.
pub fn ack_for_failure(response: &Message) -> Option<Bytes> {
    let to = response.to_header().ok()?;
    let uri = to.uri.as_str();
    let seq = response.cseq().ok()?.seq;
    let mut m = String::with_capacity(400);
    let _ = write!(m, "ACK {uri} SIP/2.0\r\n");
    let via = response.field(HeaderName::Via)?;
    let first_via = String::from_utf8_lossy(response.value_of(via));
    // Only the top value: a folded or comma-separated Via line may hold several.
    let top = first_via.split(',').next().unwrap_or("").trim();
    let _ = write!(m, "Via: {top}\r\nMax-Forwards: 70\r\n");
    for (name, header) in [("From", HeaderName::From), ("To", HeaderName::To), ("Call-ID", HeaderName::CallId)] {
        let value = response.get(header)?;
        let _ = write!(m, "{name}: {}\r\n", String::from_utf8_lossy(value));
    }
    let _ = write!(m, "CSeq: {seq} ACK\r\nContent-Length: 0\r\n\r\n");
    Some(Bytes::from(m))
}
