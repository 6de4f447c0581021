//! Parser benchmarks: the header index alone (`parse_only`), what a proxy reads per message
//! (`proxy_depth`), full validation with every typed header (`full`), rsip 0.4 for comparison
//! (`rsip`: untyped parse, `rsip_typed`: plus the typed headers `proxy_depth` reads), and stream framing.
//!
//! Run: `cargo bench -p herald-sip --bench parse -- --warm-up-time 1 --measurement-time 3`

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::{Limits, Message, Transport};
use rsip::headers::ToTypedHeader;
use rsip::prelude::{HasHeaders, HeadersExt};

/// The fixtures: one proxied call (INVITE, 100, 180, 200, ACK, BYE) and a REGISTER.
const MESSAGES: [(&str, &[u8]); 7] = [
    ("invite", include_bytes!("messages/invite.sip")),
    ("trying100", include_bytes!("messages/trying100.sip")),
    ("ringing180", include_bytes!("messages/ringing180.sip")),
    ("ok200", include_bytes!("messages/ok200.sip")),
    ("ack", include_bytes!("messages/ack.sip")),
    ("bye", include_bytes!("messages/bye.sip")),
    ("register", include_bytes!("messages/register.sip")),
];

/// Parses and reads exactly what a stateless proxy routes on. Panics on a parse error: the
/// fixtures are valid, so an error is a bug worth a loud failure.
fn proxy_depth(buf: Bytes, limits: &Limits) {
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
fn full(buf: Bytes, limits: &Limits) {
    let msg = Message::parse(buf, limits).expect("fixture parses");
    msg.validate_all().expect("fixture validates");
    for h in msg.headers() {
        let _ = black_box(msg.typed(h));
    }
}

/// rsip parses into untyped (String-backed) headers; typing them is a separate step. This reads
/// what `proxy_depth` reads: top Via and branch, From/To tags, Call-ID, CSeq, every Route,
/// Max-Forwards and Content-Length.
fn rsip_typed(msg: &rsip::SipMessage) {
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

fn bench_parse(c: &mut Criterion) {
    let limits = Limits::default();
    // Sanity: every fixture must pass the checks the benchmarks rely on, and rsip must accept it.
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        let m = Message::parse(buf.clone(), &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
        m.validate_all().unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = rsip::SipMessage::try_from(buf).unwrap_or_else(|e| panic!("rsip {name}: {e}"));
        rsip_typed(&r);
    }

    // Message::parse alone (header index, no typed value): the counterpart of rsip's untyped parse.
    let mut group = c.benchmark_group("parse_only");
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| black_box(Message::parse(buf.clone(), &limits).expect("fixture parses")))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("proxy_depth");
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| proxy_depth(buf.clone(), &limits))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("full");
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| b.iter(|| full(buf.clone(), &limits)));
    }
    group.finish();

    let mut group = c.benchmark_group("rsip");
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| black_box(rsip::SipMessage::try_from(buf.clone()).expect("rsip parses")))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("rsip_typed");
    for (name, bytes) in MESSAGES {
        let buf = Bytes::from_static(bytes);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| {
                let m = rsip::SipMessage::try_from(buf.clone()).expect("rsip parses");
                rsip_typed(&m);
                black_box(m)
            })
        });
    }
    group.finish();
}

fn bench_framing(c: &mut Criterion) {
    let limits = Limits::default();
    let stream: Vec<u8> = MESSAGES.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    let stream = Bytes::from(stream);
    let mut group = c.benchmark_group("framing");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("stream_of_7", |b| {
        b.iter(|| {
            // One copy into the receive buffer, as a socket read would do.
            let mut buf = BytesMut::from(&stream[..]);
            let mut n = 0;
            while let Some(frame) = next_frame(&mut buf, &limits).expect("framing") {
                if let Frame::Message(m) = frame {
                    black_box(Message::parse_as(m, &limits, Transport::Stream).expect("parses"));
                    n += 1;
                }
            }
            assert_eq!(n, 7);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_parse, bench_framing);
criterion_main!(benches);
