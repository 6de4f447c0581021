//! The TLS transport (RFC 3261 §26.2, RFC 5630, RFC 5922) against real peers on 127.0.0.1:
//! Kamailio 5.6 with its tls module (package kamailio-tls-modules) as next hop and as previous
//! hop, SIPp (UDP: Debian's SIPp is built without TLS) as caller and callee, and the `openssl
//! s_client` command as a bare TLS client. Certificates are made at test time
//! (tests/tls_support).
//!
//! a. caller → herald → (TLS, herald verifies Kamailio's certificate) Kamailio → callee.
//! b. caller → Kamailio → (TLS, Kamailio verifies herald's certificate and shows its own, which
//!    herald requires) herald → callee.
//! c. herald does not trust the next hop's CA: the handshake fails, the caller gets 500.
//! d. herald requires client certificates: a client without one gets no SIP service, a client
//!    with one does.
//! e. `herald bench calls --transport tls` against herald alone: callees register over TLS and
//!    herald reaches them over the connections they registered on (RFC 5626-style reuse).
//! f. The same with digest authentication on: REGISTER and INVITE are challenged and answered
//!    over TLS (the SIPp `-au`/`-ap` test of the issue cannot run over TLS: Debian's SIPp has
//!    no TLS), and a wrong password is refused.
//!
//! Ports: 18200-18299.

mod common;
mod kamailio_support;
mod tls_support;

use common::herald_users_add;
use kamailio_support::*;
use std::io::Write;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tls_support::Pki;

const CALLS: u64 = 20;

struct Ports {
    kamailio: u16,
    kamailio_tls: u16,
    herald: u16,
    herald_tls: u16,
    uas: u16,
    register: u16,
    uac: u16,
}

fn ports(base: u16) -> Ports {
    Ports {
        kamailio: base,
        kamailio_tls: base + 1,
        herald: base + 2,
        herald_tls: base + 3,
        uas: base + 10,
        register: base + 20,
        uac: base + 30,
    }
}

fn require_tls_module() {
    require_tools();
    let so = Path::new(KAMAILIO_MODULES).join("tls.so");
    assert!(so.exists(), "{} missing: install kamailio-tls-modules (scripts/test.sh does)", so.display());
}

/// Kamailio on UDP `p.kamailio` and TLS `p.kamailio_tls` with `pki`'s certificate, trusting
/// `roots`; relays herald.test to `herald_uri`.
fn start_kamailio_tls(s: &Scratch, p: &Ports, pki: &Pki, roots: &Path, herald_uri: &str) -> Proc {
    let cfg = s.path("kamailio-tls.cfg");
    std::fs::write(&cfg, pki.kamailio_tls_cfg(roots)).unwrap();
    let extra = vec![
        "-A".to_string(),
        "WITH_TLS".to_string(),
        "-A".to_string(),
        format!("TLS_CFG=\"{}\"", cfg.display()),
        "-l".to_string(),
        format!("tls:127.0.0.1:{}", p.kamailio_tls),
    ];
    let mut k = start_kamailio_with(s, p.kamailio, herald_uri, &extra);
    wait_tcp_listening(&mut k, s, p.kamailio_tls);
    k
}

/// Waits until something listens on TCP 127.0.0.1:`port` (from /proc/net/tcp, state 0A).
fn wait_tcp_listening(p: &mut Proc, s: &Scratch, port: u16) {
    let needle = format!("0100007F:{port:04X}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let listening = table.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == needle && f[3] == "0A"
        });
        if listening {
            return;
        }
        p.assert_running(&s.0);
        assert!(Instant::now() < deadline, "{} does not listen on TCP 127.0.0.1:{port}", p.name);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// herald's extra config: a TLS listener on `p.herald_tls` and `[tls]` from `pki`.
fn herald_tls_toml(p: &Ports, pki: &Pki, roots: &Path, extra: &str) -> String {
    format!(
        "{}[[listen]]\naddress = \"127.0.0.1:{}\"\ntransports = [\"tls\"]\n",
        pki.herald_toml(roots, extra),
        p.herald_tls
    )
}

/// The INVITEs the callee received.
fn invites_at_callee(s: &Scratch) -> Vec<Logged> {
    read_messages(&s.path("uas.msg")).into_iter().filter(|m| m.received && m.is_request("INVITE")).collect()
}

#[test]
fn herald_relays_to_kamailio_over_verified_tls() {
    require_tls_module();
    let s = Scratch::new("tls-a");
    let p = ports(18200);
    let pki = Pki::generate(&s.0, "a");
    let _kamailio = start_kamailio_tls(&s, &p, &pki, &pki.ca, &format!("sip:127.0.0.1:{}", p.herald));
    let _herald = start_herald_with(&s, p.herald, &herald_tls_toml(&p, &pki, &pki.ca, ""));
    let _uas = start_uas(&s, p.uas);
    register_bob(&s, p.kamailio, p.uas, p.register, None);
    // bob@Kamailio's TLS address: herald connects over TLS and checks Kamailio's certificate
    // against ca.pem and the IP 127.0.0.1.
    call_bob(&s, p.herald, &format!("127.0.0.1:{};transport=tls", p.kamailio_tls), p.uac, CALLS, 20);
    let invites = invites_at_callee(&s);
    assert_eq!(invites.len() as u64, CALLS);
    for m in &invites {
        let vias = m.header("Via");
        // Kamailio's, herald's (sent over TLS, from its TLS listener), the caller's.
        assert_eq!(vias.len(), 3, "{}", m.text);
        let want = format!("SIP/2.0/TLS 127.0.0.1:{};", p.herald_tls);
        assert!(vias[1].starts_with(&want), "herald's Via {:?}, want {want}...\n{}", vias[1], m.text);
        // herald switched transports: it record-routes both sides (RFC 3261 §16.6 step 4,
        // RFC 5658 double Record-Route), the TLS side with transport=tls.
        let rr = m.header("Record-Route");
        let tls_rr = format!("<sip:127.0.0.1:{};transport=tls;lr", p.herald_tls);
        assert!(rr.iter().any(|r| r.starts_with(&tls_rr)), "Record-Route {rr:?} lacks {tls_rr}");
    }
}

#[test]
fn kamailio_connects_to_herald_with_client_certificate() {
    require_tls_module();
    let s = Scratch::new("tls-b");
    let p = ports(18240);
    let pki = Pki::generate(&s.0, "b");
    let herald_uri = format!("sip:127.0.0.1:{};transport=tls", p.herald_tls);
    let _kamailio = start_kamailio_tls(&s, &p, &pki, &pki.ca, &herald_uri);
    let required = format!("verify_client = \"required\"\nclient_ca_file = \"{}\"\n", pki.ca.display());
    let _herald = start_herald_with(&s, p.herald, &herald_tls_toml(&p, &pki, &pki.ca, &required));
    let _uas = start_uas(&s, p.uas);
    register_bob(&s, p.herald, p.uas, p.register, Some("herald.test"));
    call_bob(&s, p.kamailio, "herald.test", p.uac, CALLS, 20);
    for m in invites_at_callee(&s) {
        let vias = m.header("Via");
        assert_eq!(vias.len(), 3, "{}", m.text);
        // Kamailio's Via names its TLS socket: the INVITE reached herald over TLS.
        let want = format!("SIP/2.0/TLS 127.0.0.1:{};", p.kamailio_tls);
        assert!(vias[1].starts_with(&want), "Kamailio's Via {:?}, want {want}...\n{}", vias[1], m.text);
    }
}

#[test]
fn untrusted_next_hop_certificate_fails_the_call() {
    require_tls_module();
    let s = Scratch::new("tls-c");
    let p = ports(18280);
    let kamailio_pki = Pki::generate(&s.0, "kamailio");
    let herald_pki = Pki::generate(&s.0, "herald");
    let _kamailio = start_kamailio_tls(&s, &p, &kamailio_pki, &kamailio_pki.ca, &format!("sip:127.0.0.1:{}", p.herald));
    // herald trusts only its own CA, which did not sign Kamailio's certificate.
    let mut herald = start_herald_with(&s, p.herald, &herald_tls_toml(&p, &herald_pki, &herald_pki.ca, ""));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let local = sock.local_addr().unwrap();
    let target = format!("sip:bob@127.0.0.1:{};transport=tls", p.kamailio_tls);
    let invite = format!(
        "INVITE {target} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-tls-untrusted\r\n\
         Max-Forwards: 70\r\nFrom: <sip:alice@127.0.0.1>;tag=a1\r\nTo: <{target}>\r\n\
         Call-ID: tls-untrusted\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@{local}>\r\nContent-Length: 0\r\n\r\n"
    );
    sock.send_to(invite.as_bytes(), ("127.0.0.1", p.herald)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut buf = [0u8; 4096];
    let final_status = loop {
        herald.assert_running(&s.0);
        assert!(Instant::now() < deadline, "no final response within 15 s");
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let text = String::from_utf8_lossy(&buf[..n]).to_string();
        let status: u16 = text.get(8..11).and_then(|c| c.parse().ok()).unwrap_or(0);
        if status >= 200 {
            break status;
        }
    };
    // A transport error on the only branch counts as a 503 from it (RFC 3261 §8.1.3.1), and a
    // proxy turns a best response 503 into a 500 upstream (§16.7 step 6): the caller must not
    // take herald itself for unavailable.
    assert_eq!(final_status, 500);
    let ack = format!(
        "ACK {target} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-tls-untrusted\r\nMax-Forwards: 70\r\n\
         From: <sip:alice@127.0.0.1>;tag=a1\r\nTo: <{target}>\r\nCall-ID: tls-untrusted\r\nCSeq: 1 ACK\r\n\
         Content-Length: 0\r\n\r\n"
    );
    sock.send_to(ack.as_bytes(), ("127.0.0.1", p.herald)).unwrap();
    let log = std::fs::read_to_string(s.path("herald.log")).unwrap();
    assert!(
        log.contains("TLS connection to next hop failed") && log.contains("UnknownIssuer"),
        "herald's log does not say why:\n{}",
        tail(&log, 20)
    );
}

/// Sends an OPTIONS over `openssl s_client` (with a client certificate when given) and
/// returns what came back.
fn options_over_openssl(port: u16, ca: &Path, client: Option<&Pki>) -> String {
    let mut cmd = Command::new("openssl");
    // -quiet implies -ign_eof: -no_ign_eof makes s_client end when its input does.
    cmd.args([
        "s_client",
        "-quiet",
        "-no_ign_eof",
        "-verify_return_error",
        "-connect",
        &format!("127.0.0.1:{port}"),
        "-CAfile",
    ]);
    cmd.arg(ca);
    if let Some(c) = client {
        cmd.arg("-cert").arg(&c.cert).arg("-key").arg(&c.key);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let options = format!(
        "OPTIONS sip:127.0.0.1:{port} SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.1:9;branch=z9hG4bK-ossl\r\n\
         Max-Forwards: 70\r\nFrom: <sip:probe@127.0.0.1>;tag=p\r\nTo: <sip:127.0.0.1:{port}>\r\n\
         Call-ID: ossl-{}\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n",
        client.is_some()
    );
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(options.as_bytes());
    // Keep stdin open a moment so s_client reads the answer before it sees end of input.
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn client_certificate_required() {
    require_tls_module();
    let s = Scratch::new("tls-d");
    let p = ports(18290);
    let pki = Pki::generate(&s.0, "d");
    let required = format!("verify_client = \"required\"\nclient_ca_file = \"{}\"\n", pki.ca.display());
    let _herald = start_herald_with(&s, p.herald, &herald_tls_toml(&p, &pki, &pki.ca, &required));
    let mut h = _herald;
    wait_tcp_listening(&mut h, &s, p.herald_tls);
    let without = options_over_openssl(p.herald_tls, &pki.ca, None);
    assert!(!without.contains("SIP/2.0 200"), "served a client without certificate:\n{without}");
    let with = options_over_openssl(p.herald_tls, &pki.ca, Some(&pki));
    assert!(with.starts_with("SIP/2.0 200 OK"), "client with certificate not served:\n{with}");
    h.assert_running(&s.0);
}

#[test]
fn bench_calls_over_tls_through_herald() {
    let s = Scratch::new("tls-e");
    let p = ports(18296);
    let pki = Pki::generate(&s.0, "e");
    let mut h = start_herald_with(&s, p.herald, &herald_tls_toml(&p, &pki, &pki.ca, ""));
    wait_tcp_listening(&mut h, &s, p.herald_tls);
    let json = s.path("calls.json");
    let out = bench_calls_tls(p.herald_tls, &pki.ca, &["--rate", "40", "--users", "10"], &json);
    assert!(out.status.success(), "bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let r = read_calls(&json);
    assert_eq!(r.transport, "tls");
    assert!(r.attempted >= 80, "only {} calls", r.attempted);
    assert_eq!((r.succeeded, r.failed), (r.attempted, 0), "failures: {:?}", r.failures);
    assert_eq!(r.retransmissions, 0, "nothing is retransmitted over TLS");
    h.assert_running(&s.0);
}

#[test]
fn bench_calls_over_tls_with_digest_authentication() {
    let s = Scratch::new("tls-f");
    let p = ports(18276);
    let pki = Pki::generate(&s.0, "f");
    let users = s.path("users.txt");
    let cfg = s.path("herald.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nworkers = 2\ndrain_timeout_s = 1\n\
             [[listen]]\naddress = \"127.0.0.1:{}\"\ntransports = [\"udp\", \"tcp\"]\n\
             [[listen]]\naddress = \"127.0.0.1:{}\"\ntransports = [\"tls\"]\n\
             [flood]\ntrusted = [\"127.0.0.0/8\"]\n\
             [auth]\nrealm = \"herald.test\"\nusers_file = \"{}\"\nalgorithms = [\"SHA-256\", \"MD5\"]\n{}",
            p.herald,
            p.herald_tls,
            users.display(),
            pki.herald_toml(&pki.ca, "")
        ),
    )
    .unwrap();
    let mut credentials = String::new();
    for i in 0..4 {
        let (name, password) = (format!("user{i}"), format!("secret-{i}"));
        herald_users_add(&name, &password, &["--config", cfg.to_str().unwrap()]);
        credentials += &format!("{name} {password}\n");
    }
    let good = s.path("credentials.txt");
    std::fs::write(&good, &credentials).unwrap();
    let bad = s.path("wrong.txt");
    std::fs::write(&bad, credentials.replace("secret-0", "not-the-password")).unwrap();
    let mut h =
        Proc::spawn("herald", Command::new(env!("CARGO_BIN_EXE_herald")).arg("serve").arg("--config").arg(&cfg), &s.0);
    wait_tcp_listening(&mut h, &s, p.herald_tls);

    let bench = |credentials: &Path, json: &Path| {
        let args = ["--rate", "20", "--quiet", "--credentials", credentials.to_str().unwrap()];
        bench_calls_tls(p.herald_tls, &pki.ca, &args, json)
    };
    let json = s.path("calls.json");
    let out = bench(&good, &json);
    assert!(out.status.success(), "bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let r = read_calls(&json);
    assert_eq!(r.transport, "tls");
    assert!(r.attempted >= 40, "only {} calls", r.attempted);
    assert_eq!((r.succeeded, r.failed), (r.attempted, 0), "failures: {:?}", r.failures);
    // Every INVITE was challenged (407) and sent again with credentials: two INVITE
    // transactions per call.
    assert!(r.response_time["INVITE"].count >= 2 * r.attempted, "{:?}", r.response_time["INVITE"]);

    let out = bench(&bad, &s.path("wrong.json"));
    assert!(!out.status.success(), "a wrong password was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("user0") && err.contains("401"), "{err}");
    h.assert_running(&s.0);
}

/// `herald bench calls` over TLS to herald's TLS port for 3 s (evenly spaced calls held 50 ms, domain
/// 127.0.0.1), trusting `ca`, with `args` added; the results go to `json`.
fn bench_calls_tls(port: u16, ca: &Path, args: &[&str], json: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "calls", "--proxy", &format!("127.0.0.1:{port}"), "--transport", "tls"])
        .arg("--tls-ca")
        .arg(ca)
        .args(["--duration", "3", "--hold", "50", "--domain", "127.0.0.1", "--arrivals", "uniform"])
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap()
}

/// The results file of a `herald bench calls` run.
fn read_calls(json: &Path) -> herald_bench::results::RunResult {
    match herald_bench::results::ResultsFile::read(json).unwrap() {
        herald_bench::results::ResultsFile::Calls(r) => r,
        _ => panic!("not a calls result"),
    }
}
