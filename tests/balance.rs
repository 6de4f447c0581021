//! Balancing UDP load from one peer over two workers, without reordering a dialog
//! (`crates/server/src/dispatch/balance.rs`).
//!
//! One caller socket is one SO_REUSEPORT flow, so one worker's receiver reads all of it. With
//! herald stopped (SIGSTOP), the caller queues 40 dialogs x 25 in-dialog requests, interleaved;
//! resumed, the receiver reads them 32 at a time - a socket backing up - and hands the messages
//! of the other worker's shards to that worker. The callee socket must then see every request
//! of every dialog, each dialog's in CSeq order, and herald must say it handed some over, all
//! of them unparsed (the receiver's peek read every Call-ID the parse did).

mod bench_support;
mod common;

use bench_support::{assert_exit, read_run, spawn_bench, wait_output};
use common::*;
use herald_bench::scrape::{self, Scrape};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const DIALOGS: usize = 40;
const PER_DIALOG: u32 = 25;

/// An in-dialog request (To tag: never refused as new work) routed by its Request-URI, the
/// callee's address: no registration or lookup involved. Every third request carries a folded
/// header line (RFC 3261 §7.3.1) after its Call-ID: the receiver's peek at the Call-ID stops
/// before it, and the owner's full parse must unfold it. Its Call-ID line takes the shapes of
/// [`CALL_ID_SHAPES`] in turn, so that each dialog is written every way.
fn request(herald: SocketAddr, caller: SocketAddr, callee: SocketAddr, dialog: usize, cseq: u32) -> String {
    let n = dialog + cseq as usize;
    let folded = if n.is_multiple_of(3) { "Subject: balancing,\r\n folded\r\n" } else { "" };
    let (lead, call_id) = CALL_ID_SHAPES[n % CALL_ID_SHAPES.len()];
    let call_id = call_id.replace('%', &format!("balance-{dialog}"));
    format!(
        "{lead}INFO sip:bob@{callee} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {caller};branch=z9hG4bK-bal-{dialog}-{cseq};rport\r\n\
         Route: <sip:{herald};lr>\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:alice@herald.test>;tag=a{dialog}\r\n\
         To: <sip:bob@herald.test>;tag=b{dialog}\r\n\
         {call_id}\r\n\
         CSeq: {cseq} INFO\r\n\
         {folded}Content-Length: 0\r\n\r\n"
    )
}

/// Ways RFC 3261 allows a Call-ID line to be written (what precedes the start line, and the
/// line, `%` standing for the value): the long and compact names in any case (§7.3.1, §7.3.3),
/// white space before and after the colon, the value folded onto the next line, a line before
/// it whose name starts as Call-ID's does, CRLFs before the start line (§7.5). The receiver's
/// peek must read each as the full parse does, so that every message is handed over unparsed
/// (`herald_udp_handed_parsed_total` stays 0): one it missed would be parsed by the receiver
/// and handed over parsed (`HandedItem::Parsed`), a full parse on the busy thread.
const CALL_ID_SHAPES: [(&str, &str); 6] = [
    ("", "Call-ID: %"),
    ("", "i: %"),
    ("", "call-id\t:\r\n   %  "),
    ("", "Call-Info: <http://herald.test/info>\r\nCALL-ID:%"),
    ("", "I :\t%\t"),
    ("\r\n\r\n", "Call-ID:\r\n\t%"),
];

#[test]
fn one_busy_flow_is_shared_by_two_workers_and_every_dialog_keeps_its_order() {
    let dir = test_dir("balance");
    let toml = "[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n[overload]\nenabled = false\n";
    let extras = HeraldExtras { metrics: true, workers: Some(2), toml: Some(toml.into()), ..Default::default() };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let url = herald.metrics_url.clone().unwrap();
    let caller = UdpSocket::bind("127.0.0.1:0").unwrap();
    let callee = UdpSocket::bind("127.0.0.1:0").unwrap();
    callee.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    // 1,000 requests and their retransmissions arrive in a burst: with the default 208 KB
    // buffer a callee that loses the CPU for a moment drops some, and a lost first copy arrives
    // later as a retransmission, which reads as reordering. Room for all of them.
    grow_receive_buffer(&callee, 4 << 20);
    let (caller_addr, callee_addr) = (caller.local_addr().unwrap(), callee.local_addr().unwrap());

    {
        let _stopped = sigstop(herald.pid());
        for cseq in 1..=PER_DIALOG {
            for dialog in 0..DIALOGS {
                let r = request(herald.addr, caller_addr, callee_addr, dialog, cseq);
                caller.send_to(r.as_bytes(), herald.addr).unwrap();
            }
        }
    }

    // dialog (From) -> CSeqs in the order the callee first saw them (retransmissions are skipped:
    // the callee never answers, so herald's client transactions resend every T1).
    let mut seen: HashMap<String, Vec<u32>> = HashMap::new();
    let mut distinct = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = vec![0u8; 65_535];
    while distinct < DIALOGS * PER_DIALOG as usize && Instant::now() < deadline {
        let Ok(n) = callee.recv(&mut buf) else { continue };
        let msg = &buf[..n];
        // By the From tag: the Call-ID line is forwarded as the caller wrote it, folded or not.
        let dialog = header_of(msg, "From", "f").expect("From").to_string();
        let cseq: u32 = header_of(msg, "CSeq", "").expect("CSeq").split(' ').next().unwrap().parse().unwrap();
        let order = seen.entry(dialog).or_default();
        if !order.contains(&cseq) {
            order.push(cseq);
            distinct += 1;
        }
    }
    assert_eq!(seen.len(), DIALOGS, "every dialog reached the callee");
    for (dialog, order) in &seen {
        let expected: Vec<u32> = (1..=PER_DIALOG).collect();
        assert_eq!(
            order,
            &expected,
            "{dialog}: its requests, each once, in order (callee socket drops: {})",
            udp_drops(callee_addr.port())
        );
    }
    let s: Scrape = scrape::fetch(&url).unwrap();
    let handed = s.sum("herald_udp_handed_over_total", &[]);
    let received = s.sum("herald_udp_received_total", &[]);
    assert!(received >= (DIALOGS * PER_DIALOG as usize) as f64, "{received} datagrams read");
    // About half the shards belong to the worker that did not read the flow.
    assert!(handed > 0.1 * received, "{handed} of {received} handed over: balancing did not engage");
    let parsed = s.sum("herald_udp_handed_parsed_total", &[]);
    assert_eq!(parsed, 0.0, "{parsed} of {handed} handed over were parsed first: the peek missed a Call-ID shape");
}

/// `herald bench --single-socket`: callers and callees share one UDP socket, so the whole load
/// reaches herald from one address and port - the one 4-tuple that balancing exists for - and
/// every call still completes through two workers.
#[test]
fn bench_single_socket_sends_all_calls_from_one_socket() {
    let dir = test_dir("balance_single_socket");
    let extras = HeraldExtras { workers: Some(2), ..Default::default() };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let json = dir.join("calls.json");
    let proxy = herald.addr.to_string();
    let args = ["calls", "--proxy", &proxy, "--single-socket", "--rate", "100", "--duration", "2", "--users", "5"];
    let child = spawn_bench(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    // The sockets are open from the first registration to the end of the window.
    std::thread::sleep(Duration::from_millis(1500));
    let sockets = socket_inodes(child.id());
    let out = wait_output(child, Duration::from_secs(60));
    assert_exit(&out, 0);
    assert_eq!(sockets.len(), 1, "the generator's sockets: {sockets:?}");
    let r = read_run(&json, "calls");
    assert!(r.attempted >= 100, "only {} calls attempted", r.attempted);
    assert_eq!((r.failed, r.succeeded), (0, r.attempted), "failures: {:?}", r.failures);
}

/// The distinct sockets process `pid` has open (two descriptors of one socket count once).
fn socket_inodes(pid: u32) -> std::collections::BTreeSet<String> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the generator is running");
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| l.starts_with("socket:"))
        .collect()
}

/// SO_RCVBUF up to the system's rmem_max.
fn grow_receive_buffer(sock: &UdpSocket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor and a c_int option value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
}

/// The kernel's drop count of the IPv4 UDP socket bound to `port` (/proc/net/udp, last column).
fn udp_drops(port: u16) -> String {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .find(|l| l.split_whitespace().nth(1).is_some_and(|a| a.ends_with(&local)))
        .and_then(|l| l.split_whitespace().last().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}
