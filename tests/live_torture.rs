//! RFC 4475 torture messages sent as-is to a running `herald serve`, over UDP (one datagram
//! each) and over TCP (a fresh connection each), with the response every one of them gets
//! recorded in [`EXPECTED`]. After each message herald must still answer an OPTIONS and exit 0
//! on SIGTERM (no worker panicked).
//!
//! Every message gets a herald of its own, in a private network namespace (`unshare --net`,
//! root needed) holding only `lo`:
//! * UDP responses go where RFC 3261 §18.2.2 says: to the source address and the top Via's
//!   port, 5060 for almost every torture message (few have `rport`). On the shared loopback that
//!   is somebody else's server; in the namespace the test listens on 127.0.0.1:5060 itself.
//! * Requests herald forwards never leave the machine, and DNS fails at once (no route to any
//!   name server), so "example.com does not resolve" is a deterministic 503 for the branch, which
//!   herald turns into 500 (§16.7 step 6). mpart01's Route names 127.0.0.1:5080, where the test
//!   plays the next hop and answers 200.
//! * Many messages share a branch and sent-by (cparam01 and cparam02 both use z9hG4bKkdjuw from
//!   saturn.example.com:5060): with one herald the second would match the first's server
//!   transaction (§17.2.3) and only get its response retransmitted.

mod common;

use bytes::BytesMut;
use common::*;
use herald_sip::framing::{next_frame, Frame};
use herald_sip::Limits;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a message expected to get no answer is given to prove it.
const SILENCE: Duration = Duration::from_secs(2);
/// How long an expected answer may take (a loaded machine, a debug build).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// UDP port of the test's client socket inside the namespace (herald is on 16000, its start
/// probe on 16001).
const CLIENT_PORT: u16 = 16002;
/// The port a Via without a port (and without rport) gets its UDP responses on.
const VIA_PORT: u16 = 5060;
/// mpart01's `Route: <sip:127.0.0.1:5080>`: the next hop the test plays.
const HOP_PORT: u16 = 5080;

/// What herald does with a message sent over UDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Udp {
    /// No response anywhere.
    Silent,
    /// A final response with this status to the sender's address and port (herald answers
    /// malformed requests there: their Via is not trusted).
    Src(u16),
    /// A final response with this status to the sender's IP and the top Via's port, 5060
    /// (§18.2.2 for a well-formed request without rport).
    Via(u16),
}

/// What herald does with a message sent on a fresh TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tcp {
    /// This final response (`None`: none) and the connection stays open.
    Open(Option<u16>),
    /// This final response (`None`: none), then herald closes the connection.
    Closed(Option<u16>),
}

use Tcp::{Closed, Open};
use Udp::{Silent, Src, Via};

/// Observed behaviour, file by file (`baddn-crlf-fix` is rfc4475-baddn-crlf-fix/baddn.dat).
/// RFC 4475 verdicts: ../shared/testdata/sip-torture/README.txt.
#[rustfmt::skip]
const EXPECTED: &[(&str, Udp, Tcp)] = &[
    // Valid requests (§3.1.1, §3.3): herald is not responsible for example.com and friends, so it
    // proxies them; resolution fails in the namespace: 503 for the branch, 500 upstream.
    ("wsinv",      Via(500), Open(Some(500))),
    ("intmeth",    Via(500), Open(Some(500))),
    ("esc01",      Via(500), Open(Some(500))),
    ("escnull",    Via(500), Open(Some(500))),
    ("esc02",      Via(500), Open(Some(500))),
    ("lwsdisp",    Via(500), Open(Some(500))),
    ("longreq",    Via(500), Open(Some(500))),
    // Over UDP the trailing INVITE octets are ignored (§3.1.1.8); over TCP they are a second
    // message whose body runs 5 bytes past its Content-Length: framing lost, connection closed
    // before the two 500s exist, so nothing comes back.
    ("dblreq",     Via(500), Closed(None)),
    ("semiuri",    Via(500), Open(Some(500))),
    ("transports", Via(500), Open(Some(500))),
    // Forwarded to its Route (the test's next hop at 127.0.0.1:5080), whose 200 comes back to
    // the rport (the sender) or over the connection.
    ("mpart01",    Src(200), Open(Some(200))),
    ("badbranch",  Via(500), Open(Some(500))),
    ("unkscm",     Via(416), Open(Some(416))),
    ("novelsc",    Via(416), Open(Some(416))),
    ("unksm2",     Via(500), Open(Some(500))),
    ("bext01",     Via(420), Open(Some(420))),
    ("invut",      Via(500), Open(Some(500))),
    ("regaut01",   Via(500), Open(Some(500))),
    // OPTIONS with Max-Forwards 0: answered as a UAS (§16.3 step 3).
    ("zeromf",     Via(200), Open(Some(200))),
    ("cparam01",   Via(500), Open(Some(500))),
    ("cparam02",   Via(500), Open(Some(500))),
    ("regescrt",   Via(500), Open(Some(500))),
    ("sdp01",      Via(500), Open(Some(500))),
    // RFC 2543 syntax: fine in a datagram; on a stream Content-Length is mandatory (§18.3).
    ("inv2543",    Via(500), Closed(Some(400))),
    // Malformed requests (§3.1.2, §3.3): answered to the sender.
    ("badinv01",   Src(400), Open(Some(400))),
    // Over TCP: waits for the 152 announced bytes (§3.1.2.2), the test closes it.
    ("clerr",      Src(400), Open(None)),
    ("ncl",        Src(400), Closed(Some(400))),
    ("scalar02",   Src(400), Open(Some(400))),
    ("quotbal",    Src(400), Open(Some(400))),
    ("ltgtruri",   Src(400), Open(Some(400))),
    // Malformed Request-Lines (§3.1.2.8-§3.1.2.10): 400, built from the headers under a neutral
    // Request-Line, so the extra whitespace is never forwarded.
    ("lwsruri",    Src(400), Open(Some(400))),
    ("lwsstart",   Src(400), Open(Some(400))),
    ("trws",       Src(400), Open(Some(400))),
    ("escruri",    Src(400), Open(Some(400))),
    // A proxy checks only what it uses (§16.3 step 1): a Date with a bad time zone, a Contact
    // not in <>, spaces in the To addr-spec and an unquoted display name in From are passed on
    // unchanged (RFC 4475 allows tolerating them; `herald inspect` answers 400).
    ("baddate",    Via(500), Open(Some(500))),
    ("regbadct",   Via(500), Open(Some(500))),
    ("badaspec",   Via(500), Open(Some(500))),
    ("baddn-crlf-fix", Via(500), Open(Some(500))),
    // The archive's baddn has no blank line after the headers: a datagram ends there, so it is
    // answered 400 like `herald inspect` says; on a stream the head is incomplete: wait.
    ("baddn",      Src(400), Open(None)),
    ("badvers",    Src(505), Open(Some(505))),
    ("mismatch01", Src(400), Open(Some(400))),
    ("mismatch02", Src(501), Open(Some(501))),
    // No From, To or Call-ID: nothing to build a response with; dropped.
    ("insuf",      Silent,   Open(None)),
    ("multi01",    Src(400), Open(Some(400))),
    ("mcl01",      Src(400), Closed(Some(400))),
    // Responses: never answered; no transaction matches, so dropped (scalarlg, bigcode are
    // malformed; bcast has a broadcast Via; unreason, noreason are fine).
    ("unreason",   Silent,   Open(None)),
    ("noreason",   Silent,   Open(None)),
    ("scalarlg",   Silent,   Open(None)),
    ("bigcode",    Silent,   Open(None)),
    ("bcast",      Silent,   Open(None)),
    // Not a test case: a Request-Line without a version.
    ("test",       Silent,   Closed(None)),
];

fn corpus() -> PathBuf {
    std::env::var("HERALD_TORTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/sip-torture"))
}

fn file_of(name: &str) -> PathBuf {
    match name {
        "baddn-crlf-fix" => corpus().join("rfc4475-baddn-crlf-fix/baddn.dat"),
        _ => corpus().join(format!("rfc4475/{name}.dat")),
    }
}

#[test]
fn the_table_covers_every_rfc4475_file() {
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus().join("rfc4475"))
        .expect("RFC 4475 corpus (set HERALD_TORTURE_DIR)")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(".dat").map(str::to_owned))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> =
        EXPECTED.iter().map(|r| r.0.to_owned()).filter(|n| !n.ends_with("-crlf-fix")).collect();
    listed.sort();
    assert_eq!(listed, on_disk);
}

#[test]
fn rfc4475_over_udp() {
    run_all("udp", |dir, &(name, expected, _), msg| {
        let (got, hop) = over_udp(dir, msg, expected != Silent);
        check_hop(name, msg, hop.as_deref());
        (format!("{expected:?}"), format!("{got:?}"))
    });
}

#[test]
fn rfc4475_over_tcp() {
    run_all("tcp", |dir, &(name, _, expected), msg| {
        let (got, hop) = over_tcp(dir, msg, matches!(expected, Open(Some(_)) | Closed(_)));
        check_hop(name, msg, hop.as_deref());
        (format!("{expected:?}"), format!("{got:?}"))
    });
}

type Row = (&'static str, Udp, Tcp);
/// One message through one transport: (expected, observed), as `Debug` text.
type Check = fn(&Path, &Row, &[u8]) -> (String, String);

/// Runs `one` for every row, in a thread of its own (it enters network namespaces), and fails
/// with the whole observed table if any row differs.
fn run_all(transport: &'static str, one: Check) {
    let root = test_dir(&format!("live_torture_{transport}"));
    let rows = std::thread::spawn(move || {
        EXPECTED
            .iter()
            .map(|row| {
                let name = row.0;
                let msg = std::fs::read(file_of(name)).unwrap_or_else(|e| panic!("{name}: {e} (HERALD_TORTURE_DIR?)"));
                let dir = root.join(name);
                std::fs::create_dir_all(&dir).unwrap();
                let (want, got) = one(&dir, row, &msg);
                let ok = want == got;
                (name, want, got, ok)
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e));
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| !r.3)
        .map(|(name, want, got, _)| format!("  {name}: expected {want}, got {got}"))
        .collect();
    let table: Vec<String> = rows.iter().map(|(name, _, got, _)| format!("  {name:<15} {got}")).collect();
    assert!(
        bad.is_empty(),
        "{transport}: {} of {} torture messages changed behaviour:\n{}\nobserved:\n{}",
        bad.len(),
        rows.len(),
        bad.join("\n"),
        table.join("\n")
    );
}

/// A herald of its own for one message, in a fresh network namespace entered by this thread.
fn netns_herald(dir: &Path) -> Herald {
    Herald::start(dir, &HeraldConfig { drain_timeout_s: Some(0), private_netns: true })
}

/// After the message: herald answers OPTIONS over UDP (and over a new TCP connection when
/// `tcp`), and exits 0 on SIGTERM: no worker panicked.
fn survives(herald: Herald, client: &UdpSocket, tcp: bool) {
    if let Err(e) = udp_options_ok(client, herald.addr, "alive-after-torture", ANSWER_TIMEOUT) {
        panic!("herald stopped answering OPTIONS over UDP ({e}); log:\n{}", herald.log_text());
    }
    if tcp {
        let mut s = TcpStream::connect(herald.addr).unwrap();
        let local = s.local_addr().unwrap();
        s.write_all(options_request(herald.addr, local, "alive-after-torture-tcp", "TCP").as_bytes()).unwrap();
        let (statuses, _) = read_stream(&mut s, None, Instant::now() + ANSWER_TIMEOUT);
        assert_eq!(statuses, [200], "OPTIONS over a new TCP connection; log:\n{}", herald.log_text());
    }
    let log = herald.log.clone();
    let status = herald.stop();
    assert!(status.is_some_and(|s| s.success()), "herald exit status {status:?}; log:\n{}", log_excerpt(&log));
}

fn udp_socket(port: u16) -> UdpSocket {
    let s = UdpSocket::bind(("127.0.0.1", port)).unwrap_or_else(|e| panic!("bind 127.0.0.1:{port}: {e}"));
    s.set_nonblocking(true).unwrap();
    s
}

/// Sends `msg` as one datagram; returns where its final response went, and the request the
/// next hop at 127.0.0.1:5080 received, if any.
fn over_udp(dir: &Path, msg: &[u8], answers: bool) -> (Udp, Option<Vec<u8>>) {
    let herald = netns_herald(dir);
    let client = udp_socket(CLIENT_PORT);
    let via = udp_socket(VIA_PORT);
    let hop = udp_socket(HOP_PORT);
    let call_id = header_of(msg, "Call-ID", "i").map(str::to_owned);
    client.send_to(msg, herald.addr).unwrap();
    let deadline = Instant::now() + if answers { ANSWER_TIMEOUT } else { SILENCE };
    let mut got = Silent;
    let mut forwarded = None;
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline && got == Silent {
        let mut idle = true;
        for (sock, at) in [(&client, Src as fn(u16) -> Udp), (&via, Via)] {
            if let Ok((n, _)) = sock.recv_from(&mut buf) {
                idle = false;
                let r = &buf[..n];
                assert_eq!(header_of(r, "Call-ID", "i"), call_id.as_deref(), "a response to another message");
                match status_of(r) {
                    Some(s) if s >= 200 => got = at(s),
                    Some(_) => {}
                    None => panic!("herald sent a request back: {}", String::from_utf8_lossy(r)),
                }
            }
        }
        if let Ok((n, from)) = hop.recv_from(&mut buf) {
            idle = false;
            forwarded = Some(buf[..n].to_vec());
            hop.send_to(&ok_for(&buf[..n]), from).unwrap();
        }
        if idle {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    client.set_nonblocking(false).unwrap();
    survives(herald, &client, false);
    (got, forwarded)
}

/// Sends `msg` on a new connection; returns its final response and whether herald closed the
/// connection, and the request the next hop at 127.0.0.1:5080 received, if any.
fn over_tcp(dir: &Path, msg: &[u8], answers: bool) -> (Tcp, Option<Vec<u8>>) {
    let herald = netns_herald(dir);
    let client = udp_socket(CLIENT_PORT);
    let hop = udp_socket(HOP_PORT);
    let mut forwarded = None;
    let mut s = TcpStream::connect(herald.addr).unwrap();
    s.write_all(msg).unwrap();
    let deadline = Instant::now() + if answers { ANSWER_TIMEOUT } else { SILENCE };
    let (statuses, mut closed) = read_stream(&mut s, Some((&hop, &mut forwarded)), deadline);
    let finals: Vec<u16> = statuses.iter().copied().filter(|s| *s >= 200).collect();
    assert!(finals.len() <= 1, "several final responses: {statuses:?}");
    let status = finals.first().copied();
    if status.is_some() && !closed {
        // Still open? An OPTIONS on the same connection is answered, or finds it closed.
        let local = s.local_addr().unwrap();
        let probe = options_request(herald.addr, local, "same-connection", "TCP");
        closed = match s.write_all(probe.as_bytes()) {
            Err(_) => true,
            Ok(()) => {
                let (st, c) = read_stream(&mut s, None, Instant::now() + ANSWER_TIMEOUT);
                assert!(c || st == [200], "OPTIONS on the same connection got {st:?}");
                c
            }
        };
    }
    // With no answer and no close, herald is still waiting for more: the test closes it.
    drop(s);
    client.set_nonblocking(false).unwrap();
    survives(herald, &client, true);
    (if closed { Closed(status) } else { Open(status) }, forwarded)
}

/// Reads responses from `s` until a final one, the end of the connection, or `deadline`; a
/// request arriving at the next hop meanwhile is kept and answered 200. Returns the status
/// codes in order and whether the connection ended.
fn read_stream(
    s: &mut TcpStream,
    mut hop: Option<(&UdpSocket, &mut Option<Vec<u8>>)>,
    deadline: Instant,
) -> (Vec<u16>, bool) {
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 65536];
    let mut statuses = Vec::new();
    while Instant::now() < deadline {
        if let Some((sock, seen)) = hop.as_mut() {
            if let Ok((n, from)) = sock.recv_from(&mut chunk) {
                **seen = Some(chunk[..n].to_vec());
                sock.send_to(&ok_for(&chunk[..n]), from).unwrap();
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => return (statuses, true),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return (statuses, true),
        }
        while let Some(frame) = next_frame(&mut buf, &Limits::default()).expect("herald's stream framing") {
            if let Frame::Message(m) = frame {
                let st = status_of(&m).unwrap_or_else(|| panic!("not a response: {}", String::from_utf8_lossy(&m)));
                statuses.push(st);
                if st >= 200 {
                    return (statuses, false);
                }
            }
        }
    }
    (statuses, false)
}

/// The next hop's 200 for a forwarded request: its Vias, From, To (tagged), Call-ID and CSeq.
fn ok_for(req: &[u8]) -> Vec<u8> {
    let head_end = find(req, b"\r\n\r\n").expect("forwarded request has a head");
    let mut out = b"SIP/2.0 200 OK\r\n".to_vec();
    for line in req[..head_end].split(|b| *b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let name = String::from_utf8_lossy(line.split(|b| *b == b':').next().unwrap_or_default()).trim().to_lowercase();
        if ["via", "v", "from", "f", "call-id", "i", "cseq"].contains(&name.as_str()) {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        } else if name == "to" || name == "t" {
            out.extend_from_slice(line);
            out.extend_from_slice(b";tag=next-hop\r\n");
        }
    }
    out.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    out
}

/// Only mpart01 is forwarded to a reachable next hop; its copy must carry the multipart body
/// (NULs, bare LFs) byte for byte.
fn check_hop(name: &str, msg: &[u8], forwarded: Option<&[u8]>) {
    if name != "mpart01" {
        assert!(forwarded.is_none(), "{name}: unexpectedly forwarded to 127.0.0.1:{HOP_PORT}");
        return;
    }
    let fwd = forwarded.unwrap_or_else(|| panic!("{name}: never reached its Route, 127.0.0.1:{HOP_PORT}"));
    let body = |m: &[u8]| m[find(m, b"\r\n\r\n").unwrap() + 4..].to_vec();
    assert_eq!(body(fwd), body(msg), "{name}: the forwarded body differs");
    let text = String::from_utf8_lossy(&fwd[..find(fwd, b"\r\n\r\n").unwrap()]).into_owned();
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert!(lines[1].starts_with("Via: SIP/2.0/UDP 127.0.0.1:16000;branch=z9hG4bK"), "{name}: top Via {}", lines[1]);
    assert!(lines.contains(&"Max-Forwards: 69"), "{name}: {text}");
    // The Route has no `lr`: RFC 3261 §16.6 step 6, the strict router's URI becomes the
    // Request-URI, its Route value goes, and the old Request-URI is appended as the last Route.
    assert_eq!(lines[0], "MESSAGE sip:127.0.0.1:5080 SIP/2.0", "{name}");
    assert!(!lines.contains(&"Route: <sip:127.0.0.1:5080>"), "{name}: {text}");
    assert!(lines.contains(&"Route: <sip:kumiko@example.org>"), "{name}: {text}");
}
