//! Messages parsed into kept boxes (module `pool`).

use crate::{Limits, Message};
use bytes::Bytes;

/// A kept box is emptied before its next message: the second message's lines, index, Via
/// split and memo are its own, whatever the first left in the box; a message of more lines
/// than the box holds inline is parsed and dropped without being kept.
#[test]
fn kept_boxes_start_empty() {
    let limits = Limits::default();
    let first = b"INVITE sip:a@192.0.2.1 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bK1, SIP/2.0/UDP 192.0.2.3\r\nFrom: <sip:b@h>;tag=1\r\nTo: <sip:a@h>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nSubject: x\r\nContent-Length: 0\r\n\r\n";
    let second = b"SIP/2.0 200 OK\r\nCall-ID: c2\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n";
    let mut many = b"OPTIONS sip:a@h SIP/2.0\r\n".to_vec();
    for i in 0..40 {
        many.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    for _ in 0..3 {
        let mut m = Message::parse(Bytes::from_static(first), &limits).expect("parses");
        m.check().expect("checks");
        drop(m);
        let spilled = Message::parse(Bytes::from(many.clone()), &limits).expect("parses");
        assert_eq!(spilled.headers().len(), 40);
        drop(spilled);
        let m = Message::parse(Bytes::from_static(second), &limits).expect("parses");
        let fresh = Message::parse(Bytes::from_static(second), &limits).expect("parses");
        assert!(!m.is_checked());
        assert_eq!(m.headers(), fresh.headers());
        assert_eq!(m.headers().len(), 3);
        assert_eq!(*m.via_split(), crate::message::ViaSplit::default());
        assert_eq!(m.get(crate::HeaderName::Via), None);
        assert_eq!(m.get(crate::HeaderName::Subject), None);
        assert_eq!(m.get(crate::HeaderName::CallId), Some(&b"c2"[..]));
        assert!(m.field_index(crate::HeaderName::From).is_none());
        // A clone's box is its own.
        let c = m.clone();
        drop(m);
        assert_eq!(c.get(crate::HeaderName::CallId), Some(&b"c2"[..]));
    }
}

/// A message of the usual kind parses in `parse_or_return`'s own frame, anything else out of
/// line (`parse_unusual`, the whole logic): both give the same message or error for every
/// start (none, CRLFs before the start line, the start line itself) and size (at and over the
/// limit).
#[test]
fn usual_and_unusual_starts_parse_alike() {
    use crate::message::Framing;
    let text = b"OPTIONS sip:a@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nContent-Length: 0\r\n\r\n";
    let mut inputs: Vec<Vec<u8>> = vec![Vec::new(), b"\r".to_vec(), b"\n\r\n".to_vec(), b"x".to_vec()];
    for lead in [&b""[..], b"\r\n", b"\n", b"\r\n\r\n"] {
        inputs.push([lead, &text[..]].concat());
        inputs.push([lead, &text[..20]].concat());
    }
    let outcome = |r: Result<Message, (crate::ParseError, Bytes)>| match r {
        Ok(m) => Ok((m.as_bytes().to_vec(), m.headers().to_vec(), m.body_span(), m.head_end())),
        Err((e, buf)) => Err((e, buf)),
    };
    for input in inputs {
        for max in [input.len(), input.len().saturating_sub(1), 65_535] {
            let limits = Limits { max_message_size: max, ..Limits::default() };
            for framing in [Framing::Datagram, Framing::Stream] {
                let buf = Bytes::from(input.clone());
                let usual = outcome(Message::parse_or_return(buf.clone(), &limits, framing));
                let unusual = outcome(Message::parse_unusual(buf, &limits, framing));
                assert_eq!(usual, unusual, "{:?} (limit {max})", String::from_utf8_lossy(&input));
            }
        }
    }
}

/// The scan writes each line into the box's line list over what an earlier message left
/// there (module `head`): over sequences of messages of 0 to 70 lines (plain and folded ones)
/// parsed on one thread into kept boxes, with header count limits around their line counts,
/// every message's lines are what a walk of the full line parser finds, and the count limit
/// is refused where that walk reaches it; clones keep their own lines.
#[test]
fn lines_written_over_earlier_ones_are_the_messages_own() {
    use crate::error::ErrorKind;
    use crate::limits::Limit;
    use crate::message::parse_header_line;
    use proptest::prelude::*;
    let message = |lines: usize, seed: usize| {
        let mut m = b"OPTIONS sip:a@h SIP/2.0\r\n".to_vec();
        for i in 0..lines {
            let line = match (i + seed) % 4 {
                0 => format!("Via: SIP/2.0/UDP h{i};branch=z9hG4bK{seed}\r\n"),
                1 => format!("X-{i}: {seed}\r\n"),
                2 => format!("Subject: a\r\n folded {i}\r\n"),
                _ => format!("Route: <sip:r{i}@h;lr>\r\n"),
            };
            m.extend_from_slice(line.as_bytes());
        }
        m.extend_from_slice(b"\r\n");
        m
    };
    // The lines as the full parser reads them one after the other, or the count limit's error.
    let walk = |text: &[u8], limits: &Limits| {
        let mut pos = text.windows(2).position(|w| w == b"\r\n").expect("a start line") + 2;
        let mut lines = Vec::new();
        while !text[pos..].starts_with(b"\r\n") {
            if lines.len() == limits.max_headers {
                return Err(pos);
            }
            let field = parse_header_line(text, pos, limits).expect("a line");
            pos = field.line.end as usize;
            lines.push(field);
        }
        Ok(lines)
    };
    let sizes = proptest::collection::vec((0usize..70, 0usize..80, 0usize..4), 1..10);
    proptest!(|(sequence in sizes)| {
        let mut kept = Vec::new();
        for (lines, max, seed) in sequence {
            let text = message(lines, seed);
            let limits = Limits { max_headers: max, max_via: 100, max_route: 100, ..Limits::default() };
            match (Message::parse(Bytes::from(text.clone()), &limits), walk(&text, &limits)) {
                (Ok(m), Ok(want)) => {
                    prop_assert_eq!(m.headers(), &want[..]);
                    let copy = m.clone();
                    prop_assert_eq!(copy.headers(), &want[..]);
                    // Some stay alive while later messages take other boxes.
                    if seed == 0 {
                        kept.push((m, want));
                    }
                }
                (Err(e), Err(at)) => {
                    prop_assert_eq!(e.kind, ErrorKind::Limit(Limit::HeaderCount));
                    prop_assert_eq!(e.offset, at);
                }
                (got, want) => prop_assert!(false, "{:?} against {:?}", got.map(|m| m.headers().len()), want.map(|w| w.len())),
            }
        }
        for (m, want) in kept {
            prop_assert_eq!(m.headers(), &want[..]);
        }
    });
}
