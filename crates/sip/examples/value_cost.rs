//! Runs one typed-value parse a fixed number of times, for instruction counts of the value
//! parsers alone (the message head is not scanned), independent of machine load:
//!
//!     cargo build --release -p herald-sip --example value_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/value_cost via 10000
//!
//! Per-value cost = (Ir at N - Ir at 0) / N. The values are those of a proxied SIPp call through
//! herald over UDP (scripts/instructions-vs-kamailio.sh); `call` mixes them roughly as the proxy
//! reads them per call (13 Vias, 11 name-addrs, 14 more URIs, tags, Call-IDs, lists).

use std::hint::black_box;

use herald_sip::headers::{parse_call_id, tag_of, ListIter, NameAddr, Via};
use herald_sip::uri::Uri;

const VIAS: [&[u8]; 3] = [
    b"SIP/2.0/UDP 127.0.0.1:19101;branch=z9hG4bK-29734-1-0",
    b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKf3a9c0d1e2b34a5c.0;rport=19101;received=127.0.0.1",
    b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKf3a9c0d1e2b34a5c.0",
];
const ADDRS: [&[u8]; 5] = [
    b"sipp <sip:sipp@127.0.0.1:19101>;tag=29734SIPpTag001",
    b"<sip:bob@127.0.0.1:5060>;tag=12345SIPpTag011",
    b"<sip:sipp@127.0.0.1:19101;transport=UDP>",
    b"<sip:127.0.0.1:5060;lr;r2=on>",
    b"<sip:127.0.0.1:19102;transport=UDP>",
];
const URIS: [&[u8]; 4] = [
    b"sip:bob@127.0.0.1:5060",
    b"sip:bob@127.0.0.1:19102;transport=UDP",
    b"sip:127.0.0.1:5060;lr",
    b"sip:sipp@127.0.0.1:19101",
];
const LISTS: [&[u8]; 2] = [
    b"SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKf3a9c0d1e2b34a5c.0, SIP/2.0/UDP 127.0.0.1:19101;branch=z9hG4bK-29734-1-0",
    b"<sip:127.0.0.1:5060;lr;r2=on>",
];

fn call() {
    for i in 0..13 {
        let v = Via::parse(VIAS[i % 3]).expect("fixture parses");
        black_box(v.branch());
        if i % 2 == 0 {
            black_box(v.received());
            black_box(v.rport());
        }
    }
    for i in 0..11 {
        let a = NameAddr::parse(ADDRS[i % 5]).expect("fixture parses");
        black_box(a.tag());
        if let Uri::Sip(u) = a.uri {
            black_box(u.transport());
            black_box(u.lr());
        }
    }
    for i in 0..14 {
        if let Uri::Sip(u) = Uri::parse(URIS[i % 4]).expect("fixture parses") {
            black_box(u.transport());
            black_box(u.maddr());
        }
    }
    for i in 0..6 {
        black_box(tag_of(ADDRS[i % 2]).expect("fixture parses"));
        black_box(parse_call_id(b"1-29734@127.0.0.1").expect("fixture parses"));
    }
    for i in 0..12 {
        for e in ListIter::new(LISTS[i % 2]) {
            black_box(e.expect("fixture splits"));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("usage: value_cost call|uri|uri_name|via|via_lookups|name_addr|tag|list|list1|uri_params N");
        std::process::exit(2);
    };
    for _ in 0..n {
        match kind.as_str() {
            "call" => call(),
            "uri" => drop(black_box(Uri::parse(black_box(b"sip:bob@127.0.0.1:5060")))),
            "uri_name" => drop(black_box(Uri::parse(black_box(b"sip:bob@biloxi.example.com;transport=tcp")))),
            "via" => drop(black_box(Via::parse(black_box(VIAS[1])))),
            "via_lookups" => {
                let v = Via::parse(black_box(VIAS[1])).expect("fixture parses");
                black_box((v.received(), v.rport()));
            }
            "name_addr" => drop(black_box(NameAddr::parse(black_box(ADDRS[0])))),
            "tag" => drop(black_box(tag_of(black_box(ADDRS[0])))),
            "list" => ListIter::new(black_box(LISTS[0])).for_each(|e| {
                let _ = black_box(e);
            }),
            "list1" => ListIter::new(black_box(LISTS[1])).for_each(|e| {
                let _ = black_box(e);
            }),
            "uri_params" => {
                if let Ok(Uri::Sip(u)) = Uri::parse(black_box(URIS[1])) {
                    black_box((u.transport(), u.maddr()));
                }
            }
            other => {
                eprintln!("unknown workload {other}");
                std::process::exit(2);
            }
        }
    }
}
