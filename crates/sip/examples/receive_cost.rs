//! The receive side of one proxied SIPp call, a fixed number of times, for instruction counts
//! that do not depend on machine load: the six messages herald receives per call of
//! `scripts/instructions-vs-kamailio.sh` (INVITE, 180, 200, ACK, BYE, the BYE's 200; their text
//! in `benches/messages/sipp/`, as SIPp's `tests/sipp/uac.xml` and `uas.xml` write them through
//! a record-routing herald) parsed and checked as `herald_core::inbound::classify` does, then
//! the memo's reads the engine makes of each (`reads`).
//!
//!     cargo build --release -p herald-sip --example receive_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/receive_cost check 10000
//!
//! The responses' top Via is herald's own as it writes it (see `with_heralds_via`).
//!
//! Per-call cost = (Ir at N - Ir at 0) / N. `parse` stops after the header scan, `check` adds the
//! receipt check, `reads` the typed reads.

use std::hint::black_box;

use bytes::Bytes;
use herald_sip::{Limits, Message};

const CALL: [&[u8]; 6] = [
    include_bytes!("../benches/messages/sipp/invite.sip"),
    include_bytes!("../benches/messages/sipp/180.sip"),
    include_bytes!("../benches/messages/sipp/200.sip"),
    include_bytes!("../benches/messages/sipp/ack.sip"),
    include_bytes!("../benches/messages/sipp/bye.sip"),
    include_bytes!("../benches/messages/sipp/bye200.sip"),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("usage: receive_cost parse|check|reads N");
        std::process::exit(2);
    };
    let limits = Limits::default();
    let bufs: Vec<Bytes> = CALL.iter().map(|m| Bytes::from(with_heralds_via(m))).collect();
    for _ in 0..n {
        for buf in &bufs {
            let mut msg = Message::parse(black_box(buf.clone()), &limits).expect("fixture parses");
            match kind.as_str() {
                "parse" => {}
                "check" => msg.check().expect("fixture checks"),
                "reads" => {
                    msg.check().expect("fixture checks");
                    reads(&msg);
                }
                other => {
                    eprintln!("unknown workload {other}");
                    std::process::exit(2);
                }
            }
            black_box(&msg);
        }
    }
}

/// `message` with the top Via of the responses as herald writes its own (`own_values.rs`:
/// a branch of the magic cookie, 16 hex digits, the counter in hex, the loop separator and 16
/// hex digits, then `;rport`) in place of the short one of the files, which
/// `crates/core/examples/call_cost.rs` replaces by its text.
fn with_heralds_via(message: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(message).expect("ASCII fixture");
    let mut out = text.to_owned();
    for n in ["0", "2"] {
        let short = format!("branch=z9hG4bKf3a9c0d1e2b34a5c.{n}, ");
        let ours = format!("branch=z9hG4bKf3a9c0d1e2b34a5c2b{n}-8e4f0a9d7c6b5a43;rport, ");
        out = out.replace(&short, &ours);
    }
    out.into_bytes()
}

/// What the engine reads of a received message, about as often as it reads it (the transaction
/// key, the shard, the response destination, the Via fix-up, the forwarding decisions).
fn reads(msg: &Message) {
    black_box(msg.method());
    black_box(msg.call_id().expect("Call-ID"));
    black_box(msg.cseq().expect("CSeq"));
    for _ in 0..2 {
        let via = msg.top_via().expect("top Via");
        black_box((via.branch(), via.host, via.port, via.rport(), via.received()));
    }
    black_box(msg.from_tag().expect("From"));
    black_box(msg.to_tag().expect("To"));
    if msg.is_request() {
        black_box(msg.request_uri().expect("Request-URI"));
        black_box(msg.max_forwards().expect("Max-Forwards"));
    }
}
