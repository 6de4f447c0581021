//! Message framing on stream transports (TCP, TLS, RFC 3261 §18.3): the receiver accumulates
//! bytes and cuts one message at a time using Content-Length, which streams make mandatory.
//! CRLF keep-alives (RFC 5626 §3.5.1) between messages are reported, not treated as messages.

use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::limits::{Limit, Limits};
use crate::message::{parse_header_line, plain_header_line, Framing, Head, Message};
use crate::scan;
use bytes::{Bytes, BytesMut};
use memchr::memmem::Finder;
use std::sync::LazyLock;

/// The empty line that ends a header section, searched with a searcher built once: building
/// one per search (`memmem::find`) was about a tenth of the search's cost per stream message.
static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));

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
    Ok(cut(buf, limits, false, &mut Progress::default())?.map(|c| match c {
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
    cut(buf, limits, true, &mut Progress::default())
}

/// What [`next_cut_resumed`] learnt of a message that has not arrived whole, kept by the caller
/// between reads of the same stream: how far the search for the end of its header section has
/// got, or, once that end is found, how long the whole message is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes at the front already searched for the empty line, which is not among them.
    searched: usize,
    /// The whole message's length, once its header section is in (0: not yet).
    total: usize,
}

/// [`next_cut`] for a stream read a piece at a time: `progress` (the stream's own, reset by
/// nothing but this function) carries over what earlier calls learnt of a message that was not
/// whole, so that each byte of a header section is searched once and the section is parsed
/// once more when its body is in, rather than all of it again on every read: a message that
/// trickles in a byte per read cost time quadratic in its size. Cuts and errors are exactly
/// those of [`next_cut`] on the same bytes.
pub fn next_cut_resumed(
    buf: &mut BytesMut,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<Option<Cut>, ParseError> {
    if progress.total > buf.len() {
        return Ok(None);
    }
    let cut = cut(buf, limits, true, progress);
    if !matches!(cut, Ok(None)) {
        *progress = Progress::default();
    }
    cut
}

/// Cuts the next frame; `progress.searched` bytes at the front are known to hold no empty line,
/// and `progress` records, when more bytes are needed, what was learnt.
fn cut(buf: &mut BytesMut, limits: &Limits, parse: bool, progress: &mut Progress) -> Result<Option<Cut>, ParseError> {
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
    // A message's first look scans its header section at once; the search for the empty line
    // is left for a header section not (yet) whole or one that does not parse. The scanned
    // head goes straight on to `take` (each step between here and there that moved it by value,
    // a `Result` to an `Option` and on into a tuple, copied it: ~45 instructions a message,
    // callgrind, issue 21).
    if parse && progress.searched == 0 {
        if let Ok(head) = Head::scan(window, limits) {
            if ends_where_the_search_would(&head, window) {
                return take(buf, head.head_end() - 2, Some(head), limits, progress);
            }
        }
    }
    // An empty line that began in the bytes searched before ends in the new ones.
    let from = progress.searched.saturating_sub(3).min(window.len());
    let Some(head_end) = HEAD_END.find(&window[from..]).map(|at| from + at) else {
        if buf.len() > limits.max_message_size {
            return Err(ParseError::new(ErrorKind::Limit(Limit::MessageSize), limits.max_message_size));
        }
        progress.searched = window.len();
        return Ok(None);
    };
    let head = if parse { Head::scan(&buf[..head_end + 4], limits).ok() } else { None };
    take(buf, head_end, head, limits, progress)
}

/// Takes the message whose header section ends at `head_end` (the CRLF before the empty line)
/// off the front of `buf` once its body is in; `head`: that section, when it parsed.
#[inline(always)]
fn take(
    buf: &mut BytesMut,
    head_end: usize,
    head: Option<Head>,
    limits: &Limits,
    progress: &mut Progress,
) -> Result<Option<Cut>, ParseError> {
    let body_start = head_end + 4;
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
        progress.total = total;
        return Ok(None);
    }
    // A buffer that holds this message alone (what one read brings, as a rule) is taken whole:
    // `split_to` first moves a buffer to shared storage, an allocation and a free per stream
    // message (about 200 instructions, callgrind, issue 21), where freezing the buffer itself
    // keeps its allocation as it is, as a datagram's is.
    let bytes = if total == buf.len() { std::mem::take(buf) } else { buf.split_to(total) }.freeze();
    Ok(Some(match head {
        Some(head) if head.content_length().is_some() => Cut::Parsed(Message::assemble(bytes, head, Framing::Stream)?),
        _ => Cut::Frame(Frame::Message(bytes)),
    }))
}

/// Whether `head`, scanned from the front of `window` without first searching for its end,
/// ends where that search would have cut: at the window's first empty line. The scan ends
/// every line at the first LF that no SP or HT follows and requires CRLF there, and it stops at
/// the first line that begins with CRLF, so the LF of any earlier CR LF CR LF would have ended
/// it there; the check keeps that so whatever the scanner becomes. The search (memchr's two-way
/// finder) cost about 350 instructions per stream message on top of a scan that reads the same
/// bytes (callgrind, issue 21). When it does not (or the section is not whole yet, or does not
/// parse) the caller searches, as before, and gets the same cut or error.
fn ends_where_the_search_would(head: &Head, window: &[u8]) -> bool {
    let end = head.head_end();
    end >= 2 && window.get(end - 2..end + 2) == Some(&b"\r\n\r\n"[..])
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
            let name = &head[field.name_span().range()];
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

    /// What a cut took off, comparable: the frame's bytes (parsed or not), or the error's kind.
    fn shown(cut: Result<Option<Cut>, ParseError>) -> Option<Result<(bool, Bytes), ErrorKind>> {
        match cut {
            Ok(None) => None,
            Ok(Some(Cut::Parsed(m))) => Some(Ok((true, m.buffer().clone()))),
            Ok(Some(Cut::Frame(Frame::Message(b)))) => Some(Ok((false, b))),
            Ok(Some(Cut::Frame(Frame::Ping))) => Some(Ok((false, Bytes::from_static(b"ping")))),
            Ok(Some(Cut::Frame(Frame::KeepAlive))) => Some(Ok((false, Bytes::from_static(b"keep-alive")))),
            Err(e) => Some(Err(e.kind)),
        }
    }

    /// Feeds `stream` `chunk` bytes at a time, cutting all it can after each piece, as a
    /// connection does; stops at the first error.
    fn cuts_in_pieces(
        stream: &[u8],
        chunk: usize,
        limits: &Limits,
        resumed: bool,
    ) -> Vec<Result<(bool, Bytes), ErrorKind>> {
        cuts_in_pieces_with(stream, chunk, |buf, progress| {
            if resumed {
                next_cut_resumed(buf, limits, progress)
            } else {
                next_cut(buf, limits)
            }
        })
    }

    /// The cuts `cutter` makes of `stream` arriving `chunk` octets at a time, up to the first
    /// error.
    fn cuts_in_pieces_with(
        stream: &[u8],
        chunk: usize,
        mut cutter: impl FnMut(&mut BytesMut, &mut Progress) -> Result<Option<Cut>, ParseError>,
    ) -> Vec<Result<(bool, Bytes), ErrorKind>> {
        let (mut buf, mut progress, mut out) = (BytesMut::new(), Progress::default(), vec![]);
        for piece in stream.chunks(chunk) {
            buf.extend_from_slice(piece);
            loop {
                match shown(cutter(&mut buf, &mut progress)) {
                    None => break,
                    Some(Err(e)) => {
                        out.push(Err(e));
                        return out;
                    }
                    Some(ok) => out.push(ok),
                }
            }
        }
        out
    }

    #[test]
    fn resumed_cuts_are_those_of_a_fresh_look_however_the_stream_is_split() {
        let limits = Limits { max_message_size: 300, ..Limits::default() };
        let mut streams: Vec<Vec<u8>> = vec![];
        // Messages with and without a body, between pings and keep-alives; a long header section.
        let long = format!("OPTIONS sip:a@b SIP/2.0\r\nSubject: {}\r\nl: 3\r\n\r\nxyz", "s".repeat(150));
        streams.push([&b"\r\n\r\n"[..], MSG, b"\r\n", MSG, long.as_bytes(), MSG].concat());
        // Framing errors: no Content-Length, two, a header section over the limit, a body over it.
        streams.push([MSG, b"OPTIONS sip:a@b SIP/2.0\r\nVia: x\r\n\r\n"].concat());
        streams.push([MSG, b"OPTIONS sip:a@b SIP/2.0\r\nl: 1\r\nContent-Length: 1\r\n\r\nx"].concat());
        streams.push([MSG, "x".repeat(400).as_bytes()].concat());
        streams.push([MSG, b"OPTIONS sip:a@b SIP/2.0\r\nl: 500\r\n\r\n", &[b'y'; 500]].concat());
        // An empty line split across reads at every point: CR LF CR | LF and so on.
        streams.push([&b"OPTIONS sip:a@b SIP/2.0\r\nl: 0\r"[..], b"\n\r\n", MSG].concat());
        for stream in &streams {
            let whole = cuts_in_pieces(stream, stream.len(), &limits, false);
            assert!(!whole.is_empty());
            for chunk in 1..=stream.len() {
                let fresh = cuts_in_pieces(stream, chunk, &limits, false);
                let resumed = cuts_in_pieces(stream, chunk, &limits, true);
                assert_eq!(resumed, fresh, "pieces of {chunk}: {:?}", String::from_utf8_lossy(stream));
                if whole.last().is_some_and(|c| c.is_ok()) {
                    assert_eq!(resumed, whole, "pieces of {chunk}");
                }
            }
        }
    }

    /// The header section scanned at once (`ends_where_the_search_would`) cuts where the search for the empty
    /// line cuts (`next_frame` never scans first), on the shapes where the two could part: a
    /// bare LF or a lone CR before the empty line, no header at all, an empty line in the body,
    /// folding, and sections that do not parse.
    #[test]
    fn a_head_scanned_at_once_is_cut_where_the_search_cuts() {
        let limits = Limits::default();
        let streams: &[&[u8]] = &[
            b"OPTIONS sip:a@b SIP/2.0\r\nl: 4\r\n\r\nbody",
            b"OPTIONS sip:a@b SIP/2.0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nl: 4\r\n\r\n\r\n\r\nOPTIONS sip:a@b SIP/2.0\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nl: 0\n\r\n\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nl: 0\r\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nSubject: a\r\n b\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nSubject: a\r\n\r\n b\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nTo: \"a\r\n\r\nb\"\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nbad line\r\nl: 0\r\n\r\n",
            b"OPTIONS sip:a@b SIP/2.0\r\nl: 1\r\nl: 1\r\n\r\nx",
        ];
        for stream in streams {
            for chunk in 1..=stream.len() {
                let scanned = cuts_in_pieces(stream, chunk, &limits, true);
                let searched =
                    cuts_in_pieces_with(stream, chunk, |buf, _| next_frame(buf, &limits).map(|f| f.map(Cut::Frame)));
                let unparsed = |cuts: Vec<Result<(bool, Bytes), ErrorKind>>| {
                    cuts.into_iter().map(|c| c.map(|(_, b)| b)).collect::<Vec<_>>()
                };
                assert_eq!(
                    unparsed(scanned),
                    unparsed(searched),
                    "pieces of {chunk}: {:?}",
                    String::from_utf8_lossy(stream)
                );
            }
        }
    }

    #[test]
    fn progress_is_kept_while_a_message_arrives_and_reset_when_it_is_cut() {
        let limits = Limits::default();
        let (mut buf, mut progress) = (BytesMut::from(&MSG[..20]), Progress::default());
        assert!(next_cut_resumed(&mut buf, &limits, &mut progress).unwrap().is_none());
        assert_eq!(progress, Progress { searched: 20, total: 0 });
        buf.extend_from_slice(&MSG[20..MSG.len() - 2]);
        assert!(next_cut_resumed(&mut buf, &limits, &mut progress).unwrap().is_none());
        assert_eq!(progress, Progress { searched: 20, total: MSG.len() }, "the head is in, the body is not");
        buf.extend_from_slice(&MSG[MSG.len() - 2..]);
        assert!(next_cut_resumed(&mut buf, &limits, &mut progress).unwrap().is_some());
        assert_eq!(progress, Progress::default());
        assert!(buf.is_empty());
    }

    #[test]
    fn unbounded_garbage_is_refused() {
        let junk = vec![b'a'; 70_000];
        let (_, r, _) = feed(&junk);
        assert_eq!(r.unwrap_err().kind, ErrorKind::Limit(Limit::MessageSize));
    }
}
