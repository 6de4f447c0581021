//! Message framing on stream transports (TCP, TLS, RFC 3261 §18.3): the receiver accumulates
//! bytes and cuts one message at a time using Content-Length, which streams make mandatory.
//! CRLF keep-alives (RFC 5626 §3.5.1) between messages are reported, not treated as messages.

use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::message::{parse_header_line, plain_header_line, Framing, Head, Message};
use crate::scan;
use bytes::{Bytes, BytesMut};

/// One unit cut from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A double-CRLF ping (RFC 5626 §3.5.1): answer with a single CRLF pong.
    Ping,
    /// A lone CRLF: a pong or a keep-alive; ignored (RFC 3261 §7.5).
    KeepAlive,
    /// Exactly the bytes of one message: parse with `Message::parse_as(.., Framing::Stream)`.
    Message(Bytes),
}

/// Takes the next frame off the front of `buf`.
///
/// `Ok(None)`: more bytes are needed. `Err(_)`: the framing is lost (no or several
/// Content-Length, a message over the size limit, garbage before a header end); the connection
/// must be closed after answering if possible (RFC 4475 §3.1.2.3, §3.3.9). Memory is bounded: a
/// buffer holding more than `limits.max_message_size` bytes without a complete message errors.
pub fn next_frame(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Frame>, ParseError> {
    Ok(cut(buf, limits, false)?.map(|c| match c {
        Cut::Frame(f) => f,
        // `cut` parses only when asked to.
        Cut::Parsed(m) => Frame::Message(m.buffer().clone()),
    }))
}

/// What [`next_cut`] takes off the stream: a [`Frame`], or a message it parsed on the way.
#[derive(Debug)]
pub enum Cut {
    Frame(Frame),
    /// A whole message, parsed as `Message::parse_as(.., Framing::Stream)` would, not yet
    /// checked (`Message::check`).
    Parsed(Message),
}

/// [`next_frame`] that hands the message over parsed when its header section parses: finding
/// the one Content-Length takes every header line parsed, and parsing them all again afterwards
/// was a third of a stream message's parsing cost (callgrind, issue 21). When the header section
/// does not parse, the frame is cut exactly as [`next_frame`] cuts it, as bytes (whose parse
/// then reports what is wrong), or the framing error is the same.
pub fn next_cut(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Cut>, ParseError> {
    cut(buf, limits, true)
}

fn cut(buf: &mut BytesMut, limits: &Limits, parse: bool) -> Result<Option<Cut>, ParseError> {
    if buf.starts_with(b"\r\n\r\n") {
        let _ = buf.split_to(4);
        return Ok(Some(Cut::Frame(Frame::Ping)));
    }
    if buf.starts_with(b"\r\n") {
        // Could be the first half of a ping: wait unless something else follows.
        if buf.len() == 2 || (buf.len() == 3 && buf[2] == b'\r') {
            return Ok(None);
        }
        let _ = buf.split_to(2);
        return Ok(Some(Cut::Frame(Frame::KeepAlive)));
    }
    if buf.is_empty() || buf[..] == b"\r"[..] {
        return Ok(None);
    }
    let window = &buf[..buf.len().min(limits.max_message_size + 4)];
    let Some(head_end) = memchr::memmem::find(window, b"\r\n\r\n") else {
        if buf.len() > limits.max_message_size {
            return Err(ParseError::new(ErrorKind::Limit(Limit::MessageSize), limits.max_message_size));
        }
        return Ok(None);
    };
    let body_start = head_end + 4;
    let head = if parse { Head::scan(&buf[..body_start], limits).ok() } else { None };
    let length = match head.as_ref().and_then(Head::content_length) {
        // The same value `content_length` finds: the same line parsers, the same checks.
        Some(n) => n as usize,
        None => content_length(&buf[..body_start], head_end + 2, limits)?,
    };
    let total = body_start + length;
    if total > limits.max_message_size {
        return Err(ParseError::new(ErrorKind::Limit(Limit::MessageSize), body_start));
    }
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let bytes = buf.split_to(total).freeze();
    Ok(Some(match head {
        Some(head) if head.content_length().is_some() => Cut::Parsed(Message::assemble(bytes, head, Framing::Stream)?),
        _ => Cut::Frame(Frame::Message(bytes)),
    }))
}

/// Finds the one Content-Length in a header section: `with_end[..head_len]` (start line
/// included, ending in CRLF), `with_end` the same followed by the empty line.
///
/// Plain `Name: value` lines go through the message parser's fast path (the full line parser
/// gives the same field for them, and parses the rest): every stream message is framed here
/// and then parsed again, and parsing each line in full here cost about 2k instructions per
/// message (callgrind, issue 21).
fn content_length(with_end: &[u8], head_len: usize, limits: &Limits) -> Result<usize, ParseError> {
    let head = &with_end[..head_len];
    let mut pos = memchr::memchr(b'\n', head).map_or(head.len(), |i| i + 1);
    let mut found: Option<usize> = None;
    while pos < head.len() {
        let field = match plain_header_line(with_end, pos, limits) {
            Some(field) => field,
            None => parse_header_line(head, pos, limits)?,
        };
        if field.name == HeaderName::ContentLength {
            let name = &head[field.name_span.range()];
            if found.is_some() {
                return Err(ParseError::in_header(ErrorKind::DuplicateHeader, pos, name));
            }
            let n = scan::parse_u32(&head[field.value.range()]).ok_or_else(|| {
                ParseError::in_header(ErrorKind::HeaderValue("not a decimal length"), field.value.start as usize, name)
            })?;
            found = Some(n as usize);
        }
        pos = field.line.end as usize;
    }
    found.ok_or(ParseError::new(ErrorKind::MissingContentLength, head.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(bytes: &[u8]) -> (Vec<Frame>, Result<(), ParseError>, usize) {
        let mut buf = BytesMut::from(bytes);
        let mut out = vec![];
        loop {
            match next_frame(&mut buf, &Limits::default()) {
                Ok(Some(f)) => out.push(f),
                Ok(None) => return (out, Ok(()), buf.len()),
                Err(e) => return (out, Err(e), buf.len()),
            }
        }
    }

    const MSG: &[u8] = b"OPTIONS sip:a@b SIP/2.0\r\nl: 4\r\n\r\nbody";

    #[test]
    fn cuts_messages_and_keepalives() {
        let mut stream = b"\r\n\r\n".to_vec();
        stream.extend_from_slice(MSG);
        stream.extend_from_slice(b"\r\n");
        stream.extend_from_slice(MSG);
        let (frames, r, left) = feed(&stream);
        r.unwrap();
        assert_eq!(
            frames,
            vec![
                Frame::Ping,
                Frame::Message(Bytes::from_static(MSG)),
                Frame::KeepAlive,
                Frame::Message(Bytes::from_static(MSG))
            ]
        );
        assert_eq!(left, 0);
    }

    #[test]
    fn waits_for_every_split_point() {
        for cut in 0..MSG.len() {
            let (frames, r, left) = feed(&MSG[..cut]);
            r.unwrap();
            assert!(frames.is_empty(), "cut at {cut}");
            assert_eq!(left, cut);
        }
    }

    #[test]
    fn framing_errors() {
        let (_, r, _) = feed(b"OPTIONS sip:a@b SIP/2.0\r\nVia: x\r\n\r\n");
        assert_eq!(r.unwrap_err().kind, ErrorKind::MissingContentLength);
        let (_, r, _) = feed(b"OPTIONS sip:a@b SIP/2.0\r\nl: 1\r\nContent-Length: 1\r\n\r\nxx");
        assert_eq!(r.unwrap_err().kind, ErrorKind::DuplicateHeader);
        let (_, r, _) = feed(b"OPTIONS sip:a@b SIP/2.0\r\nContent-Length: -999\r\n\r\n");
        assert!(matches!(r.unwrap_err().kind, ErrorKind::HeaderValue(_)));
        let (_, r, _) = feed(b"OPTIONS sip:a@b SIP/2.0\r\nContent-Length: 99999\r\n\r\n");
        assert_eq!(r.unwrap_err().kind, ErrorKind::Limit(Limit::MessageSize));
    }

    #[test]
    fn unbounded_garbage_is_refused() {
        let junk = vec![b'a'; 70_000];
        let (_, r, _) = feed(&junk);
        assert_eq!(r.unwrap_err().kind, ErrorKind::Limit(Limit::MessageSize));
    }
}
