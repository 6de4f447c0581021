//! Parser benchmarks: the header index alone (`parse_only`), what a proxy reads per message
//! (`proxy_depth`), full validation with every typed header (`full`), rsip 0.4 for comparison
//! (`rsip`: untyped parse, `rsip_typed`: plus the typed headers `proxy_depth` reads), and stream framing.
//!
//! Run: `cargo bench -p herald-sip --bench parse -- --warm-up-time 1 --measurement-time 3`

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::{Framing, Limits, Message};

mod workload;
use workload::{full, proxy_depth, rsip_typed, MESSAGES};

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
                    black_box(Message::parse_as(m, &limits, Framing::Stream).expect("parses"));
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
