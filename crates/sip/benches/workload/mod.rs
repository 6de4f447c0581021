//! The measured workloads, shared by the criterion bench (`benches/parse.rs`) and the
//! fixed-iteration runner for instruction counts (`examples/parse_cost.rs`).
#![allow(dead_code)] // each includer uses a subset

use bytes::Bytes;
use criterion::black_box;
use herald_sip::{Limits, Message};
use rsip::headers::ToTypedHeader;
use rsip::prelude::{HasHeaders, HeadersExt};

/// The fixtures: one proxied call (INVITE, 100, 180, 200, ACK, BYE) and a REGISTER.
pub const MESSAGES: [(&str, &[u8]); 7] = [
    ("invite", include_bytes!("../messages/invite.sip")),
    ("trying100", include_bytes!("../messages/trying100.sip")),
    ("ringing180", include_bytes!("../messages/ringing180.sip")),
    ("ok200", include_bytes!("../messages/ok200.sip")),
    ("ack", include_bytes!("../messages/ack.sip")),
    ("bye", include_bytes!("../messages/bye.sip")),
    ("register", include_bytes!("../messages/register.sip")),
];

/// Parses and reads exactly what a stateless proxy routes on. Panics on a parse error: the
/// fixtures are valid, so an error is a bug worth a loud failure.
pub fn proxy_depth(buf: Bytes, limits: &Limits) {
    let msg = Message::parse(buf, limits).expect("fixture parses");
    match msg.method() {
        Some(m) => {
            black_box(m);
        }
        None => {
            black_box(msg.status());
        }
    }
    let via = msg.top_via().expect("top Via");
    black_box(via.branch());
    black_box(&via);
    // Dialog and transaction matching need the tags, not the From/To URIs.
    black_box(msg.from_tag().expect("From"));
    black_box(msg.to_tag().expect("To"));
    black_box(msg.call_id().expect("Call-ID"));
    black_box(msg.cseq().expect("CSeq"));
    for r in msg.routes() {
        black_box(r.expect("Route"));
    }
    black_box(msg.max_forwards().expect("Max-Forwards"));
    black_box(msg.content_length());
}

/// Parses, validates every known header and builds the typed value of every header line.
pub fn full(buf: Bytes, limits: &Limits) {
    let msg = Message::parse(buf, limits).expect("fixture parses");
    msg.validate_all().expect("fixture validates");
    for h in msg.headers() {
        let _ = black_box(msg.typed(h));
    }
}

/// rsip parses into untyped (String-backed) headers; typing them is a separate step. This reads
/// what `proxy_depth` reads: top Via and branch, From/To tags, Call-ID, CSeq, every Route,
/// Max-Forwards and Content-Length.
pub fn rsip_typed(msg: &rsip::SipMessage) {
    let via = msg.via_header().expect("Via").typed().expect("typed Via");
    black_box(via.branch());
    let from = msg.from_header().expect("From").typed().expect("typed From");
    black_box(from.tag());
    let to = msg.to_header().expect("To").typed().expect("typed To");
    black_box(to.tag());
    black_box(msg.call_id_header().expect("Call-ID"));
    black_box(msg.cseq_header().expect("CSeq").typed().expect("typed CSeq"));
    for h in msg.headers().iter() {
        match h {
            rsip::Header::Route(r) => {
                black_box(r.typed().expect("typed Route"));
            }
            rsip::Header::ContentLength(l) => {
                black_box(l.length().expect("Content-Length"));
            }
            _ => {}
        }
    }
    black_box(msg.max_forwards_header().ok().map(|m| m.num()));
}
