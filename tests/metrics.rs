//! The metrics endpoint of a real `herald serve` on loopback: counts per message type and
//! transport, queue wait and service time sums, what `herald_bench::scrape` makes of them,
//! hostile HTTP clients, and socket drops (SO_RXQ_OVFL) after a stalled process.

mod common;

use common::*;
use herald_bench::scrape::{self, Scrape};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn start(name: &str, udp_buffer_bytes: Option<usize>) -> (Herald, String) {
    let dir = test_dir(name);
    let extras = HeraldExtras { metrics: true, udp_buffer_bytes, ..Default::default() };
    let h = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let url = h.metrics_url.clone().unwrap();
    (h, url)
}

fn fetch(url: &str) -> Scrape {
    scrape::fetch(url).unwrap_or_else(|e| panic!("scrape {url}: {e}"))
}

fn register_request(herald: SocketAddr, local: SocketAddr, user: &str, n: u32) -> String {
    format!(
        "REGISTER sip:{ip} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-reg-{user}-{n};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:{user}@{ip}>;tag=r{n}\r\n\
         To: <sip:{user}@{ip}>\r\n\
         Call-ID: reg-{user}\r\n\
         CSeq: {n} REGISTER\r\n\
         Contact: <sip:{user}@{local}>\r\n\
         Expires: 120\r\n\
         Content-Length: 0\r\n\r\n",
        ip = herald // with the port: the registrar is herald only at its own port
    )
}

/// Sends one request over UDP and waits for its final response (no retransmission: loopback).
fn udp_transaction(sock: &UdpSocket, herald: SocketAddr, req: &str, call_id: &str) -> u16 {
    sock.send_to(req.as_bytes(), herald).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) if header_of(&buf[..n], "Call-ID", "i") == Some(call_id) => {
                if let Some(s) = status_of(&buf[..n]).filter(|s| *s >= 200) {
                    return s;
                }
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    panic!("no final response to {call_id}");
}

/// One OPTIONS over an open TCP connection; returns the final status.
fn tcp_options(conn: &mut TcpStream, herald: SocketAddr, call_id: &str) -> u16 {
    let local = conn.local_addr().unwrap();
    conn.write_all(options_request(herald, local, call_id, "TCP").as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // One response per request, never pipelined here: the whole stream is this answer.
        if let Some(end) = find(&got, b"\r\n\r\n") {
            let msg = &got[..end + 4];
            assert_eq!(header_of(msg, "Call-ID", "i"), Some(call_id));
            return status_of(msg).unwrap();
        }
        let n = conn.read(&mut buf).expect("TCP response");
        assert!(n > 0, "herald closed the TCP connection");
        got.extend_from_slice(&buf[..n]);
    }
}

fn delta(before: &Scrape, after: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    after.sum(name, labels) - before.sum(name, labels)
}

#[test]
fn counts_and_timings_per_type_and_transport() {
    let (herald, url) = start("metrics_counts", None);
    let before = fetch(&url);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    for i in 0..20 {
        let id = format!("opt-udp-{i}");
        assert_eq!(udp_transaction(&sock, herald.addr, &options_request(herald.addr, local, &id, "UDP"), &id), 200);
    }
    // 200, or 401 when digest authentication is on: either is one final response of its class.
    let mut register_classes = std::collections::BTreeMap::new();
    for n in 1..=5 {
        let req = register_request(herald.addr, local, "alice", n);
        let status = udp_transaction(&sock, herald.addr, &req, "reg-alice");
        *register_classes.entry(format!("{}xx", status / 100)).or_insert(0.0) += 1.0;
    }
    let mut conn = TcpStream::connect(herald.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for i in 0..7 {
        assert_eq!(tcp_options(&mut conn, herald.addr, &format!("opt-tcp-{i}")), 200);
    }
    let open = fetch(&url);
    assert_eq!(open.get("herald_tcp_connections_open", &[]), Some(1.0));
    drop(conn);
    let after = fetch(&url);

    let received = |ty: &str, tr: &str| {
        delta(&before, &after, "herald_messages_received_total", &[("type", ty), ("transport", tr)])
    };
    let sent =
        |ty: &str, tr: &str| delta(&before, &after, "herald_messages_sent_total", &[("type", ty), ("transport", tr)]);
    assert_eq!(received("OPTIONS", "udp"), 20.0);
    assert_eq!(received("OPTIONS", "tcp"), 7.0);
    assert_eq!(received("REGISTER", "udp"), 5.0);
    assert_eq!(received("INVITE", "udp"), 0.0);
    for class in ["1xx", "2xx", "3xx", "4xx", "5xx", "6xx"] {
        let want = register_classes.get(class).copied().unwrap_or(0.0) + if class == "2xx" { 20.0 } else { 0.0 };
        assert_eq!(sent(class, "udp"), want, "{class} sent over UDP");
    }
    assert_eq!(sent("2xx", "tcp"), 7.0);
    assert_eq!(delta(&before, &after, "herald_udp_received_total", &[]), 25.0);
    assert_eq!(delta(&before, &after, "herald_tcp_received_total", &[]), 7.0);
    assert_eq!(delta(&before, &after, "herald_tcp_accepted_total", &[]), 1.0);
    // The proxy core answered every OPTIONS itself (and the challenges, if any); the
    // registrar's 200s are its own family.
    let local = |status: &str| delta(&before, &after, "herald_local_responses_total", &[("status", status)]);
    assert_eq!(local("200"), 27.0);
    assert_eq!(local("401"), register_classes.get("4xx").copied().unwrap_or(0.0));
    // Queue wait exists for datagrams only; service time for every message.
    let options = [("type", "OPTIONS")];
    assert_eq!(delta(&before, &after, "herald_queue_wait_seconds_count", &options), 20.0);
    assert_eq!(delta(&before, &after, "herald_service_seconds_count", &options), 27.0);
    for family in ["herald_queue_wait_seconds", "herald_service_seconds"] {
        let sum = delta(&before, &after, &format!("{family}_sum"), &options);
        let sq = delta(&before, &after, &format!("{family}_squared_sum_total"), &options);
        assert!(sum > 0.0 && sq > 0.0, "{family}: sum {sum}, squares {sq}");
        assert!(sum < 20.0, "{family}: {sum} s is not a plausible total for 27 messages");
        let inf = after.get(&format!("{family}_bucket"), &[("type", "OPTIONS"), ("le", "+Inf")]);
        assert_eq!(inf, after.get(&format!("{family}_count"), &options), "{family}: +Inf bucket = count");
    }

    let w = scrape::window(&before, &after);
    assert_eq!(w.workers as usize, std::thread::available_parallelism().unwrap().get());
    assert_eq!(w.socket_drops, 0);
    assert_eq!(w.messages.keys().map(String::as_str).collect::<Vec<_>>(), ["OPTIONS", "REGISTER"]);
    let o = &w.messages["OPTIONS"];
    assert_eq!(o.count, 27);
    assert_eq!(w.messages["REGISTER"].count, 5);
    for (what, m) in [("OPTIONS service", o.service), ("OPTIONS queue wait", o.queue_wait)] {
        assert!(m.mean_us > 0.0 && m.mean_us < 1e6, "{what}: {m:?}");
        // E[X²] >= E[X]² holds for exact moments of any sample (and fails for garbage).
        assert!(m.second_moment_us2 >= m.mean_us * m.mean_us * 0.999_999, "{what}: {m:?}");
    }
    assert!(w.messages["REGISTER"].service.mean_us > 0.0);
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// Sends `bytes` on a fresh connection (in pieces `gap` apart) and returns the whole answer.
fn http_exchange(addr: SocketAddr, pieces: &[&[u8]], gap: Duration) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    for p in pieces {
        // The server may answer and close before a large head is written in full.
        if c.write_all(p).is_err() {
            break;
        }
        std::thread::sleep(gap);
    }
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn hostile_http_clients_do_not_break_the_endpoint_or_the_server() {
    let (herald, url) = start("metrics_hostile", None);
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/metrics").parse().unwrap();
    let status = |answer: &str| answer.split(' ').nth(1).unwrap_or("").to_string();

    // A client that never sends anything holds one slot; the others are served meanwhile.
    let silent = TcpStream::connect(addr).unwrap();
    // Slowloris within the limits: a head dribbled over ~1.5 s is still answered.
    let slow = std::thread::spawn(move || {
        let pieces: [&[u8]; 4] = [b"GET /met", b"rics HTTP/1.1\r\n", b"Host: x\r\n", b"\r\n"];
        http_exchange(addr, &pieces, Duration::from_millis(500))
    });
    let oversize = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"\x00\xff\xfe garbage\r\n\r\n".to_vec(), "400"),
        (b"GET /metrics\r\n\r\n".to_vec(), "400"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".to_vec(), "405"),
        (b"GET /admin HTTP/1.1\r\n\r\n".to_vec(), "404"),
        (oversize.into_bytes(), "431"),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "200"),
    ];
    for (req, want) in &cases {
        let answer = http_exchange(addr, &[req], Duration::ZERO);
        assert_eq!(status(&answer), *want, "{:?} → {answer:.200}", String::from_utf8_lossy(&req[..req.len().min(40)]));
        assert!(answer.contains("Connection: close"), "{answer:.200}");
    }
    let slow = slow.join().unwrap();
    assert_eq!(status(&slow), "200", "{slow:.200}");
    assert!(slow.contains("herald_workers "), "{slow:.200}");
    // A head that stops coming is cut off after 5 s, unanswered (hyper's header_read_timeout
    // closes the connection; the hand-written responder before it answered 408).
    let mut silent = silent;
    silent.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut answer = String::new();
    let read = silent.read_to_string(&mut answer);
    assert!(read.is_ok() && answer.is_empty(), "{read:?} {answer:.200}");

    // Still scraping, and SIP still served.
    fetch(&url);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp_options_ok(&sock, herald.addr, "after-hostile-http", Duration::from_secs(5)).unwrap();
    assert!(herald.stop().is_some_and(|s| s.success()));
}

#[test]
fn socket_queue_overflow_is_counted() {
    // The smallest receive buffer the config allows; the kernel doubles it (socket(7) SO_RCVBUF)
    // and charges each datagram's whole buffer (several hundred bytes), so a few dozen fit.
    let (herald, url) = start("metrics_drops", Some(4096));
    let before = fetch(&url);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let flood = 2000;
    {
        let _stopped = sigstop(herald.pid());
        // A stopped process reads nothing: the socket queue fills and the rest is dropped.
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..flood {
            sock.send_to(b"\r\n\r\n", herald.addr).unwrap();
        }
    }
    // The drop count rides on datagrams queued after the drops (the kernel adds SO_RXQ_OVFL to
    // each datagram as it queues it): this OPTIONS from the same address reaches the same socket.
    udp_options_ok(&sock, herald.addr, "after-flood", Duration::from_secs(10)).unwrap();
    let after = fetch(&url);
    let drops = scrape::window(&before, &after).socket_drops;
    let read = delta(&before, &after, "herald_udp_received_total", &[]) as u64;
    assert!(drops > 0, "no drops counted; herald read {read} datagrams");
    // Every datagram was either read or dropped (the OPTIONS may have been retransmitted).
    assert!(drops + read >= flood && drops < flood, "drops {drops}, read {read}, sent {flood}+");
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// The whole scrape of a herald whose other areas export families too (durable location,
/// gateway sets, NAT keep-alives, admin API) keeps the OpenMetrics rules a scraper relies on:
/// one HELP and TYPE per family, every sample under its family with the suffixes its type
/// allows (counter `_total`, histogram `_bucket`/`_sum`/`_count`), cumulative buckets ending in
/// `+Inf` = `_count`, and `# EOF` once, last.
#[test]
fn a_fully_configured_scrape_is_valid_openmetrics() {
    let dir = test_dir("metrics_openmetrics");
    let toml = "[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n\
                [admin]\nlisten = \"127.0.0.1:0\"\n\
                [location]\nmode = \"write-back\"\npath = \"location.db\"\n\
                [[gateway_set]]\nname = \"pstn\"\ndestinations = [{ uri = \"sip:127.0.0.1:9\" }]\n";
    let extras = HeraldExtras { metrics: true, toml: Some(toml.into()), ..Default::default() };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let url = herald.metrics_url.clone().unwrap();
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/metrics").parse().unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = sock.local_addr().unwrap();
    let req = register_request(herald.addr, local, "alice", 1);
    assert_eq!(udp_transaction(&sock, herald.addr, &req, "reg-alice"), 200);

    let answer = http_exchange(addr, &[b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"], Duration::ZERO);
    let (head, text) = answer.split_once("\r\n\r\n").expect("a whole answer");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0"), "{head}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"));
    assert_eq!(lines.iter().filter(|l| l.starts_with("# EOF")).count(), 1);

    let mut families = std::collections::HashSet::new();
    let mut current: Option<(String, String)> = None; // (family, type)
    let mut help: Option<String> = None;
    // Per histogram series (family, labels without le): last cumulative bucket, and +Inf.
    let mut buckets: std::collections::HashMap<String, (f64, Option<f64>)> = Default::default();
    let mut counts: std::collections::HashMap<String, f64> = Default::default();
    for l in &lines[..lines.len() - 1] {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            help = Some(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            assert_eq!(help.as_deref(), Some(name), "HELP before TYPE: {l}");
            assert!(families.insert(name.to_string()), "family twice: {l}");
            current = Some((name.to_string(), ty.to_string()));
            continue;
        }
        assert!(!l.starts_with('#') && !l.is_empty(), "unexpected line {l:?}");
        let (series, value) = l.rsplit_once(' ').unwrap();
        let value: f64 = if value == "+Inf" { f64::INFINITY } else { value.parse().unwrap_or_else(|_| panic!("{l}")) };
        let (name, labels) = series.split_once('{').map_or((series, ""), |(n, l)| (n, l.trim_end_matches('}')));
        let (family, ty) = current.as_ref().unwrap_or_else(|| panic!("sample before any TYPE: {l}"));
        let suffix = name.strip_prefix(family.as_str()).unwrap_or_else(|| panic!("{l} under family {family}"));
        let allowed: &[&str] = match ty.as_str() {
            "counter" => &["_total"],
            "gauge" | "unknown" => &[""],
            "histogram" => &["_bucket", "_sum", "_count"],
            other => panic!("type {other}: {l}"),
        };
        assert!(allowed.contains(&suffix), "{l}: suffix {suffix:?} in a {ty}");
        if ty == "histogram" {
            let key_labels: Vec<&str> = labels.split(',').filter(|p| !p.starts_with("le=")).collect();
            let key = format!("{family}{{{}}}", key_labels.join(","));
            match suffix {
                "_bucket" => {
                    let b = buckets.entry(key).or_insert((0.0, None));
                    assert!(value >= b.0, "buckets not cumulative: {l}");
                    b.0 = value;
                    if labels.contains("le=\"+Inf\"") {
                        b.1 = Some(value);
                    }
                }
                "_count" => {
                    counts.insert(key, value);
                }
                _ => {}
            }
        } else {
            assert!(!labels.contains("le="), "{l}");
        }
    }
    assert!(!buckets.is_empty(), "the REGISTER was timed: some histogram has series");
    assert_eq!(buckets.len(), counts.len(), "every histogram series has a _count");
    for (key, (_, inf)) in &buckets {
        assert_eq!(*inf, counts.get(key).copied(), "{key}: +Inf bucket = _count");
    }
    // Herald's own families and those the other areas registered, one line each.
    for prefix in ["herald_messages_received", "herald_location_", "herald_gateway_", "herald_nat_", "herald_admin_"] {
        assert!(families.iter().any(|f| f.starts_with(prefix)), "no {prefix} family in\n{text}");
    }
    assert!(herald.stop().is_some_and(|s| s.success()));
}
