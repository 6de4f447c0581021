//! Tests of the message editor (module `editor`).

use super::*;
use crate::Limits;

fn parse(s: &'static [u8]) -> Message {
    Message::parse(Bytes::from_static(s), &Limits::default()).unwrap()
}

const INV: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p1;lr>, <sip:p2;lr>\r\nX-Odd:   keep   \r\n  this\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n";

#[test]
fn proxy_edits_leave_the_rest_verbatim() {
    let m = parse(INV);
    let top_route = m.list_values(HeaderName::Route).next().unwrap().unwrap();
    let mut e = Editor::new(&m);
    e.prepend_header("Via", b"SIP/2.0/UDP proxy;branch=z9hG4bKp")
        .remove_list_value(top_route)
        .set_max_forwards(69)
        .set_request_uri(b"sip:bob@192.0.2.4");
    let expected_len = e.len();
    let out = e.finish();
    assert_eq!(out.len(), expected_len);
    assert_eq!(
        &out[..],
        &b"INVITE sip:bob@192.0.2.4 SIP/2.0\r\nVia: SIP/2.0/UDP proxy;branch=z9hG4bKp\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p2;lr>\r\nX-Odd:   keep   \r\n  this\r\nMax-Forwards: 69\r\nContent-Length: 0\r\n\r\n"[..]
    );
}

#[test]
fn lines_as_written_or_as_pieces_are_the_lines_of_prepend_header() {
    let m = parse(INV);
    let pieces: [&[u8]; 5] = [b"Via: SIP/2.0/UDP ", b"", b"proxy", b";branch=", b"z9hG4bKp\r\n"];
    let mut written = Editor::new(&m);
    written.prepend_lines_of_pieces(&pieces).prepend_lines(b"Record-Route: <sip:p;lr>\r\n");
    let mut whole = Editor::new(&m);
    whole.prepend_header("Via", b"SIP/2.0/UDP proxy;branch=z9hG4bKp").prepend_header("Record-Route", b"<sip:p;lr>");
    assert_eq!(written.len(), whole.len());
    let out = written.finish();
    assert_eq!(out, whole.finish());
    assert!(out.starts_with(
        b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP proxy;branch=z9hG4bKp\r\nRecord-Route: <sip:p;lr>\r\nVia: "
    ));
}

#[test]
fn removing_last_and_only_list_values() {
    let m = parse(INV);
    let last = m.list_values(HeaderName::Route).nth(1).unwrap().unwrap();
    let mut e = Editor::new(&m);
    e.remove_list_value(last);
    let out = e.finish();
    assert!(out.windows(21).any(|w| w == b"Route: <sip:p1;lr>\r\nX"));
    let m2 = Message::parse(out, &Limits::default()).unwrap();
    let only = m2.list_values(HeaderName::Route).next().unwrap().unwrap();
    let mut e = Editor::new(&m2);
    e.remove_list_value(only);
    let out = e.finish();
    assert!(!out.windows(6).any(|w| w == b"Route:"));
}

#[test]
fn removing_several_values_of_one_line() {
    // Two values of one line (a double Record-Route come back as Route): both go, and with
    // them the line; removing the first two of three keeps the third intact.
    let m = parse(b"ACK sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p1;lr>, <sip:p1;transport=tcp;lr>\r\nRoute: <sip:p2;lr>, <sip:p3;lr>, <sip:p4;lr>\r\nContent-Length: 0\r\n\r\n");
    let values: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
    for order in [[0usize, 1], [1, 0]] {
        let mut e = Editor::new(&m);
        for i in order {
            e.remove_list_value(values[i]);
        }
        e.remove_list_value(values[2]).remove_list_value(values[3]);
        let out = Message::parse(e.finish(), &Limits::default()).unwrap();
        for h in out.headers() {
            out.typed(h).unwrap();
        }
        let left: Vec<_> = out.list_values(HeaderName::Route).map(|v| v.unwrap().bytes.to_vec()).collect();
        assert_eq!(left, vec![b"<sip:p4;lr>".to_vec()]);
        assert_eq!(out.fields(HeaderName::Route).count(), 1);
    }
}

/// The sums kept as edits are made and merged are those of a walk over the edits, and the
/// length of what `finish` writes: over every order of a set of edits that insert, replace,
/// remove values and lines, and remove overlapping and touching ranges.
#[test]
fn kept_sums_are_the_edits_sums() {
    let m = parse(b"ACK sip:b@h SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\nRoute: <sip:p1;lr>, <sip:p1;transport=tcp;lr>\r\nRoute: <sip:p2;lr>, <sip:p3;lr>, <sip:p4;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n");
    let values: Vec<_> = m.list_values(HeaderName::Route).map(Result::unwrap).collect();
    let pieces: [&[u8]; 3] = [b"Via: SIP/2.0/UDP ", b"p", b";branch=z9hG4bKp\r\n"];
    fn apply<'a>(e: &mut Editor<'a>, k: u64, values: &[ListValue<'_>], pieces: &'a [&'a [u8]]) {
        match k % 9 {
            0..=3 => e.remove_list_value(values[[0, 1, 3, 4][k as usize % 9]]),
            4 => e.prepend_lines_of_pieces(pieces),
            5 => e.prepend_header("Record-Route", b"<sip:p;lr>"),
            6 => e.set_max_forwards(69),
            7 => e.remove_field(1),
            _ => e.set_request_uri(b"sip:b@192.0.2.4"),
        };
    }
    for seed in 0u64..2000 {
        // A pseudo-random subset of the edits in a pseudo-random order.
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut e = Editor::new(&m);
        for _ in 0..(seed % 9 + 1) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            apply(&mut e, x, &values, &pieces);
        }
        let (added, removed) = e.edits.iter().fold((0, 0), |(a, r), d| (a + d.text.len(), r + d.span.len()));
        assert_eq!((e.added, e.removed), (added, removed), "seed {seed}");
        if e.edits.windows(2).all(|w| w[0].span.end <= w[1].span.start || w[0].span.is_empty()) {
            assert_eq!(e.finish().len(), e.len(), "seed {seed}");
        }
    }
}

#[test]
fn body_and_missing_max_forwards() {
    let m = parse(b"MESSAGE sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\n\r\n");
    let mut e = Editor::new(&m);
    e.set_max_forwards(70).set_body(b"hello");
    let out = Message::parse(e.finish(), &Limits::default()).unwrap();
    assert_eq!(out.max_forwards().unwrap(), Some(70));
    assert_eq!(out.content_length(), Some(5));
    assert_eq!(out.body(), b"hello");
}

#[test]
fn canonical_form() {
    let m = parse(b"OPTIONS sip:a@b SIP/2.0\r\nv: SIP/2.0/UDP a\r\n ;branch=z9hG4bK1\r\ni: x@y\r\nl: 0\r\n\r\n");
    assert_eq!(
        &canonical(&m)[..],
        &b"OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP a ;branch=z9hG4bK1\r\nCall-ID: x@y\r\nContent-Length: 0\r\n\r\n"
            [..]
    );
}
