//! What [`Message::check`] learnt while validating a message, kept in the message so that the
//! proxy's later reads of the top Via, the From and To tags, the Call-ID and the CSeq cost an
//! index instead of a parse.
//!
//! Seed 004 measured parsing at about a quarter of a proxy's CPU and asked for parsing only what
//! routing needs. Herald's lazy accessors do that, but a stateful proxy reads the same few
//! headers many times per message: the receipt checks, the shard choice, the transaction key,
//! the response destination, the forwarding edits. Callgrind counted about 30 Via parses per
//! call through herald before this memo. The memo stores byte ranges of the message's own
//! buffer (a message never changes after parsing), so the values handed out still borrow from
//! that buffer, as freshly parsed ones do.

use crate::headers::{CSeq, Params, Via};
use crate::method::Method;
use crate::scan;
use crate::span::Span;
use crate::uri::{Host, Scheme, SipUri};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The validated fields of one message, as ranges of its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checked {
    /// A request's sip: or sips: Request-URI (other schemes are parsed again when asked for:
    /// routing reads the Request-URI of nearly every request several times).
    pub request_uri: Option<SipUriSpans>,
    pub top_via: ViaSpans,
    pub from_tag: Option<Span>,
    pub to_tag: Option<Span>,
    pub call_id: Span,
    pub cseq_seq: u32,
    pub cseq_method: Span,
}

/// A parsed [`Via`] as ranges of the message buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ViaSpans {
    protocol_name: Span,
    protocol_version: Span,
    transport: Span,
    host: HostSpan,
    port: Option<u16>,
    params: Span,
    branch: Option<Span>,
}

/// A parsed [`SipUri`] as ranges of the message buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SipUriSpans {
    scheme: Scheme,
    user: Option<Span>,
    password: Option<Span>,
    host: HostSpan,
    port: Option<u16>,
    raw: Span,
    params: Span,
    headers: Span,
}

impl SipUriSpans {
    /// `None` when a part is not a slice of `buf` (then the URI is simply parsed again when
    /// asked for); an empty part may be any empty string.
    pub fn of(buf: &[u8], uri: &SipUri<'_>) -> Option<SipUriSpans> {
        let s = |part: &str| match part.is_empty() {
            true => Some(Span::new(0, 0)),
            false => slice_span(buf, part.as_bytes()),
        };
        let (raw, params, headers) = uri.raw_parts();
        let opt = |part: Option<&str>| match part {
            Some(p) => s(p).map(Some),
            None => Some(None),
        };
        let host = match uri.host {
            Host::Name(n) => HostSpan::Name(s(n)?),
            Host::Ipv4(a) => HostSpan::Ipv4(a),
            Host::Ipv6(a) => HostSpan::Ipv6(a),
        };
        Some(SipUriSpans {
            scheme: uri.scheme,
            user: opt(uri.user)?,
            password: opt(uri.password)?,
            host,
            port: uri.port,
            raw: s(raw)?,
            params: s(params)?,
            headers: s(headers)?,
        })
    }

    pub fn view<'a>(&self, buf: &'a [u8]) -> SipUri<'a> {
        let t = |span: Span| text(buf, span);
        SipUri::from_parts(
            self.scheme,
            self.user.map(t),
            self.password.map(t),
            self.host.view(buf),
            self.port,
            t(self.raw),
            t(self.params),
            t(self.headers),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostSpan {
    Name(Span),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
}

impl HostSpan {
    fn of(buf: &[u8], host: &Host<'_>) -> HostSpan {
        match *host {
            Host::Name(n) => HostSpan::Name(span_in(buf, n.as_bytes())),
            Host::Ipv4(a) => HostSpan::Ipv4(a),
            Host::Ipv6(a) => HostSpan::Ipv6(a),
        }
    }

    fn view<'a>(&self, buf: &'a [u8]) -> Host<'a> {
        match *self {
            HostSpan::Name(n) => Host::Name(text(buf, n)),
            HostSpan::Ipv4(a) => Host::Ipv4(a),
            HostSpan::Ipv6(a) => Host::Ipv6(a),
        }
    }
}

/// Where `part` sits in `buf`, when it is a slice of it.
fn slice_span(buf: &[u8], part: &[u8]) -> Option<Span> {
    let start = (part.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
    (start + part.len() <= buf.len()).then(|| Span::new(start, start + part.len()))
}

/// Where `part`, a slice of `buf`, sits in it.
pub(crate) fn span_in(buf: &[u8], part: &[u8]) -> Span {
    let start = (part.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    debug_assert!(start <= buf.len() && start + part.len() <= buf.len(), "not a slice of the buffer");
    Span::new(start, start + part.len())
}

/// The text of a range that held a `&str` when the memo was made (tokens and words: ASCII).
pub(crate) fn text(buf: &[u8], span: Span) -> &str {
    scan::ascii_str(&buf[span.range()])
}

impl ViaSpans {
    pub fn of(buf: &[u8], via: &Via<'_>) -> ViaSpans {
        let s = |part: &str| span_in(buf, part.as_bytes());
        ViaSpans {
            protocol_name: s(via.protocol_name),
            protocol_version: s(via.protocol_version),
            transport: s(via.transport),
            host: HostSpan::of(buf, &via.host),
            port: via.port,
            params: span_in(buf, via.params.raw()),
            branch: via.branch().map(s),
        }
    }

    pub fn view<'a>(&self, buf: &'a [u8]) -> Via<'a> {
        let host = self.host.view(buf);
        Via::from_parts(
            text(buf, self.protocol_name),
            text(buf, self.protocol_version),
            text(buf, self.transport),
            host,
            self.port,
            Params::from_raw(&buf[self.params.range()]),
            self.branch.map(|b| text(buf, b)),
        )
    }
}

impl Checked {
    pub fn cseq<'a>(&self, buf: &'a [u8]) -> CSeq<'a> {
        CSeq { seq: self.cseq_seq, method: Method::from_token(text(buf, self.cseq_method)) }
    }
}
