//! The engine's side of proxied SIPp calls, a fixed number of times, for instruction counts
//! that do not depend on machine load: the calls of `scripts/instructions-vs-kamailio.sh`
//! (REGISTER once, then INVITE/180/200/ACK/BYE/200 with Record-Route, the message texts of
//! `crates/sip/benches/messages/sipp/`) through one engine configured as `herald serve` does
//! (absorb grid of 250 ms, record-route always) in 64 engine shards, a message to the shard of
//! its Call-ID as one worker of `herald serve` has them, 20 ms apart on a simulated clock, with
//! every timer run the runtime would make; then the clock runs on until every transaction has
//! ended.
//!
//!     cargo build --release -p herald-core --example call_cost
//!     valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/examples/call_cost 2000
//!     callgrind_annotate --inclusive=yes cg.out | grep -E 'SipHandler>::(handle|handle_timeouts|poll_timeout)$'
//!
//! The engine's cost per call is the inclusive cost of `handle`, `handle_timeouts` and
//! `poll_timeout` divided by N; the harness's own work (parsing and checking what the callee
//! answers, as the runtime's receive side would) lies outside them.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::engine::{Engine, EngineConfig, Forking, Listener, RecordRoute};
use herald_core::inbound::{classify_parsed, shard, Inbound};
use herald_core::proxy::Identity;
use herald_core::transaction::{AbsorbGrid, Timers};
use herald_core::{Input, Output, Peer, Registrar, RegistrarConfig, Seed, SipHandler, Transport};
use herald_sip::{HeaderName, Limits, Message};

/// `herald serve`'s allocator (src/main.rs), so that allocations cost here what they cost there:
/// herald-sys's, which calls mimalloc's plain entry points (the `mimalloc` crate's aligned ones
/// cost about 100 instructions an allocation more for a message buffer).
#[global_allocator]
static ALLOCATOR: herald_sys::Mimalloc = herald_sys::Mimalloc;

const PROXY: &str = "127.0.0.1:5060";
const CALLER: &str = "127.0.0.1:19101";
const CALLEE: &str = "127.0.0.1:19102";
/// The shards of a one-worker `herald serve` (herald-server's `shard_count`).
const SHARDS: usize = 64;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

struct Run {
    engines: Vec<Engine>,
    now: Instant,
    out: Vec<Output>,
}

impl Run {
    fn new() -> Run {
        let now = Instant::now();
        let timers = Timers {
            absorb_grid: Some(AbsorbGrid { epoch: now, step: Duration::from_millis(250) }),
            ..Timers::default()
        };
        let cfg = EngineConfig {
            identity: Identity::new(vec![addr(PROXY)], ["herald-host".to_owned(), "127.0.0.1".to_owned()]),
            listeners: vec![Listener { transport: Transport::Udp, addr: addr(PROXY) }],
            timers,
            record_route: RecordRoute::Always,
            forking: Forking::Parallel,
            stateless: false,
            timer_c: Duration::from_secs(180),
            routes: None,
            seed: Seed::fixed(1),
            nat: Default::default(),
            gateways: Default::default(),
            routing: Default::default(),
        };
        let (cfg, registrar) = (Arc::new(cfg), Registrar::new(RegistrarConfig::default()));
        let store = Arc::new(registrar.new_store());
        let engines = (0..SHARDS).map(|i| Engine::new(cfg.clone(), store.clone(), registrar.clone(), i)).collect();
        Run { engines, now, out: Vec::new() }
    }

    /// Receives `text` from `from` as the runtime does (parse, receipt check), runs the timers
    /// due, and returns what the engine sent.
    fn receive(&mut self, from: &str, text: String) -> Vec<(SocketAddr, Bytes)> {
        // A buffer of its own of exactly the datagram's size, as the UDP receiver makes it.
        let msg = Message::parse(Bytes::copy_from_slice(text.as_bytes()), &Limits::default()).expect("parses");
        let Inbound::Message(msg) = classify_parsed(msg) else { panic!("the receipt check refused a message") };
        self.out.clear();
        self.engines[shard(&msg, &addr(from), SHARDS)].handle(
            self.now,
            Input::Message { from: Peer::udp(addr(from)), local: addr(PROXY), msg },
            &mut self.out,
        );
        self.timers();
        self.out
            .drain(..)
            .filter_map(|o| match o {
                Output::Send { to, bytes } => Some((to.addr, bytes)),
                _ => None,
            })
            .collect()
    }

    fn timers(&mut self) {
        for engine in &mut self.engines {
            while engine.poll_timeout().is_some_and(|at| at <= self.now) {
                let mut out = Vec::new();
                engine.handle_timeouts(self.now, &mut out);
                black_box(out);
            }
        }
    }
}

/// The message `fixture` with `from -> to` replacements made.
fn edit(fixture: &str, replace: &[(&str, &str)]) -> String {
    replace.iter().fold(fixture.replace("\r\n", "\n").replace('\n', "\r\n"), |t, (from, to)| t.replace(from, to))
}

/// The value of the first `name` header of `bytes`.
fn header(bytes: &Bytes, name: HeaderName) -> String {
    let msg = Message::parse(bytes.clone(), &Limits::default()).expect("what the engine sent parses");
    let field = msg.field(name).expect("header");
    String::from_utf8(msg.value_of(field).to_vec()).expect("text")
}

/// The branch of the top Via of `bytes`.
fn branch(bytes: &Bytes) -> String {
    let via = header(bytes, HeaderName::Via);
    let at = via.find("branch=").expect("branch") + "branch=".len();
    via[at..].split([';', ',']).next().expect("value").to_owned()
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(1000);
    let invite = include_str!("../../sip/benches/messages/sipp/invite.sip");
    let ringing = include_str!("../../sip/benches/messages/sipp/180.sip");
    let ok = include_str!("../../sip/benches/messages/sipp/200.sip");
    let ack = include_str!("../../sip/benches/messages/sipp/ack.sip");
    let bye = include_str!("../../sip/benches/messages/sipp/bye.sip");
    let bye_ok = include_str!("../../sip/benches/messages/sipp/bye200.sip");
    let mut run = Run::new();
    let register = "REGISTER sip:127.0.0.1:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:19102;branch=z9hG4bK-reg-1\r\nFrom: <sip:bob@127.0.0.1:5060>;tag=reg1\r\nTo: <sip:bob@127.0.0.1:5060>\r\nCall-ID: reg-1@127.0.0.1\r\nCSeq: 1 REGISTER\r\nContact: <sip:bob@127.0.0.1:19102;transport=UDP>\r\nMax-Forwards: 70\r\nExpires: 3600\r\nContent-Length: 0\r\n\r\n";
    let sent = run.receive(CALLEE, register.to_owned());
    assert!(sent.len() == 1 && sent[0].1.starts_with(b"SIP/2.0 200"), "registered");
    for call in 0..n {
        let call_id = format!("{call}-29734@127.0.0.1");
        let tag = format!("29734SIPpTag{call}");
        let caller = |t: &str, branch: &str| {
            edit(t, &[("1-29734@127.0.0.1", &call_id), ("29734SIPpTag001", &tag), ("z9hG4bK-29734-1-", branch)])
        };
        let sent = run.receive(CALLER, caller(invite, &format!("z9hG4bK-{call}-")));
        let forwarded = &sent.iter().find(|(to, _)| *to == addr(CALLEE)).expect("INVITE forwarded").1;
        let (ours, route) = (branch(forwarded), header(forwarded, HeaderName::RecordRoute));
        let callee = |t: &str, b: &str| {
            edit(
                &caller(t, &format!("z9hG4bK-{call}-")),
                &[(&format!("z9hG4bKf3a9c0d1e2b34a5c.{b}"), &ours), ("<sip:127.0.0.1:5060;lr;r2=on>", &route)],
            )
        };
        run.receive(CALLEE, callee(ringing, "0"));
        run.receive(CALLEE, callee(ok, "0"));
        run.now += Duration::from_millis(5);
        run.receive(CALLER, caller(ack, &format!("z9hG4bK-{call}-")).replace("<sip:127.0.0.1:5060;lr;r2=on>", &route));
        let sent = run
            .receive(CALLER, caller(bye, &format!("z9hG4bK-{call}-")).replace("<sip:127.0.0.1:5060;lr;r2=on>", &route));
        let forwarded = &sent.iter().find(|(to, _)| *to == addr(CALLEE)).expect("BYE forwarded").1;
        let ours = branch(forwarded);
        let sent = run.receive(
            CALLEE,
            edit(&caller(bye_ok, &format!("z9hG4bK-{call}-")), &[("z9hG4bKf3a9c0d1e2b34a5c.2", &ours)]),
        );
        assert!(sent.iter().any(|(to, _)| *to == addr(CALLER)), "the BYE's 200 forwarded");
        run.now += Duration::from_millis(15);
        run.timers();
    }
    // Every transaction ends (Timers L, M, J, K of the last calls).
    for _ in 0..200 {
        run.now += Duration::from_millis(250);
        run.timers();
    }
    assert!(run.engines.iter().all(|e| e.transactions() == 0), "every transaction ended");
}
