//! Typed parse errors: what is wrong, where, and which SIP response a server owes the sender.

use crate::limits::Limit;
use std::fmt;

/// The class of a parse failure. Each maps to the response RFC 3261/RFC 4475 prescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// No bytes, or only CRLFs (a keep-alive, not a message).
    Empty,
    /// The header section never ended with an empty line.
    UnterminatedHeaders,
    /// Request-Line or Status-Line syntax (RFC 3261 §7.1, §7.2).
    StartLine(&'static str),
    /// A SIP-Version other than SIP/2.0 (RFC 3261 §8.2.2 → 505).
    Version,
    /// A response whose status code is not three digits in 100..=699 (RFC 4475 §3.1.2.19).
    StatusCode,
    /// The Request-URI could not be parsed (RFC 4475 §3.1.2.7, §3.1.2.8, §3.1.2.11).
    RequestUri(&'static str),
    /// The Request-URI scheme is not one this element handles (RFC 3261 §16.3 step 2 → 416).
    UnsupportedUriScheme,
    /// A header line without a colon, or a header name with non-token characters.
    HeaderLine,
    /// A header value that does not match its grammar.
    HeaderValue(&'static str),
    /// A header every request/response must carry is missing (RFC 3261 §8.1.1).
    MissingHeader,
    /// A header that allows one value appears more than once (RFC 4475 §3.3.8, §3.3.9).
    DuplicateHeader,
    /// CSeq method differs from the request method (RFC 4475 §3.1.2.17/18).
    CSeqMethodMismatch { known_method: bool },
    /// Content-Length says more bytes than the datagram holds (RFC 4475 §3.1.2.2).
    BodyTruncated,
    /// A stream message without Content-Length (RFC 3261 §18.3: mandatory on streams).
    MissingContentLength,
    /// A configured bound was exceeded.
    Limit(Limit),
}

/// A parse error with its location: byte offset in the message and, where it applies, the name of
/// the header (as written, at most 64 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ErrorKind,
    pub offset: usize,
    pub header: Option<String>,
}

impl ParseError {
    pub fn new(kind: ErrorKind, offset: usize) -> Self {
        ParseError { kind, offset, header: None }
    }

    pub fn in_header(kind: ErrorKind, offset: usize, name: &[u8]) -> Self {
        let name = &name[..name.len().min(64)];
        ParseError { kind, offset, header: Some(String::from_utf8_lossy(name).into_owned()) }
    }

    /// The response a server should send for a malformed *request*, as (status code, reason).
    /// Malformed responses are never answered: RFC 4475 §3.1.2.5 and §3.1.2.19 say discard them.
    pub fn response(&self) -> (u16, String) {
        let header = self.header.as_deref().unwrap_or("header");
        match &self.kind {
            ErrorKind::Version => (505, "Version Not Supported".into()),
            ErrorKind::UnsupportedUriScheme => (416, "Unsupported URI Scheme".into()),
            ErrorKind::Limit(Limit::MessageSize) => (513, "Message Too Large".into()),
            // RFC 4475 §3.1.2.18: an unknown method whose CSeq disagrees is best answered 501.
            ErrorKind::CSeqMethodMismatch { known_method: false } => (501, "Not Implemented".into()),
            ErrorKind::CSeqMethodMismatch { known_method: true } => (400, "CSeq Method Mismatch".into()),
            ErrorKind::MissingHeader => (400, format!("Missing {header}")),
            ErrorKind::DuplicateHeader => (400, format!("Multiple {header} Values")),
            ErrorKind::HeaderValue(_) => (400, format!("Bad {header}")),
            ErrorKind::HeaderLine => (400, "Bad Header Line".into()),
            ErrorKind::RequestUri(_) => (400, "Bad Request-URI".into()),
            ErrorKind::StartLine(_) => (400, "Bad Request-Line".into()),
            ErrorKind::BodyTruncated => (400, "Content-Length Exceeds Body".into()),
            ErrorKind::MissingContentLength => (400, "Missing Content-Length".into()),
            ErrorKind::Limit(l) => (400, capitalize(l.describe())),
            ErrorKind::Empty | ErrorKind::UnterminatedHeaders | ErrorKind::StatusCode => (400, "Bad Request".into()),
        }
    }

    /// Whether a stream connection that produced this error must be closed: the framing is lost
    /// (RFC 4475 §3.1.2.3, §3.3.9: bad or multiple Content-Length on TCP → close).
    pub fn breaks_stream_framing(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::UnterminatedHeaders
                | ErrorKind::MissingContentLength
                | ErrorKind::Limit(Limit::MessageSize | Limit::HeaderLine | Limit::HeaderCount)
        ) || (self.header.as_deref().is_some_and(|h| h.eq_ignore_ascii_case("content-length") || h == "l")
            && matches!(self.kind, ErrorKind::HeaderValue(_) | ErrorKind::DuplicateHeader))
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Empty => f.write_str("empty message"),
            ErrorKind::UnterminatedHeaders => f.write_str("header section does not end with an empty line"),
            ErrorKind::StartLine(w) => write!(f, "malformed start line: {w}"),
            ErrorKind::Version => f.write_str("unsupported SIP version (only SIP/2.0)"),
            ErrorKind::StatusCode => f.write_str("status code outside 100..=699"),
            ErrorKind::RequestUri(w) => write!(f, "malformed Request-URI: {w}"),
            ErrorKind::UnsupportedUriScheme => f.write_str("unsupported Request-URI scheme"),
            ErrorKind::HeaderLine => f.write_str("malformed header line (no colon or bad name)"),
            ErrorKind::HeaderValue(w) => write!(f, "malformed value: {w}"),
            ErrorKind::MissingHeader => f.write_str("mandatory header missing"),
            ErrorKind::DuplicateHeader => f.write_str("header allows one value but has several"),
            ErrorKind::CSeqMethodMismatch { .. } => f.write_str("CSeq method differs from request method"),
            ErrorKind::BodyTruncated => f.write_str("Content-Length larger than the body received"),
            ErrorKind::MissingContentLength => f.write_str("Content-Length is mandatory on stream transports"),
            ErrorKind::Limit(l) => write!(f, "limit exceeded: {}", l.describe()),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.header {
            Some(h) => write!(f, "{h} header at byte {}: {}", self.offset, self.kind),
            None => write!(f, "at byte {}: {}", self.offset, self.kind),
        }
    }
}

impl std::error::Error for ParseError {}
