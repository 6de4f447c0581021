//! What happens to bytes between the socket and the engine, without any I/O: parse, receipt
//! checks, the answer owed to a malformed request, and which engine shard the message belongs to
//! (hash of its Call-ID). Every transport of the runtime (UDP datagrams, stream frames) hands its
//! bytes to [`classify`]; the fuzz target does the same. A UDP datagram that [`stun::is_stun`]
//! recognises is a STUN keep-alive (RFC 5626 §8) and goes to [`stun::answer`] instead.

use bytes::{Bytes, BytesMut};
use herald_sip::{ErrorKind, Framing, HeaderName, Limits, Message, Method, ParseError, ResponseBuilder};
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;

mod salvage;
pub mod stun;

/// The outcome of receiving one datagram or one framed stream message.
#[derive(Debug)]
pub enum Inbound {
    /// Well formed: hand it to its shard.
    Message(Message),
    /// Malformed request: send these bytes back to the sender. `close` tells a stream to close
    /// after sending them (the framing is lost).
    Answer { bytes: BytesMut, close: bool },
    /// Nothing to do (keep-alive) or nothing possible (malformed and unanswerable).
    Drop(Dropped),
}

/// Why [`Inbound::Drop`] dropped a message (each reason is its own counter in the runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Only CRLFs: a keep-alive (RFC 5626 §3.5.1 sends them on UDP too).
    KeepAlive,
    /// A malformed request that has no Via/From/To/Call-ID/CSeq to answer with, or an ACK.
    Request,
    /// A malformed response: RFC 4475 §3.1.2.19 - discard.
    Response,
}

/// Parses and checks one message. `truncated` marks a datagram longer than the receive buffer.
pub fn classify(buf: Bytes, limits: &Limits, framing: Framing, truncated: bool) -> Inbound {
    if truncated {
        let e = ParseError::new(ErrorKind::Limit(herald_sip::Limit::MessageSize), buf.len());
        return answer_unparsed(&buf, &e, limits);
    }
    // The buffer comes back with an error rather than being cloned for it: the first clone of
    // a received datagram's `Bytes` allocates (see `Message::parse_or_return`).
    let msg = match Message::parse_or_return(buf, limits, framing) {
        Ok(m) => m,
        Err((e, _)) if e.kind == ErrorKind::Empty => return Inbound::Drop(Dropped::KeepAlive),
        Err((e, buf)) => return answer_unparsed(&buf, &e, limits),
    };
    classify_parsed(msg)
}

/// [`classify`] for a message parsed already (by stream framing, `herald_sip::framing::next_cut`).
pub fn classify_parsed(mut msg: Message) -> Inbound {
    // RFC 3261 §8.2.1-§8.2.2 and §16.3 steps 1-2: the receipt checks every element makes,
    // remembered in the message so that the engine does not parse those headers again.
    match msg.check() {
        Ok(()) => Inbound::Message(msg),
        Err(e) => answer(&msg, &e),
    }
}

/// The answer to a request that parsed but failed [`Message::validate`].
fn answer(msg: &Message, e: &ParseError) -> Inbound {
    if !msg.is_request() {
        return Inbound::Drop(Dropped::Response);
    }
    // RFC 3261 §17.2.1: an ACK is never answered.
    let answerable = msg.method() != Some(Method::Ack)
        && [HeaderName::Via, HeaderName::From, HeaderName::To, HeaderName::CallId, HeaderName::CSeq]
            .iter()
            .all(|h| msg.field(*h).is_some());
    if !answerable {
        return Inbound::Drop(Dropped::Request);
    }
    let (code, reason) = e.response();
    let tag = stateless_tag(msg);
    // RFC 3261 §8.2.6.2: a final response gets a To tag when the request had none.
    let bytes = ResponseBuilder::new(msg, code, &reason).to_tag(&tag).build();
    Inbound::Answer { bytes, close: e.breaks_stream_framing() }
}

/// The answer to bytes that did not parse as a message, or whose framing was lost: the header
/// section alone, with its Content-Length lines removed, is parsed again; if that yields a request
/// with the mandatory headers, it is answered with the status of the original error. A message
/// refused by a limit (size, header line, Via or Route count) is answered from its identifying
/// headers alone when that parse fails too (module `salvage`).
pub fn answer_unparsed(raw: &[u8], e: &ParseError, limits: &Limits) -> Inbound {
    let skip = raw.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
    let raw = &raw[skip..];
    if raw.starts_with(b"SIP/") {
        return Inbound::Drop(Dropped::Response);
    }
    let again = match reparse(raw, e, limits) {
        Ok(answer) => return answer,
        Err(again) => again,
    };
    let limit = |k: &ErrorKind| matches!(k, ErrorKind::Limit(_));
    if !(limit(&e.kind) || again.as_ref().is_some_and(|a| limit(&a.kind))) {
        return Inbound::Drop(Dropped::Request);
    }
    let Some(head) = salvage::stand_in(raw, limits) else { return Inbound::Drop(Dropped::Request) };
    let mut relaxed = limits.clone();
    relaxed.max_message_size = relaxed.max_message_size.max(head.len());
    // The stand-in carries one Via and five headers, each within `max_header_line`.
    match Message::parse(Bytes::from(head), &relaxed) {
        Ok(m) => answer(&m, e),
        Err(_) => Inbound::Drop(Dropped::Request),
    }
}

/// The header section of `raw` parsed again without its Content-Length lines (and with a
/// stand-in start line when the error was in it), answered if that parses. `Err`: it did not
/// parse (with the error, when there was a header section to parse).
fn reparse(raw: &[u8], e: &ParseError, limits: &Limits) -> Result<Inbound, Option<ParseError>> {
    // A datagram may also end right after its last header line (RFC 4475's archive baddn).
    let head_end = memchr::memmem::find(raw, b"\r\n\r\n").or_else(|| raw.ends_with(b"\r\n").then(|| raw.len() - 2));
    let Some(head_end) = head_end else {
        return Err(None);
    };
    let bad_request_line = matches!(e.kind, ErrorKind::StartLine(_) | ErrorKind::RequestUri(_));
    let mut head = Vec::with_capacity(head_end + 4);
    for (i, line) in raw[..head_end + 2].split_inclusive(|b| *b == b'\n').enumerate() {
        if i == 0 && bad_request_line {
            // RFC 4475 §3.1.2.7-§3.1.2.11: answer 400 rather than drop. The response copies only
            // Via, From, To, Call-ID and CSeq, so any well-formed Request-Line lets us build it.
            head.extend_from_slice(b"OPTIONS sip:invalid.invalid SIP/2.0\r\n");
            continue;
        }
        if i == 0 && e.kind == ErrorKind::Version {
            // RFC 3261 §8.2.2 asks for a 505: parse the copy as SIP/2.0 to build it.
            let Some(sp) = line.iter().rposition(|b| *b == b' ') else { return Ok(Inbound::Drop(Dropped::Request)) };
            head.extend_from_slice(&line[..sp]);
            head.extend_from_slice(b" SIP/2.0\r\n");
            continue;
        }
        let name = line.split(|b| *b == b':').next().unwrap_or(b"");
        let name = name.trim_ascii();
        if name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"l") {
            continue;
        }
        head.extend_from_slice(line);
    }
    head.extend_from_slice(b"\r\n");
    let mut relaxed = limits.clone();
    relaxed.max_message_size = relaxed.max_message_size.max(head.len());
    match Message::parse(Bytes::from(head), &relaxed) {
        Ok(m) => Ok(match answer(&m, e) {
            Inbound::Answer { bytes, close } => Inbound::Answer { bytes, close: close || e.breaks_stream_framing() },
            other => other,
        }),
        Err(again) => Err(Some(again)),
    }
}

/// The engine shard a message belongs to: a hash of the Call-ID (compared byte for byte,
/// RFC 3261 §20.8), modulo `shards`. A message without a parseable Call-ID goes to the shard of
/// its source address, so one peer's such messages still stay together.
pub fn shard(msg: &Message, from: &SocketAddr, shards: usize) -> usize {
    match msg.call_id() {
        Ok(id) => shard_of(id.as_bytes(), shards),
        Err(_) => shard_of(from.to_string().as_bytes(), shards),
    }
}

/// The shard of a Call-ID's bytes: see [`shard`]. foldhash with a fixed seed, eight bytes at a
/// step: every worker of the process computes the same shard for a Call-ID (a ping's response
/// goes to the shard its request was sent from, `ping.rs`), for a fraction of the cost of the
/// FNV-1a it replaces, an octet at a time (issue 21: ~90 instructions per message, ~540 per
/// proxied call). Unkeyed, as FNV was: a peer choosing Call-IDs to crowd one shard
/// slows only the calls that share it.
pub fn shard_of(call_id: &[u8], shards: usize) -> usize {
    let mut h = foldhash::fast::FixedState::with_seed(SHARD_SEED).build_hasher();
    h.write(call_id);
    (h.finish() % shards as u64) as usize
}

/// The seed of [`shard_of`]: any fixed value.
const SHARD_SEED: u64 = 0x5348_4152_445f_4f46;

/// A request that starts something new: not ACK or CANCEL (they belong to a running INVITE
/// transaction) and without a To tag (so outside any dialog). Dropped while draining.
pub fn is_new_request(msg: &Message) -> bool {
    match msg.method() {
        None | Some(Method::Ack) | Some(Method::Cancel) => false,
        // The tag as the engine reads it (from the receipt check's memo): the To URI is not
        // parsed, as nothing routes on it.
        Some(_) => msg.to_tag().ok().flatten().is_none(),
    }
}

/// The To tag of a stateless answer: a function of the request (RFC 3261 §8.2.7: a stateless
/// UAS gives the same request the same tag), 64 bits of FNV-1a over its Call-ID, From tag,
/// CSeq and top Via, in hex. So a retransmission gets the same answer and the core draws no
/// randomness (a run replays exactly). Being guessable costs nothing: the answer creates no
/// dialog, and the tag only lets the runtime absorb its ACK.
fn stateless_tag(msg: &Message) -> String {
    let field = |name| msg.get(name).unwrap_or_default();
    let h = crate::hash::fnv1a_parts([
        field(HeaderName::CallId),
        field(HeaderName::From),
        field(HeaderName::CSeq),
        field(HeaderName::Via),
    ]);
    format!("{h:016x}")
}

/// The To tag prefix of herald's stateless 503s, so that their ACKs are recognised (as
/// Kamailio's sl module recognises the ACKs of its stateless replies by To tag).
const BUSY_TAG: &str = "hb503-";

/// A stateless 503 Service Unavailable with Retry-After (RFC 3261 §21.5.4, §20.33) for a new
/// request refused before any transaction exists: overload or the transaction limit. Built
/// from the request's Via, From, To, Call-ID and CSeq alone, which costs far less than handling
/// the request; a retransmission gets another such answer.
pub fn busy(msg: &Message, retry_after_s: u32) -> Bytes {
    let tag = format!("{BUSY_TAG}{}", stateless_tag(msg));
    let retry = retry_after_s.to_string();
    ResponseBuilder::new(msg, 503, "Service Unavailable")
        .to_tag(&tag)
        .header("Retry-After", retry.as_bytes())
        .build()
        .freeze()
}

/// The ACK of a non-2xx final response from [`busy`] (RFC 3261 §17.1.1.3: sent hop by hop to
/// the server that answered): there is no transaction to absorb it, so the runtime does.
pub fn is_ack_of_busy(msg: &Message) -> bool {
    msg.method() == Some(Method::Ack) && msg.to_tag().ok().flatten().is_some_and(|tag| tag.starts_with(BUSY_TAG))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] = b"OPTIONS sip:a@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\nFrom: <sip:b@example.com>;tag=1\r\nTo: <sip:a@example.com>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n";

    fn classify_dgram(b: &[u8]) -> Inbound {
        classify(Bytes::copy_from_slice(b), &Limits::default(), Framing::Datagram, false)
    }

    fn answered(i: Inbound) -> (Message, bool) {
        match i {
            Inbound::Answer { bytes, close } => (Message::parse(bytes.freeze(), &Limits::default()).unwrap(), close),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn good_message_passes() {
        assert!(matches!(classify_dgram(OK), Inbound::Message(_)));
        assert!(matches!(classify_dgram(b"\r\n\r\n"), Inbound::Drop(Dropped::KeepAlive)));
    }

    #[test]
    fn bad_header_value_is_answered_400_with_a_to_tag() {
        let bad = String::from_utf8_lossy(OK).replace("Max-Forwards: 70", "Max-Forwards: lots");
        let (m, close) = answered(classify_dgram(bad.as_bytes()));
        assert_eq!(m.status(), Some(400));
        assert_eq!(m.reason(), Some(&b"Bad Max-Forwards"[..]));
        assert!(m.to_header().unwrap().tag().is_some());
        assert_eq!(m.call_id().unwrap(), "c1");
        assert!(!close);
    }

    #[test]
    fn unparseable_but_headed_request_is_answered() {
        // Two Content-Length headers: the parser refuses the message; the head still answers.
        let bad = String::from_utf8_lossy(OK).replace("Content-Length: 0", "Content-Length: 0\r\nl: 4");
        let (m, close) = answered(classify_dgram(bad.as_bytes()));
        assert_eq!(m.status(), Some(400));
        assert!(m.reason().unwrap().starts_with(b"Multiple "), "{:?}", m.reason());
        assert!(close, "a stream loses its framing");
        // Version 3.0 → 505.
        let bad = String::from_utf8_lossy(OK).replace("SIP/2.0\r\nVia", "SIP/3.0\r\nVia");
        assert_eq!(answered(classify_dgram(bad.as_bytes())).0.status(), Some(505));
    }

    #[test]
    fn unanswerable_things_are_dropped() {
        let no_call_id = String::from_utf8_lossy(OK).replace("Call-ID: c1\r\n", "");
        assert!(matches!(classify_dgram(no_call_id.as_bytes()), Inbound::Drop(Dropped::Request)));
        let ack = String::from_utf8_lossy(OK).replace("OPTIONS", "ACK").replace("Max-Forwards: 70", "Max-Forwards: x");
        assert!(matches!(classify_dgram(ack.as_bytes()), Inbound::Drop(Dropped::Request)));
        let resp = b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:a@b>\r\nCall-ID: x\r\nCSeq: bad\r\n\r\n";
        assert!(matches!(classify_dgram(resp), Inbound::Drop(Dropped::Response)));
        assert!(matches!(classify_dgram(b"garbage"), Inbound::Drop(Dropped::Request)));
        assert!(matches!(classify_dgram(b"SIP/2.0 99 x\r\n\r\n"), Inbound::Drop(Dropped::Response)));
    }

    /// `OK` with `extra` header lines after its Via.
    fn with_lines(extra: &str) -> String {
        String::from_utf8_lossy(OK).replace(
            "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\n",
            &format!("Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\n{extra}"),
        )
    }

    /// Issue 16 item 8: requests refused by a limit are answered from their identifying headers,
    /// with the top Via alone (it names the sender; RFC 3261 §18.2.1).
    #[test]
    fn requests_over_a_limit_are_answered_from_their_identifying_headers() {
        let vias: String = (0..1000).map(|i| format!("Via: SIP/2.0/UDP 198.51.100.1;branch=z9hG4bK{i}\r\n")).collect();
        let routes: String = (0..1000).map(|i| format!("Route: <sip:r{i}.example.com;lr>\r\n")).collect();
        let one_line_routes = format!("Route: {}\r\n", vec!["<sip:r;lr>"; 100].join(", "));
        let long = format!("Subject: {}\r\n", "x".repeat(9 * 1024));
        for (what, extra, reason) in [
            ("1,000 Via lines", vias.as_str(), &b"Too many Via values"[..]),
            ("1,000 Route lines", routes.as_str(), b"Too many Route values"),
            ("100 Route values in one line", one_line_routes.as_str(), b"Too many Route values"),
            ("a 9 KB header line", long.as_str(), b"Header field too long"),
        ] {
            let (m, _) = answered(classify_dgram(with_lines(extra).as_bytes()));
            assert_eq!((m.status(), m.reason()), (Some(400), Some(reason)), "{what}");
            assert_eq!(m.call_id().unwrap(), "c1", "{what}");
            let raw = String::from_utf8_lossy(m.as_bytes()).to_string();
            assert_eq!(raw.matches("Via:").count(), 1, "{what}: {raw}");
            assert!(raw.contains("Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\n"), "{what}: {raw}");
        }
        // An ACK is never answered (RFC 3261 §17.2.1), even over a limit.
        let ack = with_lines(&vias).replace("OPTIONS sip", "ACK sip").replace("1 OPTIONS", "1 ACK");
        assert!(matches!(classify_dgram(ack.as_bytes()), Inbound::Drop(Dropped::Request)));
        // Without a Call-ID there is nothing to answer with.
        let anon = with_lines(&vias).replace("Call-ID: c1\r\n", "");
        assert!(matches!(classify_dgram(anon.as_bytes()), Inbound::Drop(Dropped::Request)));
    }

    /// A stream message over the size limit is answered 513 from the header lines that arrived,
    /// and the connection closes: its framing is lost (RFC 3261 §18.3).
    #[test]
    fn a_stream_message_over_the_size_limit_is_513_and_closes() {
        let limits = Limits::default();
        let body = "x".repeat(65_500);
        let big = String::from_utf8_lossy(OK)
            .replace("Content-Length: 0\r\n\r\n", &format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        let mut buf = BytesMut::from(big.as_bytes());
        let e = herald_sip::framing::next_frame(&mut buf, &limits).unwrap_err();
        let (m, close) = answered(answer_unparsed(&buf, &e, &limits));
        assert_eq!((m.status(), close), (Some(513), true));
        // 65 KB of header lines: no end of the header section within the limit.
        let vias: String = (0..1400).map(|i| format!("Via: SIP/2.0/TCP 198.51.100.1;branch=z9hG4bK{i}\r\n")).collect();
        let huge = String::from_utf8_lossy(OK).replace("Max-Forwards: 70\r\n", &format!("Max-Forwards: 70\r\n{vias}"));
        let mut buf = BytesMut::from(huge.as_bytes());
        let e = herald_sip::framing::next_frame(&mut buf, &limits).unwrap_err();
        let (m, close) = answered(answer_unparsed(&buf, &e, &limits));
        assert_eq!((m.status(), close), (Some(513), true));
    }

    /// Whatever the bytes, the salvage path neither panics nor answers with what does not parse.
    #[test]
    fn salvage_survives_cut_and_mangled_messages() {
        let vias: String = (0..100).map(|i| format!("Via: SIP/2.0/UDP h{i};branch=z9hG4bK{i}\r\n")).collect();
        let base = with_lines(&vias).into_bytes();
        let e = ParseError::new(ErrorKind::Limit(herald_sip::Limit::ViaCount), 0);
        let mut seed = 0x9e37_79b9_u64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut m = base[..(seed as usize % base.len())].to_vec();
            if !m.is_empty() {
                let at = (seed >> 20) as usize % m.len();
                m[at] = b"\r\n :,;\"\x00\xff"[(seed >> 40) as usize % 9];
            }
            if let Inbound::Answer { bytes, .. } = answer_unparsed(&m, &e, &Limits::default()) {
                Message::parse(bytes.freeze(), &Limits::default()).expect("an answer that parses");
            }
        }
    }

    #[test]
    fn truncated_datagram_is_513() {
        let i = classify(Bytes::from_static(OK), &Limits::default(), Framing::Datagram, true);
        assert_eq!(answered(i).0.status(), Some(513));
    }

    #[test]
    fn shard_is_stable_and_spreads() {
        let mut seen = [0usize; 4];
        for i in 0..1000 {
            let id = format!("call-{i}@host");
            let s = shard_of(id.as_bytes(), 4);
            assert_eq!(s, shard_of(id.as_bytes(), 4));
            seen[s] += 1;
        }
        assert!(seen.iter().all(|n| *n > 150), "{seen:?}");
    }

    /// The Call-IDs of a load generator differ in a few digits (SIPp's `N-PID@IP`, herald
    /// bench's counters, random hex of phones): each shape fills `herald serve`'s 64 shards of
    /// a worker, and 16 ones, about evenly (a fair spread has ~100 ± 10 per shard of 6,400;
    /// the bounds leave room for any decent hash and fail a weak one).
    #[test]
    fn shards_of_generated_call_ids_are_even() {
        let shapes: [&dyn Fn(u64) -> String; 4] = [
            &|i| format!("{i}-29734@127.0.0.1"),
            &|i| format!("{}-29734@127.0.0.1", i * 64),
            &|i| format!("hb-{i:08}@10.0.0.7"),
            &|i| format!("{:016x}", crate::hash::fnv1a(&i.to_le_bytes())),
        ];
        for (k, shape) in shapes.iter().enumerate() {
            for shards in [16, 64] {
                let mut seen = vec![0usize; shards];
                for i in 0..6400 {
                    seen[shard_of(shape(i).as_bytes(), shards)] += 1;
                }
                let mean = 6400 / shards;
                let (min, max) = (seen.iter().min().unwrap(), seen.iter().max().unwrap());
                assert!(*min > mean * 6 / 10 && *max < mean * 14 / 10, "shape {k}, {shards} shards: {seen:?}");
            }
        }
    }

    #[test]
    fn a_stateless_answer_gives_the_same_request_the_same_tag() {
        let tag = |req: &[u8]| {
            let answer = busy(&Message::parse(Bytes::copy_from_slice(req), &Limits::default()).unwrap(), 5);
            let answer = Message::parse(answer, &Limits::default()).unwrap();
            answer.to_tag().unwrap().unwrap().to_owned()
        };
        assert_eq!(tag(OK), tag(OK), "a retransmission (RFC 3261 §8.2.7)");
        let other = String::from_utf8_lossy(OK).replace("CSeq: 1", "CSeq: 2");
        assert_ne!(tag(OK), tag(other.as_bytes()));
        assert!(tag(OK).starts_with(BUSY_TAG));
    }

    #[test]
    fn busy_answers_carry_retry_after_and_their_acks_are_recognised() {
        let m = |s: &str| Message::parse(Bytes::from(s.to_string()), &Limits::default()).unwrap();
        let ok = String::from_utf8_lossy(OK).to_string();
        let answer = m(std::str::from_utf8(&busy(&m(&ok), 7)).unwrap());
        assert_eq!(answer.status(), Some(503));
        assert_eq!(answer.call_id().unwrap(), "c1");
        let raw = answer.as_bytes().to_vec();
        assert!(String::from_utf8_lossy(&raw).contains("Retry-After: 7\r\n"));
        let tag = answer.to_header().unwrap().tag().unwrap().to_string();
        let ack = ok
            .replace("OPTIONS sip", "ACK sip")
            .replace("1 OPTIONS", "1 ACK")
            .replace("<sip:a@example.com>\r\n", &format!("<sip:a@example.com>;tag={tag}\r\n"));
        assert!(is_ack_of_busy(&m(&ack)));
        let other = ack.replace(&tag, "abc");
        assert!(!is_ack_of_busy(&m(&other)), "an ACK of someone else's answer");
        assert!(!is_ack_of_busy(&m(&ok)));
    }

    #[test]
    fn new_requests() {
        let m = |s: &str| Message::parse(Bytes::from(s.to_string()), &Limits::default()).unwrap();
        let ok = String::from_utf8_lossy(OK).to_string();
        assert!(is_new_request(&m(&ok)));
        assert!(!is_new_request(&m(&ok.replace("<sip:a@example.com>\r\n", "<sip:a@example.com>;tag=9\r\n"))));
        assert!(!is_new_request(&m(&ok.replace("OPTIONS", "CANCEL"))));
    }
}
