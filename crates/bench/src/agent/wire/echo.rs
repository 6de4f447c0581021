//! The lines a response copies from its request (RFC 3261 §8.2.6.2, §12.1.1), copied verbatim
//! from the request's text, and the To line with our tag.

use herald_sip::{HeaderName, Message};
use std::ops::Range;

/// The lines a response copies from its request (RFC 3261 §8.2.6.2: Via in order, From,
/// Call-ID, CSeq; §12.1.1: Record-Route for responses that create a dialog), verbatim, and the To
/// line with `tag` added when the request had none.
pub fn echo(request: &Message, record_route: bool, tag: &str) -> (String, String) {
    echo_tagging(request, record_route, untagged(request).then_some(tag))
}

/// Appends both parts of [`echo`] to `out`, the copied lines and then the To line (with `tag`
/// added when the request's To has none).
pub(super) fn push_echo(out: &mut String, request: &Message, record_route: bool, tag: &str) {
    let head = Head::of(request);
    echo_lines(out, &head, request, record_route);
    push_to_lines(out, &head, request, untagged(request).then_some(tag));
}

/// [`echo`] of a request whose To is known to have no tag (`Some(tag)`: it is added) or to have
/// one (None), without reading the To again (our callee has checked the INVITE's; the tag's
/// search cost ~150 instructions a call, callgrind).
pub fn echo_tagging(request: &Message, record_route: bool, tag: Option<&str>) -> (String, String) {
    let mut echo = String::with_capacity(512);
    let mut to_line = String::new();
    let head = Head::of(request);
    echo_lines(&mut echo, &head, request, record_route);
    push_to_lines(&mut to_line, &head, request, tag);
    (echo, to_line)
}

/// The request's To has no tag (or none that reads as one).
fn untagged(request: &Message) -> bool {
    request.to_tag().ok().flatten().is_none()
}

/// Appends the lines a response copies from `request` but To ([`echo`]).
fn echo_lines(out: &mut String, head: &Head<'_>, request: &Message, record_route: bool) {
    // Lines copied one after another in the request are copied in one piece (a proxied INVITE's
    // Record-Route and two Vias, its Call-ID and CSeq): each copy costs its boundary checks.
    let mut run: Range<usize> = 0..0;
    for h in request.headers() {
        let copy = match h.name {
            HeaderName::Via | HeaderName::From | HeaderName::CallId | HeaderName::CSeq => true,
            HeaderName::RecordRoute => record_route,
            _ => false,
        };
        let line = h.line.range();
        if !copy {
            continue;
        }
        if run.end == line.start && !run.is_empty() {
            run.end = line.end;
        } else {
            if !run.is_empty() {
                head.push(out, run);
            }
            run = line;
        }
    }
    if !run.is_empty() {
        head.push(out, run);
    }
}

/// Appends the To line of a response to `request`, with `tag` added when there is one (the
/// request had none).
fn push_to_lines(out: &mut String, head: &Head<'_>, request: &Message, tag: Option<&str>) {
    for h in request.headers().iter().filter(|h| h.name == HeaderName::To) {
        push_to_line(out, head, h.value.range(), tag);
    }
}

/// Appends `To: {value}[;tag={tag}]` CRLF, the value the bytes of `head` at `value`.
pub(crate) fn push_to_line(out: &mut String, head: &Head<'_>, value: Range<usize>, tag: Option<&str>) {
    out.reserve(value.len() + tag.map_or(0, str::len) + 16);
    out.push_str("To: ");
    head.push(out, value);
    if let Some(tag) = tag {
        out.push_str(";tag=");
        out.push_str(tag);
    }
    out.push_str("\r\n");
}

/// A message's header section as text, checked once: header fields are ASCII in practice (RFC
/// 3261 §25.1 allows UTF-8 in some), and one UTF-8 check of the whole section costs a fraction
/// of one per copied line. A section that is not UTF-8 (a hostile peer's bytes) is copied line by
/// line with invalid bytes replaced, never raw. Also a part of the header section (the lines a
/// `Peek` read), checked alone ([`Head::span`]).
pub(crate) struct Head<'a> {
    bytes: &'a [u8],
    /// `bytes[base..]` up to the end of the part checked, when that is UTF-8.
    text: Option<&'a str>,
    base: usize,
}

impl<'a> Head<'a> {
    fn of(message: &'a Message) -> Head<'a> {
        let bytes = message.as_bytes();
        Head::span(bytes, 0..message.head_end().min(bytes.len()))
    }

    /// The header lines of `bytes` at `span`, checked as UTF-8 once.
    pub(crate) fn span(bytes: &'a [u8], span: Range<usize>) -> Head<'a> {
        let text = bytes.get(span.clone()).and_then(|b| std::str::from_utf8(b).ok());
        Head { bytes, text, base: span.start }
    }

    /// Appends the bytes at `range` (a header line or value: it starts and ends next to ASCII
    /// bytes, so on character boundaries).
    pub(crate) fn push(&self, out: &mut String, range: Range<usize>) {
        let checked = self.text.and_then(|t| t.get(range.start.checked_sub(self.base)?..range.end - self.base));
        match checked {
            Some(text) => out.push_str(text),
            None => out.push_str(&String::from_utf8_lossy(self.bytes.get(range).unwrap_or_default())),
        }
    }
}
