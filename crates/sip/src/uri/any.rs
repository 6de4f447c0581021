//! A URI of any scheme: which grammar a URI's text follows (sip/sips, tel, or opaque) and the
//! entry points that parse a whole URI, [`Uri::parse`], [`SipUri::parse`] and [`TelUri::parse`].
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;

use super::error::{UriError, MAX_URI_LEN};
use super::escape;
use super::plain::PlainSip;
use super::sip::{self, Scheme, SipUri};
use super::tel::{self, TelUri};

/// Any absolute URI whose scheme is not sip, sips or tel (RFC 3261 §25.1
/// `absoluteURI`), e.g. RFC 4475 §3.3.2 `nobodyknowsthisscheme:totallyopaquecontent`
/// or §3.3.3 `soap.beep://192.0.2.103:3002`. Kept opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbsoluteUri<'a> {
    /// As written.
    pub scheme: &'a str,
    /// Everything after the first ':'; never empty.
    pub rest: &'a str,
    /// The whole URI text.
    raw: &'a str,
}

impl<'a> AbsoluteUri<'a> {
    /// The exact original text.
    pub fn as_str(&self) -> &'a str {
        self.raw
    }
}

impl fmt::Display for AbsoluteUri<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw)
    }
}

/// A parsed URI. The derived `PartialEq` is textual/structural; use
/// [`Uri::equivalent`] for protocol equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uri<'a> {
    /// sip: or sips: (RFC 3261 §19.1).
    Sip(SipUri<'a>),
    /// tel: (RFC 3966).
    Tel(TelUri<'a>),
    /// Any other scheme, kept opaque.
    Other(AbsoluteUri<'a>),
}

impl<'a> Uri<'a> {
    /// Parses a whole URI (the bytes are exactly the URI, no surrounding <> or whitespace).
    /// A sip: URI of the usual shape is read in one pass (see [`PlainSip`]), any other by
    /// the grammar.
    pub fn parse(input: &'a [u8]) -> Result<Uri<'a>, UriError> {
        match PlainSip::read(input).and_then(|plain| plain.uri(input)) {
            Some(uri) => Ok(Uri::Sip(uri)),
            None => Self::parse_general(input),
        }
    }

    /// [`Uri::parse`] by the grammar, whatever the URI's shape.
    pub(crate) fn parse_general(input: &'a [u8]) -> Result<Uri<'a>, UriError> {
        if input.len() > MAX_URI_LEN {
            return Err(UriError::new(MAX_URI_LEN, "URI too long"));
        }
        let parsed = match escape::ascii_text(input) {
            Ok(s) => parse_text(s),
            Err(valid_up_to) => Err(UriError::new(valid_up_to, "invalid character in URI")),
        };
        // The sip/sips and tel grammars only accept printable ASCII other than '<' and
        // '>' (every class in `escape` is a subset of it), so the octet screening only
        // has to run when they fail, where its error takes precedence.
        parsed.map_err(|e| screen(input).err().unwrap_or(e))
    }

    /// The scheme as written (e.g. "SIP").
    pub fn scheme(&self) -> &'a str {
        match self {
            Uri::Sip(u) => u.scheme_text(),
            Uri::Tel(t) => t.scheme_text(),
            Uri::Other(o) => o.scheme,
        }
    }

    /// The exact original text.
    pub fn as_str(&self) -> &'a str {
        match self {
            Uri::Sip(u) => u.as_str(),
            Uri::Tel(t) => t.as_str(),
            Uri::Other(o) => o.as_str(),
        }
    }

    /// The sip/sips URI, if this is one.
    pub fn as_sip(&self) -> Option<&SipUri<'a>> {
        match self {
            Uri::Sip(u) => Some(u),
            _ => None,
        }
    }

    /// Whether this is a SIPS URI (RFC 3261 §19.1: TLS on every hop).
    pub fn is_sips(&self) -> bool {
        matches!(self, Uri::Sip(u) if u.scheme == Scheme::Sips)
    }

    /// The tel URI, if this is one.
    pub fn as_tel(&self) -> Option<&TelUri<'a>> {
        match self {
            Uri::Tel(t) => Some(t),
            _ => None,
        }
    }
}

/// The original text.
impl fmt::Display for Uri<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses UTF-8 text of at most [`MAX_URI_LEN`] bytes; [`screen`] must be applied to
/// any error.
fn parse_text(s: &str) -> Result<Uri<'_>, UriError> {
    // "sip:" and "sips:" in any case, the schemes of nearly every URI a proxy reads, are
    // recognised without the generic scheme scan; they give what `split_scheme` would.
    // (`| 0x20` maps only 'S'/'s', 'I'/'i' and 'P'/'p' onto "sip".)
    match *s.as_bytes() {
        [a, b, c, b':', ..] if [a | 0x20, b | 0x20, c | 0x20] == *b"sip" => {
            return sip::parse_sip(s, Scheme::Sip, s.get(4..).unwrap_or_default(), 4).map(Uri::Sip);
        }
        [a, b, c, d, b':', ..] if [a | 0x20, b | 0x20, c | 0x20, d | 0x20] == *b"sips" => {
            return sip::parse_sip(s, Scheme::Sips, s.get(5..).unwrap_or_default(), 5).map(Uri::Sip);
        }
        _ => {}
    }
    let (scheme, rest) = split_scheme(s)?;
    let base = scheme.len() + 1;
    // RFC 3261 §19.1.4 / RFC 3986 §3.1: schemes are case-insensitive.
    let key = scheme_key(scheme);
    if key == scheme_key("sip") {
        sip::parse_sip(s, Scheme::Sip, rest, base).map(Uri::Sip)
    } else if key == scheme_key("sips") {
        sip::parse_sip(s, Scheme::Sips, rest, base).map(Uri::Sip)
    } else if key == scheme_key("tel") {
        tel::parse_tel(s, rest, base).map(Uri::Tel)
    } else {
        // An opaque URI is only checked octet by octet, so screening is needed here.
        screen(s.as_bytes())?;
        if rest.is_empty() {
            return Err(UriError::new(base, "empty URI"));
        }
        // Whitespace, '<' and '>' are already excluded by `screen`; '"' is not a `uric`
        // either (RFC 2396 §2.4.3 "delims").
        if let Some(i) = memchr::memchr(b'"', rest.as_bytes()) {
            return Err(UriError::new(base + i, "invalid character in URI"));
        }
        Ok(Uri::Other(AbsoluteUri { scheme, rest, raw: s }))
    }
}

/// A scheme of up to 4 characters as a number, case folded, so that known schemes
/// are recognised with one comparison; 0 for longer schemes.
///
/// Only for valid schemes (see [`split_scheme`]): setting bit 0x20 lowercases their
/// letters and leaves their other characters (digits, '+', '-', '.') unchanged.
const fn scheme_key(scheme: &str) -> u32 {
    match *scheme.as_bytes() {
        [a, b, c] => u32::from_be_bytes([0, a | 0x20, b | 0x20, c | 0x20]),
        [a, b, c, d] => u32::from_be_bytes([a | 0x20, b | 0x20, c | 0x20, d | 0x20]),
        _ => 0,
    }
}

/// Octet screening shared by every scheme.
///
/// Every URI form accepted here is printable ASCII. In particular:
/// * whitespace anywhere is an error (RFC 4475 §3.1.2.8 lwsruri: "sip:user@example.com; lr"
///   is invalid; §3.1.2.14 badaspec);
/// * '<' and '>' are an error (RFC 4475 §3.1.2.7 ltgtruri: the caller must strip the
///   name-addr brackets, a URI never contains them);
/// * control characters and non-ASCII octets must be %-escaped (RFC 3261 §25.1).
pub(super) fn screen(input: &[u8]) -> Result<(), UriError> {
    for (i, &b) in input.iter().enumerate() {
        let reason = match b {
            b'<' | b'>' => "angle bracket in URI",
            0x21..=0x7e => continue,
            b' ' | b'\t' | b'\r' | b'\n' => "whitespace in URI",
            _ => "invalid character in URI",
        };
        return Err(UriError::new(i, reason));
    }
    Ok(())
}

/// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 §3.1), followed
/// by ':'.
fn split_scheme(s: &str) -> Result<(&str, &str), UriError> {
    let bytes = s.as_bytes();
    let end = bytes.iter().position(|&b| escape::class(b) & escape::SCHEME == 0).unwrap_or(bytes.len());
    if bytes.get(end) == Some(&b':') && bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        if let (Some(scheme), Some(rest)) = (s.get(..end), s.get(end + 1..)) {
            return Ok((scheme, rest));
        }
    }
    // Not a scheme: say why, the missing ':' first.
    let colon = memchr::memchr(b':', bytes).ok_or(UriError::new(s.len(), "missing scheme"))?;
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return Err(UriError::new(0, "bad scheme"));
    }
    Err(UriError::new(end.min(colon), "bad scheme"))
}

impl<'a> SipUri<'a> {
    /// Parses a whole sip:/sips: URI; any other scheme is an error.
    pub fn parse(input: &'a [u8]) -> Result<SipUri<'a>, UriError> {
        match Uri::parse(input)? {
            Uri::Sip(u) => Ok(u),
            _ => Err(UriError::new(0, "not a sip or sips URI")),
        }
    }
}

impl<'a> TelUri<'a> {
    /// Parses a whole tel: URI; any other scheme is an error.
    pub fn parse(input: &'a [u8]) -> Result<TelUri<'a>, UriError> {
        match Uri::parse(input)? {
            Uri::Tel(t) => Ok(t),
            _ => Err(UriError::new(0, "not a tel URI")),
        }
    }
}
