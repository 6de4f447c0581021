//! Inputs the fuzz targets found, kept as tests of the public API.

use bytes::Bytes;
use herald_sip::{Framing, Limits, Message};

/// A REGISTER whose `header` line is given (the rest is well-formed).
fn register_with(via_branch: &[u8], from_tag: &[u8]) -> Bytes {
    let mut m = b"REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP h.example.com:5060;branch=".to_vec();
    m.extend_from_slice(via_branch);
    m.extend_from_slice(b"\r\nFrom: <sip:a@example.com>;tag=");
    m.extend_from_slice(from_tag);
    m.extend_from_slice(
        b"\r\nTo: <sip:a@example.com>\r\nCall-ID: c1\r\nCSeq: 1 REGISTER\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
    );
    Bytes::from(m)
}

/// stream_framer crash-95afcf37: a quoted Via branch holding bytes that are not UTF-8 became
/// "" (a string outside the message) and the validated message's memo took a range from that
/// foreign pointer: a debug assertion, and an out-of-range slice when read back. Such a branch,
/// or such a From/To tag, now makes the message invalid; valid UTF-8 in quotes still passes.
#[test]
fn a_branch_or_tag_that_is_not_utf8_makes_the_message_invalid_without_a_panic() {
    let limits = Limits::default();
    for (branch, tag) in [(&b"\"z9hG4bK\x82\x00x\""[..], &b"t1"[..]), (b"z9hG4bK-1", b"\"t\x82\x00\"")] {
        for framing in [Framing::Datagram, Framing::Stream] {
            let msg = Message::parse_as(register_with(branch, tag), &limits, framing).expect("the head parses");
            assert!(msg.validate_all().is_err(), "{:?}", String::from_utf8_lossy(msg.as_bytes()));
        }
    }
    let ok = Message::parse(register_with("\"z9hG4bK-é\"".as_bytes(), b"t1"), &limits).unwrap();
    ok.validate_all().expect("a quoted UTF-8 branch is tolerated");
    assert_eq!(ok.top_via().unwrap().branch(), Some("\"z9hG4bK-é\""));
}
