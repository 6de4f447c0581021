//! Malformed traffic against a running `herald serve` while real calls run through it (issue
//! "hostile network"): a generated corpus of malformed messages (tests/hostile/corpus.rs:
//! truncated, oversized, duplicated and conflicting headers, bad escapes, bad Content-Length,
//! binary junk, huge headers, ...) sent in batches over UDP and TCP (tests/hostile/wire.rs;
//! TLS plugs in there as another `Connector`). Meanwhile SIPp calls a SIPp callee through herald
//! at [`RATE`] calls per second.
//!
//! After each batch: herald still runs, answers a valid OPTIONS over UDP and over TCP with 200,
//! has logged no panic (a panic caught by an engine shard is a bug all the same), and its
//! resident memory stays under [`RSS_LIMIT_KIB`]. At the end: every call succeeded (SIPp's
//! caller and callee both count them), herald exits 0 on SIGTERM, everything herald sent back
//! parsed (on TCP: framed), and everything it forwarded to the two test callees (one at a UDP,
//! one at a TCP contact) parsed, framed and passed the receipt checks herald applies itself.
//!
//! Herald runs in a private network namespace holding only `lo` (root needed, like
//! tests/live_torture.rs): well-formed mutants are answered where their Via says and proxied
//! where their Request-URI says (the torture messages name example.com and friends), which on
//! the shared loopback could be somebody else's server; in the namespace nothing leaves and
//! DNS fails at once.
//!
//! On a failure the batch's mutants are written to `target/tmp/hostile_network/batch-N/` (one
//! file each, named after its mutation), and for a logged panic the mutant that causes it is
//! found again by replaying the batch one message at a time. `HERALD_HOSTILE_DUMP=1` writes
//! every batch there.

mod common;
mod hostile;
mod tls_support;

use common::*;
use hostile::corpus::{self, Mutant, Target};
use hostile::tls::TlsConnector;
use hostile::wire::{self, Mode, TcpConnector, Transport};
use hostile::{rss_kib, Sink, Violations};
use std::net::UdpSocket;
use std::path::Path;
use std::time::{Duration, Instant};

/// Valid calls per second during the whole run.
const RATE: u32 = 20;
/// Calls placed: enough to outlast the corpus (checked: [`assert_load_outlasted`]). The corpus
/// takes 37-40 s (37.4 s on a quiet 2-core machine, 39.3 s in a fresh-clone CI run that then
/// failed with 800 calls, 40 s of load): 50 s of load leaves room.
const CALLS: u32 = 1000;
/// Mutants per batch (the slow batch is smaller: each of its messages takes ~0.1 s).
const BATCH: usize = 500;
const SLOW_BATCH: usize = 100;
/// The corpus is the same on every run; change it to explore.
const SEED: u64 = 0x4845_5241_4c44;
/// How long a liveness probe may take (a debug build on a loaded machine).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Herald's resident memory must stay below this. What herald may legitimately hold here: the
/// binary and its two workers' buffers (about 15 MB for this debug build, measured), the
/// transactions of the calls (800 calls × a few KB) and of the well-formed mutants it accepts
/// (each keeps its request, at most 64 KB, for up to 64*T1 = 32 s: at 500 per batch and the
/// fraction that parses, a few MB), TCP read buffers (at most one 64 KB message per open
/// connection, ≤ 64 open here) and the location store (a few hundred bindings). Well under
/// 64 MB in all; 128 MB leaves room for allocator slack and still catches a leak of a batch's
/// bytes (≥ 500 × 64 KB = 32 MB per batch) within a few batches.
const RSS_LIMIT_KIB: u64 = 128 * 1024;

#[test]
fn malformed_traffic_while_calls_run() {
    // Herald's network namespace is entered by the thread that starts it: a thread of its own.
    let t = std::thread::Builder::new().name("hostile".into()).spawn(run).unwrap();
    if let Err(e) = t.join() {
        std::panic::resume_unwind(e);
    }
}

/// The transports of the plan, indexes into the list built in [`run`].
#[derive(Clone, Copy)]
enum Wire {
    Udp = 0,
    Tcp = 1,
    Tls = 2,
}

/// One planned batch: transport, mode, size.
struct Planned {
    wire: Wire,
    mode: Mode,
    size: usize,
}

const PLAN: &[Planned] = &[
    Planned { wire: Wire::Udp, mode: Mode::Datagrams, size: BATCH },
    Planned { wire: Wire::Tcp, mode: Mode::ConnectionEach, size: BATCH },
    Planned { wire: Wire::Udp, mode: Mode::Datagrams, size: BATCH },
    Planned { wire: Wire::Tcp, mode: Mode::Pipelined, size: BATCH },
    Planned { wire: Wire::Udp, mode: Mode::Datagrams, size: BATCH },
    Planned { wire: Wire::Tcp, mode: Mode::ConnectionEach, size: BATCH },
    Planned { wire: Wire::Tcp, mode: Mode::Pipelined, size: BATCH },
    Planned { wire: Wire::Tcp, mode: Mode::Slow, size: SLOW_BATCH },
    Planned { wire: Wire::Tls, mode: Mode::ConnectionEach, size: BATCH },
    Planned { wire: Wire::Tls, mode: Mode::Pipelined, size: BATCH },
    Planned { wire: Wire::Tls, mode: Mode::Slow, size: SLOW_BATCH },
];

fn run() {
    let dir = test_dir("hostile_network");
    let cfg = HeraldConfig { drain_timeout_s: Some(1), private_netns: true };
    let pki = tls_support::Pki::generate(&dir, "hostile");
    let extras = HeraldExtras { tls: Some((pki.cert.clone(), pki.key.clone())), ..Default::default() };
    let mut herald = Herald::start_with(&dir, &cfg, &extras);
    // From here on this thread, the sockets it opens and the processes it starts are in
    // herald's namespace.
    let h = herald.addr;
    let pid = herald.pid();
    eprintln!("herald pid {pid} at {h}, RSS at start {} KiB", rss_kib(pid).unwrap_or(0));

    // The valid load: a SIPp callee registered as "callee", a SIPp caller calling it.
    let (n, r) = (CALLS.to_string(), RATE.to_string());
    let uas = Sipp::start(&dir, "uas", "uas.xml", &["-m", &n, "-timeout", "150"]);
    wait_bound(uas.port, false);
    let contact_port = uas.port.to_string();
    let reg_args = [&h.to_string(), "-s", "callee", "-key", "contact_host", "127.0.0.1"]
        .into_iter()
        .map(str::to_owned)
        .chain(["-key", "contact_port", &contact_port, "-m", "1", "-timeout", "30"].map(str::to_owned))
        .collect::<Vec<_>>();
    let reg_args: Vec<&str> = reg_args.iter().map(String::as_str).collect();
    Sipp::start(&dir, "register", "register.xml", &reg_args)
        .wait_watching(&mut herald, Duration::from_secs(60))
        .assert_all_successful(1);
    let load_started = Instant::now();
    let hs = h.to_string();
    let uac =
        Sipp::start(&dir, "uac", "uac.xml", &[&hs, "-s", "callee", "-r", &r, "-m", &n, "-d", "200", "-timeout", "150"]);

    // Forwarded mutants go to callees that answer them and check what they get.
    let sink = Sink::start(h, "sink", "sinktcp");
    eprintln!("sinks registered: sink@{h} at udp {}, sinktcp@{h} at tcp {}", sink.udp, sink.tcp);
    let answers = Violations::default();
    // In `Wire` order.
    let tls_port = herald.tls_addr.expect("TLS listener").port();
    let transports = [
        Transport::Udp(UdpSocket::bind("127.0.0.1:0").unwrap()),
        Transport::Stream(Box::new(TcpConnector)),
        Transport::Stream(Box::new(TlsConnector::new(&pki.ca, tls_port))),
    ];
    let (torture_dir, torture) = corpus::torture();
    match &torture_dir {
        Some(d) => eprintln!("{} RFC 4475 messages from {} join the seeds", torture.len(), d.display()),
        None => eprintln!("warning: no RFC 4475 corpus (HERALD_TORTURE_DIR); seeds are the built-in messages only"),
    }

    let mut total = 0;
    let mut peak_rss = 0;
    let mut sent: Vec<Vec<Mutant>> = Vec::new();
    let corpus_started = Instant::now();
    for (k, p) in PLAN.iter().enumerate() {
        let transport = &transports[p.wire as usize];
        let sender = match transport {
            Transport::Udp(s) => s.local_addr().unwrap(),
            Transport::Stream(_) => "127.0.0.1:9".parse().unwrap(),
        };
        let target = Target {
            herald: h,
            sender,
            via_transport: transport.name(),
            callee: "sink".into(),
            callee_tcp: "sinktcp".into(),
            max_len: transport.max_len(),
        };
        let mutants = corpus::generate(SEED ^ k as u64, p.size, &corpus::seeds(&target), &torture, &target);
        if std::env::var_os("HERALD_HOSTILE_DUMP").is_some() {
            dump(&dir, k, &mutants);
        }
        let log_panics = panics(&herald);
        let report = wire::send_batch(transport, h, &mutants, p.mode, &answers);
        total += report.sent;
        let rss = rss_kib(pid).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        eprintln!(
            "batch {k}: {} {:?}, {} sent ({} send errors) over {} connections in {:.1?}; herald closed {}, \
             answered {:?}, sent {} requests to us; the sinks got {} + {} (TCP); bad output so far: {} to us, \
             {} forwarded; RSS {rss} KiB",
            transport.name(),
            p.mode,
            report.sent,
            report.send_errors,
            report.connections,
            report.elapsed,
            report.closed_by_herald,
            report.statuses,
            report.requests_received,
            sink.requests.load(std::sync::atomic::Ordering::Relaxed),
            sink.requests_tcp.load(std::sync::atomic::Ordering::Relaxed),
            answers.total(),
            sink.violations.total(),
        );
        check_after_batch(&mut herald, k, &mutants, transport, &transports, log_panics, rss, &dir);
        sent.push(mutants);
    }
    let corpus_time = corpus_started.elapsed();
    eprintln!("{total} mutants sent in {corpus_time:.1?}; peak RSS {peak_rss} KiB");
    assert!(total >= 3000, "only {total} mutants sent");
    assert_load_outlasted(load_started, corpus_started + corpus_time);

    let uac = uac.wait_watching(&mut herald, Duration::from_secs(150));
    let uas = uas.wait_watching(&mut herald, Duration::from_secs(60));
    uac.assert_all_successful(u64::from(CALLS));
    uas.assert_all_successful(u64::from(CALLS));
    let forwarded = std::mem::take(&mut *sink.violations.samples.lock().unwrap());
    let forwarded_count = sink.violations.total();
    drop(sink);
    let log = herald.log.clone();
    let text = herald.log_text();
    assert!(!text.contains("panicked"), "herald logged a panic:\n{}", log_excerpt(&log));
    let status = herald.stop();
    assert!(status.is_some_and(|s| s.success()), "herald exit status {status:?}; log:\n{}", log_excerpt(&log));
    // Last, so that every other check has run: herald never emits what cannot be parsed, and
    // what it forwards passes the checks it applied itself.
    assert_eq!(answers.total(), 0, "herald answered with bytes that do not parse:\n{}", answers.report());
    assert_eq!(
        forwarded_count,
        0,
        "herald forwarded {forwarded_count} messages its next hop must refuse, e.g.:\n{}",
        forwarded.iter().map(|v| format!("{v}\n{}", which_mutant(v, &sent, &dir))).collect::<Vec<_>>().join("\n---\n")
    );
}

/// The mutant whose Call-ID token appears in `text` (a forwarded message), saved to a file.
fn which_mutant(text: &str, batches: &[Vec<Mutant>], dir: &Path) -> String {
    for (k, batch) in batches.iter().enumerate() {
        for (i, m) in batch.iter().enumerate() {
            if text.contains(&format!("-{}@hostile", m.token)) {
                let file = dir.join(format!("forwarded-batch{k}-{i:04}-{}.sip", m.kind));
                let _ = std::fs::write(&file, &m.bytes);
                return format!(
                    "made from batch {k} mutant {i} ({} of {}), sent as:\n{}\n(saved to {})",
                    m.kind,
                    m.seed,
                    m.preview(1500),
                    file.display()
                );
            }
        }
    }
    "(no mutant of the corpus has this Call-ID)".into()
}

/// Panics herald logged so far (the panic message and the shard's "handler panicked").
fn panics(herald: &Herald) -> usize {
    herald.log_text().matches("panicked").count()
}

#[allow(clippy::too_many_arguments)] // the batch and everything needed to explain a failure
fn check_after_batch(
    herald: &mut Herald,
    k: usize,
    mutants: &[Mutant],
    transport: &Transport,
    all: &[Transport],
    panics_before: usize,
    rss: u64,
    dir: &Path,
) {
    let h = herald.addr;
    let fail = |herald: &Herald, what: String| -> ! {
        let saved = dump(dir, k, mutants);
        panic!(
            "after batch {k} ({} mutants over {}): {what}\nthe batch is in {}\nherald's log:\n{}",
            mutants.len(),
            transport.name(),
            saved.display(),
            log_excerpt(&herald.log)
        );
    };
    if let Some(st) = herald.exited() {
        fail(herald, format!("herald exited ({st})"));
    }
    for t in all {
        if let Err(e) = wire::options_ok(t, h, &format!("alive-{k}-{}", t.name()), PROBE_TIMEOUT) {
            fail(herald, format!("a valid OPTIONS over {} was not answered 200: {e}", t.name()));
        }
    }
    if panics(herald) > panics_before {
        let culprit = find_culprit(herald, transport, mutants, panics(herald));
        let what = match culprit {
            Some(m) => {
                format!("herald logged a panic; this mutant ({} of {}) causes it:\n{}", m.kind, m.seed, m.preview(2000))
            }
            None => "herald logged a panic; no single mutant of the batch causes it again".into(),
        };
        fail(herald, what);
    }
    if rss > RSS_LIMIT_KIB {
        fail(herald, format!("herald's RSS is {rss} KiB, over the {RSS_LIMIT_KIB} KiB bound"));
    }
}

/// Replays `mutants` one at a time until the count of logged panics grows.
fn find_culprit<'a>(
    herald: &Herald,
    transport: &Transport,
    mutants: &'a [Mutant],
    mut seen: usize,
) -> Option<&'a Mutant> {
    let mode = match transport {
        Transport::Udp(_) => Mode::Datagrams,
        Transport::Stream(_) => Mode::ConnectionEach,
    };
    let ignored = Violations::default();
    for m in mutants {
        wire::send_batch(transport, herald.addr, std::slice::from_ref(m), mode, &ignored);
        std::thread::sleep(Duration::from_millis(20));
        let now = panics(herald);
        if now > seen {
            return Some(m);
        }
        seen = now;
    }
    None
}

/// Writes the batch to `dir/batch-K/NNNN-kind.sip`, one mutant per file.
fn dump(dir: &Path, k: usize, mutants: &[Mutant]) -> std::path::PathBuf {
    let out = dir.join(format!("batch-{k}"));
    let _ = std::fs::create_dir_all(&out);
    for (i, m) in mutants.iter().enumerate() {
        let _ = std::fs::write(out.join(format!("{i:04}-{}.sip", m.kind)), &m.bytes);
    }
    out
}

/// The calls must have run during the whole corpus: SIPp places CALLS at RATE from the start.
fn assert_load_outlasted(load_started: Instant, corpus_done: Instant) {
    let load_end = load_started + Duration::from_secs(u64::from(CALLS / RATE));
    assert!(
        corpus_done + Duration::from_secs(1) < load_end,
        "the corpus took {:.1?} past the start of the load, which places calls for {} s only: raise CALLS",
        corpus_done - load_started,
        CALLS / RATE
    );
}
