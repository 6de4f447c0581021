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

use crate::headers::{CSeq, Params, PlainVia, Via, ViaParams};
use crate::method::Method;
use crate::span::Span;
use crate::uri::{Host, PlainSip, Scheme, SipUri};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The validated fields of one message, as ranges of its buffer. The default (no fields) is
/// what a memo's place holds before its first check, never read (module `message::memo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Checked {
    /// A request's method when it is one herald knows (extensions are read from the start line).
    pub method: Option<Method<'static>>,
    /// A request's sip: or sips: Request-URI (other schemes are parsed again when asked for:
    /// routing reads the Request-URI of nearly every request several times).
    pub request_uri: Option<SipUriSpans>,
    pub top_via: ViaSpans,
    /// How many Via values the message carries (all of them split, the top one parsed).
    pub via_count: u32,
    pub from_tag: Option<TextSpan>,
    pub to_tag: Option<TextSpan>,
    pub call_id: TextSpan,
    pub cseq_seq: u32,
    pub cseq_method: TextSpan,
    /// The CSeq method when it is one herald knows (read without comparing its text again).
    pub cseq_known: Option<Method<'static>>,
    /// Max-Forwards (`None` when absent): the proxy reads it again to check and to decrement it.
    pub max_forwards: Option<u8>,
}

/// A parsed [`Via`] as ranges of the message buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ViaSpans {
    protocol_name: TextSpan,
    protocol_version: TextSpan,
    transport: TextSpan,
    host: HostSpan,
    port: Option<u16>,
    params: Span,
    branch: Option<TextSpan>,
    /// `rport`, `received` and `maddr`, as places in the parameter text (see `params`).
    found: ViaParams,
}

/// A parsed [`SipUri`] as ranges of the message buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SipUriSpans {
    scheme: Scheme,
    user: Option<TextSpan>,
    password: Option<TextSpan>,
    host: HostSpan,
    port: Option<u16>,
    raw: TextSpan,
    params: TextSpan,
    headers: TextSpan,
}

impl SipUriSpans {
    /// `None` when a part is not a slice of `buf` (then the URI is simply parsed again when
    /// asked for); an empty part may be any empty string.
    pub fn of(buf: &[u8], uri: &SipUri<'_>) -> Option<SipUriSpans> {
        let s = |part: &str| match part.is_empty() {
            true => Some(TextSpan(Span::new(0, 0))),
            false => TextSpan::of(buf, part),
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

    /// The Request-URI at `uri` in `buf`, read in place when it has the plain shape (see
    /// [`PlainSip`]): what [`SipUriSpans::of`] gives for its parse (test
    /// `plain_uris_read_in_place_as_parsed`), without making a [`SipUri`] and finding its
    /// parts in the buffer again. `None` for any other URI.
    pub fn read_plain(buf: &[u8], uri: Span) -> Option<SipUriSpans> {
        let s = buf.get(uri.range())?;
        let plain = PlainSip::read(s)?;
        // The places of a plain URI are ASCII octets of `s` (the classes it matched), so their
        // ranges are text of the buffer; an absent part is the empty range, as in `of`.
        let at = uri.start as usize;
        let text = |r: std::ops::Range<usize>| TextSpan(Span::new(at + r.start, at + r.end));
        let empty = TextSpan(Span::new(0, 0));
        Some(SipUriSpans {
            scheme: Scheme::Sip,
            user: plain.user.map(text),
            password: None,
            host: HostSpan::Ipv4(plain.addr),
            port: plain.port,
            raw: text(0..s.len()),
            params: if plain.params.is_empty() { empty } else { text(plain.params) },
            headers: empty,
        })
    }

    /// The scheme of [`SipUriSpans::view`], without the rest.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn view<'a>(&self, buf: &'a [u8]) -> SipUri<'a> {
        let t = |span: TextSpan| text(buf, span);
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
    Name(TextSpan),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
}

impl Default for HostSpan {
    /// For [`Checked`]'s default, which is never read.
    fn default() -> HostSpan {
        HostSpan::Ipv4(Ipv4Addr::UNSPECIFIED)
    }
}

impl HostSpan {
    fn of(buf: &[u8], host: &Host<'_>) -> HostSpan {
        match *host {
            Host::Name(n) => HostSpan::Name(TextSpan::within(buf, n)),
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
///
/// In wrapping arithmetic, with one test of each end: a part that starts before the buffer
/// has a `start` past the end of the address space, so that either `end` wraps below it or
/// lies past `buf.len()` (a buffer ends within the address space); the checked subtraction
/// and addition tested for it apart (callgrind: about 4 instructions more a part, four or
/// more parts a message checked).
#[inline(always)]
fn slice_span(buf: &[u8], part: &[u8]) -> Option<Span> {
    let start = (part.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    let end = start.wrapping_add(part.len());
    (start <= end && end <= buf.len()).then(|| Span::new(start, end))
}

/// Where `part`, a slice of `buf`, sits in it. Every part the parsers hand out is one; were one
/// not (a bug), the memo would hold an empty range rather than a wrong one.
pub(crate) fn span_in(buf: &[u8], part: &[u8]) -> Span {
    let span = slice_span(buf, part);
    debug_assert!(span.is_some(), "not a slice of the buffer");
    span.unwrap_or_default()
}

/// A range of the message buffer whose bytes are UTF-8 text: the range of a `&str` that
/// borrowed from the buffer when the memo was made (or bytes checked to be ASCII then). The
/// buffer never changes after parsing, so the memo hands the text out again without checking
/// it a second time: the proxy reads the top Via, the tags, the Call-ID and the CSeq several
/// times per message, and callgrind counted the UTF-8 checks of those reads at about a third
/// of their cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TextSpan(Span);

impl TextSpan {
    /// The range of `part` in `buf`, when it is a slice of it.
    pub fn of(buf: &[u8], part: &str) -> Option<TextSpan> {
        slice_span(buf, part.as_bytes()).map(TextSpan)
    }

    /// The range of `part`, a slice of `buf`; empty (and a debug assertion) when it is not.
    pub fn within(buf: &[u8], part: &str) -> TextSpan {
        let span = Self::of(buf, part);
        debug_assert!(span.is_some(), "not a slice of the buffer");
        span.unwrap_or_default()
    }

    /// `span` of `buf`, when it is in range and its bytes are ASCII (a token); else empty.
    pub fn ascii(buf: &[u8], span: Span) -> TextSpan {
        match buf.get(span.range()) {
            Some(bytes) if crate::scan::is_ascii(bytes) => TextSpan(span),
            _ => TextSpan::default(),
        }
    }
}

/// The text of a [`TextSpan`] of the buffer it was made from.
pub(crate) fn text(buf: &[u8], span: TextSpan) -> &str {
    let bytes = &buf[span.0.range()];
    debug_assert!(std::str::from_utf8(bytes).is_ok());
    // SAFETY: a `TextSpan` is made only by the constructors above: the range of a `&str` found
    // inside this buffer, or a range whose bytes were checked to be ASCII, or an empty one.
    // The memo holding it is made for the buffer of its own message (`Message::check`), which
    // is immutable (`Bytes`, set once in `Message::assemble`, where the memo is `None`). So
    // these are the same bytes, still valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

impl ViaSpans {
    pub fn of(buf: &[u8], via: &Via<'_>) -> ViaSpans {
        let s = |part: &str| TextSpan::within(buf, part);
        ViaSpans {
            protocol_name: s(via.protocol_name),
            protocol_version: s(via.protocol_version),
            transport: s(via.transport),
            host: HostSpan::of(buf, &via.host),
            port: via.port,
            params: span_in(buf, via.params.raw()),
            branch: via.branch().map(s),
            found: via.found(),
        }
    }

    /// The top Via of `buf`, whose value is `value`: read in place when it is plain (see
    /// [`PlainVia`]), else parsed; `None` when it is malformed.
    pub fn read(buf: &[u8], value: Span) -> Option<ViaSpans> {
        let s = buf.get(value.range())?;
        let Some(plain) = PlainVia::read(s) else { return Some(ViaSpans::of(buf, &Via::parse(s).ok()?)) };
        Some(ViaSpans::of_plain(value, plain))
    }

    /// The top Via whose value is `value`, read as `plain` (by [`PlainVia::read`] of that
    /// value, or of its line by the header scan: module `message::via_split`).
    #[inline]
    pub fn of_plain(value: Span, plain: PlainVia) -> ViaSpans {
        // The places of a plain Via are ASCII octets of its value (the pattern and classes it
        // matched), so their ranges are text of the buffer.
        let at = value.start as usize;
        let text = |start: usize, end: usize| TextSpan(Span::new(at + start, at + end));
        ViaSpans {
            protocol_name: text(0, 3),
            protocol_version: text(4, 7),
            transport: text(8, 11),
            host: HostSpan::Ipv4(plain.addr),
            port: plain.port,
            params: Span::new(at + plain.params_at, value.end as usize),
            branch: plain.branch.map(|(start, end)| text(start, end)),
            found: plain.found,
        }
    }

    /// The branch of [`ViaSpans::view`], without the rest.
    pub fn branch<'a>(&self, buf: &'a [u8]) -> Option<&'a str> {
        self.branch.map(|b| text(buf, b))
    }

    /// The `rport` of [`ViaSpans::view`], without the rest.
    pub fn rport(&self, buf: &[u8]) -> Option<Option<u16>> {
        self.found.rport(&buf[self.params.range()])
    }

    /// The `maddr` of [`ViaSpans::view`], without the rest.
    pub fn maddr<'a>(&self, buf: &'a [u8]) -> Option<&'a str> {
        self.found.maddr(&buf[self.params.range()])
    }

    /// The host and port of [`ViaSpans::view`], without the rest.
    pub fn sent_by<'a>(&self, buf: &'a [u8]) -> (Host<'a>, Option<u16>) {
        (self.host.view(buf), self.port)
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
            self.found,
        )
    }
}

/// A known method without the lifetime of the text it was read from (an extension has one).
pub(crate) fn known_method(m: Method<'_>) -> Option<Method<'static>> {
    Some(match m {
        Method::Invite => Method::Invite,
        Method::Ack => Method::Ack,
        Method::Bye => Method::Bye,
        Method::Cancel => Method::Cancel,
        Method::Register => Method::Register,
        Method::Options => Method::Options,
        Method::Info => Method::Info,
        Method::Prack => Method::Prack,
        Method::Subscribe => Method::Subscribe,
        Method::Notify => Method::Notify,
        Method::Update => Method::Update,
        Method::Message => Method::Message,
        Method::Refer => Method::Refer,
        Method::Publish => Method::Publish,
        Method::Extension(_) => return None,
    })
}

impl Checked {
    pub fn cseq<'a>(&self, buf: &'a [u8]) -> CSeq<'a> {
        let method = self.cseq_known.unwrap_or_else(|| Method::from_token(text(buf, self.cseq_method)));
        CSeq { seq: self.cseq_seq, method }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Request-URI read in place gives the memo that parsing it and finding its parts gives;
    /// the URIs the plain read declines are parsed as before.
    #[test]
    fn plain_uris_read_in_place_as_parsed() {
        let uris: &[&[u8]] = &[
            b"sip:bob@127.0.0.1:5060",
            b"sip:127.0.0.1:19102;transport=UDP",
            b"sip:192.0.2.1;lr;r2=on",
            b"sip:+4912345@10.0.0.1",
            b"sip:a;b=c@192.0.2.1:0005060;x=[::1]",
            b"sip:bob@host.example.com",
            b"sip:bob:pw@192.0.2.1",
            b"sip:b%41b@192.0.2.1",
            b"SIP:bob@192.0.2.1",
            b"sips:bob@192.0.2.1",
            b"sip:192.0.2.1?h=v",
            b"sip:192.0.2.1;a=",
            b"sip:1.2.3.4:65536",
        ];
        let mut plain = 0;
        for uri in uris {
            let mut buf = b"INVITE ".to_vec();
            buf.extend_from_slice(uri);
            buf.extend_from_slice(b" SIP/2.0");
            let span = Span::new(7, 7 + uri.len());
            let parsed = match crate::uri::Uri::parse(&buf[7..7 + uri.len()]) {
                Ok(crate::uri::Uri::Sip(u)) => SipUriSpans::of(&buf, &u),
                _ => None,
            };
            if let Some(read) = SipUriSpans::read_plain(&buf, span) {
                plain += 1;
                assert_eq!(Some(read), parsed, "{}", String::from_utf8_lossy(uri));
            }
        }
        assert_eq!(plain, 5);
    }

    /// Slices of a buffer are found where they are; slices of another buffer, before or after
    /// it, and of overlapping ones are not (as the checked arithmetic this replaced said).
    #[test]
    fn slice_spans_are_those_of_the_checked_arithmetic() {
        let checked = |buf: &[u8], part: &[u8]| {
            let start = (part.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
            (start.checked_add(part.len())? <= buf.len()).then(|| Span::new(start, start + part.len()))
        };
        let all = [7u8; 64];
        let (left, rest) = all.split_at(20);
        let (buf, right) = rest.split_at(24);
        let mut parts: Vec<&[u8]> = Vec::new();
        for from in 0..=all.len() {
            for to in from..=all.len() {
                parts.push(&all[from..to]);
            }
        }
        parts.extend([left, right, &[][..], &b"elsewhere"[..]]);
        let mut found = 0;
        for part in parts {
            let want = checked(buf, part);
            found += usize::from(want.is_some());
            assert_eq!(slice_span(buf, part), want, "{:?} in {:?}", part.as_ptr_range(), buf.as_ptr_range());
        }
        assert!(found >= 25 * 24 / 2);
    }

    /// A Via read in place gives the memo that parsing it and finding its parts gives, for the
    /// plain shape with every parameter herald picks out, and for values that are not plain.
    #[test]
    fn vias_read_in_place_as_parsed() {
        let values: &[&[u8]] = &[
            b"SIP/2.0/UDP 127.0.0.1:19101;branch=z9hG4bK-29734-1-0",
            b"SIP/2.0/TCP 10.0.0.1;rport;branch=z9hG4bKa;received=192.0.2.9;maddr=224.0.0.1",
            b"SIP/2.0/UDP 192.0.2.1:5060;rport=5070;BRANCH=z9hG4bKx;branch=second;Received=1.2.3.4",
            b"SIP/2.0/UDP 192.0.2.1:5060;branch;rport",
            b"SIP/2.0/UDP 192.0.2.1:5060",
            b"SIP/2.0/UDP 192.0.2.1",
            b"SIP/2.0/UDP 192.0.2.1;ttl=1;x;branch=z9hG4bK.1",
            b"SIP/2.0/WSS host.example.com;branch=z9hG4bK1",
            b"SIP/2.0/UDP [2001:db8::1]:5060;branch=z9hG4bK1",
            b"SIP / 2.0 / UDP 192.0.2.1 ; branch = z9hG4bK1",
            b"SIP/2.0/UDP 192.0.2.1;branch=\"quoted\"",
            b"SIP/2.0/UDP 192.0.2.300;branch=z9hG4bK1",
            b"SIP/2.0/UDP 192.0.2.1:99999;branch=z9hG4bK1",
            b"SIP/2.0/UDP 192.0.2.1;branch=",
        ];
        for value in values {
            let mut buf = b"Via: ".to_vec();
            buf.extend_from_slice(value);
            let span = Span::new(5, buf.len());
            let want = Via::parse(&buf[5..]).ok().map(|via| ViaSpans::of(&buf, &via));
            assert_eq!(ViaSpans::read(&buf, span), want, "{}", String::from_utf8_lossy(value));
        }
    }
}
