//! Runs one parser workload a fixed number of times, for instruction counts that do not depend
//! on machine load:
//!
//!     valgrind --tool=callgrind target/release/examples/parse_cost proxy_depth invite 20000
//!
//! Per-message cost = (Ir at N - Ir at 0) / N. `scripts/parse-cost.sh` does the arithmetic.

#[path = "../benches/workload/mod.rs"]
mod workload;

use bytes::Bytes;
use herald_sip::{Limits, Message};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(name), Some(n)) =
        (args.get(1), args.get(2), args.get(3).and_then(|n| n.parse::<usize>().ok()))
    else {
        eprintln!("usage: parse_cost parse_only|proxy_depth|full|rsip|rsip_typed MESSAGE N");
        std::process::exit(2);
    };
    let Some((_, bytes)) = workload::MESSAGES.iter().find(|(m, _)| m == name) else {
        eprintln!("unknown message {name}");
        std::process::exit(2);
    };
    let limits = Limits::default();
    let buf = Bytes::from_static(bytes);
    for _ in 0..n {
        match kind.as_str() {
            "parse_only" => drop(criterion::black_box(Message::parse(buf.clone(), &limits))),
            "proxy_depth" => workload::proxy_depth(buf.clone(), &limits),
            "full" => workload::full(buf.clone(), &limits),
            "rsip" => drop(criterion::black_box(rsip::SipMessage::try_from(buf.clone()))),
            "rsip_typed" => {
                let m = rsip::SipMessage::try_from(buf.clone()).expect("rsip parses");
                workload::rsip_typed(&m);
            }
            other => {
                eprintln!("unknown workload {other}");
                std::process::exit(2);
            }
        }
    }
}
