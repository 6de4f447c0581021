//! `herald bench calls|register|users` against real servers on loopback: `herald serve` built
//! from this repo (UDP and TCP) and Kamailio (tests/bench_kamailio/proxy.cfg), with digest
//! authentication (MD5 and SHA-256) answered against Kamailio's auth module. Low rates and short
//! windows: these check correctness and the results file, not capacity.

mod bench_support;
mod common;

use bench_support::{assert_exit, bench, credentials, read_run, wait_output, Kamailio, KAMAILIO_PASSWORD};
use common::{port_block, test_dir, Herald, HeraldConfig};
use herald_bench::results::RunResult;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn herald(dir: &std::path::Path) -> Herald {
    Herald::start(dir, &HeraldConfig { drain_timeout_s: Some(1), private_netns: false })
}

/// Every call attempted succeeded, with one SRD and SDD sample each and INVITE/BYE timings.
fn assert_clean_calls(r: &RunResult, min_calls: u64) {
    assert!(r.attempted >= min_calls, "only {} calls attempted", r.attempted);
    assert_eq!(r.failed, 0, "failures: {:?}", r.failures);
    assert_eq!(r.succeeded, r.attempted);
    assert_eq!(r.srd.count, r.attempted);
    assert_eq!(r.sdd.count, r.attempted);
    assert!(r.srd.p50_us > 0 && r.srd.p50_us <= r.srd.max_us);
    assert!(r.response_time["INVITE"].count >= r.attempted);
    assert!(r.response_time["BYE"].count >= r.attempted);
    assert!(r.generator.cpu_s > 0.0);
    assert!(r.achieved_rate > 0.0 && r.offered_rate > 0.0);
    assert!(!r.interrupted);
}

fn calls_against_herald(transport: &str) {
    let dir = test_dir(&format!("bench_calls_{transport}"));
    let h = herald(&dir);
    let json = dir.join("calls.json");
    let pid = h.pid().to_string();
    let out = bench(
        &["calls", "--proxy", &h.addr.to_string(), "--transport", transport, "--rate", "30", "--duration", "3"]
            .into_iter()
            .chain(["--users", "7", "--ring", "20", "--hold", "50", "--server-pid", &pid, "--label", "herald"])
            .chain(["--json", json.to_str().unwrap(), "--seed", "11"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0);
    let r = read_run(&json, "calls");
    assert_clean_calls(&r, 40);
    assert_eq!(r.transport, transport);
    assert_eq!(r.label, "herald");
    assert_eq!(r.arrivals, "poisson");
    // Ring 20 ms: the 180 comes at once, so SRD is far below the ring time; the 200 after it.
    assert!(r.response_time["INVITE"].p50_us >= 20_000, "{:?}", r.response_time["INVITE"]);
    assert_eq!(r.servers.len(), 1);
    assert!(r.servers[0].cpu_s > 0.0 && r.servers[0].peak_rss_kib > 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SRD") && text.contains("succeeded"), "{text}");
    // The callees were unregistered at the end: no binding of theirs is left behind to route
    // the next run's calls to this run's closed sockets. (The query itself is shown to list a
    // binding that is there.)
    assert_eq!((r.unregister_failed, r.unregister_error.as_deref()), (0, None));
    let domain = h.addr.ip().to_string(); // the bench's default domain
    assert_eq!(register(h.addr, &domain, "probe", Some("sip:probe@127.0.0.1:9")), vec!["<sip:probe@127.0.0.1:9>"]);
    for user in ["user0", "user6"] {
        assert_eq!(register(h.addr, &domain, user, None), Vec::<String>::new(), "{user} still bound");
    }
}

/// Sends REGISTER for `user` to herald over UDP, adding `contact` or, without one, asking for
/// the current bindings (RFC 3261 §10.2.3); returns the Contact values of the 200.
fn register(herald: std::net::SocketAddr, domain: &str, user: &str, contact: Option<&str>) -> Vec<String> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = socket.local_addr().unwrap();
    let contact = contact.map(|c| format!("Contact: <{c}>\r\nExpires: 60\r\n")).unwrap_or_default();
    let req = format!(
        "REGISTER sip:{domain} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-q{user}\r\nMax-Forwards: 70\r\n\
         From: <sip:{user}@{domain}>;tag=q\r\nTo: <sip:{user}@{domain}>\r\nCall-ID: query-{user}\r\n\
         CSeq: 1 REGISTER\r\n{contact}Content-Length: 0\r\n\r\n"
    );
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    socket.send_to(req.as_bytes(), herald).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = socket.recv(&mut buf).expect("no answer to REGISTER");
    let resp = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(resp.starts_with("SIP/2.0 200"), "{resp}");
    resp.lines()
        .filter_map(|l| l.strip_prefix("Contact:").or_else(|| l.strip_prefix("m:")))
        .map(|v| v.split(';').next().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn calls_over_udp_through_herald() {
    calls_against_herald("udp");
}

#[test]
fn calls_over_tcp_through_herald() {
    calls_against_herald("tcp");
}

#[test]
fn register_load_against_herald() {
    let dir = test_dir("bench_register");
    let h = herald(&dir);
    let json = dir.join("register.json");
    let out = bench(
        &["register", "--registrar", &h.addr.to_string(), "--users", "20", "--rate", "40", "--duration", "2"]
            .into_iter()
            .chain(["--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0);
    let r = read_run(&json, "register");
    // Uniform arrivals at 40/s over 2 s: 79 or 80 REGISTERs (the last may fall on the end).
    assert!((78..=80).contains(&r.attempted), "{}", r.attempted);
    assert_eq!(r.failed, 0, "{:?}", r.failures);
    assert_eq!(r.response_time["REGISTER"].count, r.attempted);
    assert_eq!(r.arrivals, "uniform");
}

#[test]
fn user_workload_against_herald() {
    let dir = test_dir("bench_users");
    let h = herald(&dir);
    let json = dir.join("users.json");
    // Time scale 600: think time mean 6 s, registration every 1 s, rings of 3-40 ms.
    let out = bench(
        &["users", "--proxy", &h.addr.to_string(), "--users", "12", "--time-scale", "600", "--duration", "6"]
            .into_iter()
            .chain(["--json", json.to_str().unwrap(), "--seed", "5"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0);
    let r = read_run(&json, "users");
    let u = r.users.clone().expect("users outcome");
    assert_eq!(u.users, 12);
    assert_eq!(u.transactions_failed, 0);
    assert!(u.meets_criterion);
    // About 12 users × 6 s refreshes plus the calls' transactions.
    assert!(u.transactions >= 60, "{}", u.transactions);
    assert!(r.attempted >= 4, "{}", r.attempted);
    assert_eq!(r.failed, 0, "{:?}", r.failures);
    assert_eq!(u.calls_by_outcome.values().sum::<u64>(), r.succeeded);
    assert!(r.response_time["REGISTER"].count >= 50);
}

fn kamailio_calls(name: &str, algorithm: Option<&str>) -> RunResult {
    let dir = test_dir(name);
    let k = Kamailio::start(&dir, port_block(), algorithm);
    let json = dir.join("calls.json");
    let creds = credentials(&dir, 4, KAMAILIO_PASSWORD);
    let (pid, addr) = (k.pid().to_string(), k.addr());
    let mut args = vec!["calls", "--proxy", &addr, "--rate", "20", "--duration", "3", "--hold", "30"];
    args.extend(["--arrivals", "uniform", "--server-pid", &pid, "--json", json.to_str().unwrap()]);
    if algorithm.is_some() {
        args.extend(["--credentials", creds.to_str().unwrap()]);
    } else {
        args.extend(["--users", "4"]);
    }
    let out = bench(&args, LIMIT);
    assert_exit(&out, 0);
    let r = read_run(&json, "calls");
    assert_clean_calls(&r, 55);
    assert_eq!(r.arrivals, "uniform");
    r
}

#[test]
fn calls_through_kamailio() {
    let r = kamailio_calls("bench_kamailio", None);
    assert_eq!(r.response_time["INVITE"].count, r.attempted, "no challenges without auth");
}

#[test]
fn digest_md5_and_sha256_through_kamailio() {
    for alg in ["MD5", "SHA-256"] {
        let r = kamailio_calls(&format!("bench_kamailio_{alg}"), Some(alg));
        // Every INVITE and BYE is challenged once (407) and then accepted.
        assert_eq!(r.response_time["INVITE"].count, 2 * r.attempted, "{alg}");
        assert_eq!(r.response_time["BYE"].count, 2 * r.attempted, "{alg}");
    }
}

#[test]
fn wrong_password_is_reported_not_hidden() {
    let dir = test_dir("bench_kamailio_wrong_password");
    let k = Kamailio::start(&dir, port_block(), Some("MD5"));
    let creds = credentials(&dir, 2, "not-the-password");
    let out = bench(
        &["calls", "--proxy", &k.addr(), "--rate", "5", "--duration", "1", "--credentials", creds.to_str().unwrap()],
        LIMIT,
    );
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("status 401"), "{err}");
}

#[test]
fn user_workload_with_authentication_through_kamailio() {
    let dir = test_dir("bench_kamailio_users");
    let k = Kamailio::start(&dir, port_block(), Some("MD5"));
    let json = dir.join("users.json");
    let creds = credentials(&dir, 10, KAMAILIO_PASSWORD);
    let out = bench(
        &["users", "--proxy", &k.addr(), "--credentials", creds.to_str().unwrap(), "--time-scale", "300"]
            .into_iter()
            .chain(["--duration", "5", "--json", json.to_str().unwrap(), "--seed", "3"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0);
    let r = read_run(&json, "users");
    let u = r.users.expect("users outcome");
    assert_eq!(u.transactions_failed, 0);
    assert_eq!(r.failed, 0, "{:?}", r.failures);
    // Each REGISTER is challenged: at least two REGISTER transactions per refresh.
    assert!(r.response_time["REGISTER"].count >= 2 * 10);
}

#[test]
fn ctrl_c_stops_early_and_still_writes_results() {
    let dir = test_dir("bench_kamailio_sigint");
    let k = Kamailio::start(&dir, port_block(), None);
    let json = dir.join("calls.json");
    let child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "calls", "--proxy", &k.addr(), "--rate", "20", "--duration", "60", "--hold", "5000"])
        .args(["--users", "3", "--quiet", "--json", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let out = wait_output(child, Duration::from_secs(30));
    assert_exit(&out, 0);
    let r = read_run(&json, "calls");
    assert!(r.interrupted);
    assert!(r.duration_s < 10.0, "{}", r.duration_s);
    // Held calls were hung up at once rather than after their 5 s hold.
    assert_eq!(r.failed, 0, "{:?}", r.failures);
    assert!(r.succeeded >= 20);
}

/// A registrar that refuses each registration's first REGISTER with 503 and Retry-After: 1,
/// accepts the rest, and refuses INVITEs with 480: the generator must pace its set-up by
/// Retry-After (RFC 3261 §21.5.4) instead of failing the run, and still unregister at the end.
#[test]
fn registration_refused_with_503_is_retried_after_retry_after() {
    use std::collections::HashMap;
    use std::net::UdpSocket;
    use std::time::Instant;

    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    server.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    // (when, Call-ID, Expires) of every REGISTER received.
    let registrar = std::thread::spawn(move || {
        let start = Instant::now();
        let mut seen: Vec<(Duration, String, String)> = Vec::new();
        let mut buf = vec![0u8; 65536];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, from)) = server.recv_from(&mut buf) else { continue };
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let header = |name: &str| {
                text.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string())).unwrap_or_default()
            };
            let (via, from_h, to, call_id, cseq) =
                (header("Via:"), header("From:"), header("To:"), header("Call-ID:"), header("CSeq:"));
            let answer = |status: &str, extra: &str| {
                format!(
                    "SIP/2.0 {status}\r\nVia: {via}\r\nFrom: {from_h}\r\nTo: {to};tag=srv\r\nCall-ID: {call_id}\r\n\
                     CSeq: {cseq}\r\n{extra}Content-Length: 0\r\n\r\n"
                )
            };
            let reply = if text.starts_with("REGISTER ") {
                let first = !seen.iter().any(|(_, id, _)| *id == call_id);
                seen.push((start.elapsed(), call_id.clone(), header("Expires:")));
                if first {
                    answer("503 Service Unavailable", "Retry-After: 1\r\n")
                } else {
                    answer("200 OK", &format!("Contact: {}\r\n", header("Contact:")))
                }
            } else if text.starts_with("INVITE ") {
                answer("480 Temporarily Unavailable", "")
            } else {
                continue; // the ACK for the 480
            };
            server.send_to(reply.as_bytes(), from).unwrap();
        }
        seen
    });

    let dir = test_dir("bench_register_503");
    let json = dir.join("calls.json");
    let out = bench(
        &["calls", "--proxy", &addr.to_string(), "--users", "3", "--rate", "5", "--duration", "1"]
            .into_iter()
            .chain(["--json", json.to_str().unwrap(), "--seed", "3"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = registrar.join().unwrap();
    let r = read_run(&json, "calls");
    assert!(r.attempted > 0, "the window ran: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(r.failures.get("status 480"), Some(&r.attempted), "{:?}", r.failures);
    let mut by_call: HashMap<&str, Vec<(Duration, &str)>> = HashMap::new();
    for (at, id, expires) in &seen {
        by_call.entry(id.as_str()).or_default().push((*at, expires.as_str()));
    }
    assert_eq!(by_call.len(), 3, "{seen:?}");
    for (id, regs) in by_call {
        // Refused, retried no sooner than Retry-After, accepted; at the end removed (Expires: 0).
        assert!(regs.len() >= 3, "{id}: {regs:?}");
        assert!(regs[1].0 - regs[0].0 >= Duration::from_millis(990), "{id}: retried too early: {regs:?}");
        assert_ne!(regs[1].1, "0");
        assert_eq!(regs.last().unwrap().1, "0", "{id}: not unregistered: {regs:?}");
    }
    assert_eq!(r.unregister_failed, 0);
}
