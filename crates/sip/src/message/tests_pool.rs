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
