//! The `[flood]` policy of issues 15 and 16 against a real `herald serve` on loopback (the
//! decisions themselves are unit-tested in crates/server/src/protect/flood/tests.rs). Clients
//! bind distinct loopback addresses (all of 127.0.0.0/8 reaches `lo`) to be distinct sources.
//!
//! * UDP evidence never locks out a peer that proves its address: a UDP flood from 127.0.0.1
//!   loses only its excess (no ban), a UDP failure ban leaves its TCP requests answered.
//! * One phone retrying a wrong password behind a NAT locks only its own user there: another
//!   user behind the same address registers.
//! * A guesser spread over many addresses meets the account's back-off.

mod common;

use common::sip_client::{register, tcp_options, transaction, udp_from};
use common::*;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REALM: &str = "herald.test";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Herald with the users alice and bob, MD5 challenges, metrics, and `flood` as its `[flood]`.
fn start(name: &str, flood: &str) -> (Herald, String) {
    let dir = test_dir(name);
    let users = dir.join("users.txt");
    for (user, password) in [("alice", "alice-password"), ("bob", "bob-password")] {
        herald_users_add(user, password, &["--realm", REALM, "--file", users.to_str().unwrap()]);
    }
    let toml = format!(
        "[flood]\n{flood}\n[auth]\nrealm = \"{REALM}\"\nusers_file = \"{}\"\nalgorithms = [\"MD5\"]\n",
        users.display()
    );
    let extras = HeraldExtras { metrics: true, toml: Some(toml), ..Default::default() };
    let h = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let url = h.metrics_url.clone().unwrap();
    (h, url)
}

fn md5_hex(text: &str) -> String {
    let mut child =
        Command::new("md5sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("md5sum (coreutils)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

fn nonce_of(challenge: &[u8]) -> String {
    let v = header_of(challenge, "WWW-Authenticate", "WWW-Authenticate").expect("a challenge");
    let at = v.find("nonce=\"").unwrap() + 7;
    v[at..at + v[at..].find('"').unwrap()].to_string()
}

/// Authorization for `nonce` (RFC 7616 §3.4.1, qop=auth, MD5).
fn authorization(user: &str, password: &str, uri: &str, nonce: &str, nc: u32) -> String {
    let ha1 = md5_hex(&format!("{user}:{REALM}:{password}"));
    let ha2 = md5_hex(&format!("REGISTER:{uri}"));
    let nc = format!("{nc:08x}");
    let response = md5_hex(&format!("{ha1}:{nonce}:{nc}:c0ffee:auth:{ha2}"));
    format!(
        "Digest username=\"{user}\", realm=\"{REALM}\", nonce=\"{nonce}\", uri=\"{uri}\", \
         response=\"{response}\", algorithm=MD5, qop=auth, nc={nc}, cnonce=\"c0ffee\""
    )
}

/// A phone: one UDP socket, its own CSeq.
struct Phone {
    sock: UdpSocket,
    local: SocketAddr,
    herald: SocketAddr,
    cseq: u32,
}

impl Phone {
    fn new(ip: &str, herald: SocketAddr) -> Phone {
        let sock = udp_from(ip);
        let local = sock.local_addr().unwrap();
        Phone { sock, local, herald, cseq: 0 }
    }

    /// Challenged REGISTER, then the answer with `password`: the final status.
    fn register(&mut self, user: &str, password: &str) -> u16 {
        self.cseq += 1;
        let req = register(self.herald, self.local, user, self.cseq, None);
        let c = transaction(&self.sock, self.herald, &req, secs(5)).expect("a challenge");
        assert_eq!(status_of(&c), Some(401));
        let answer = authorization(user, password, &format!("sip:{}", self.herald), &nonce_of(&c), 1);
        self.cseq += 1;
        let req = register(self.herald, self.local, user, self.cseq, Some(&answer));
        let r = transaction(&self.sock, self.herald, &req, secs(5)).expect("an answer");
        status_of(&r).unwrap()
    }
}

fn log_has(herald: &Herald, parts: &[&str]) -> bool {
    let text = std::fs::read_to_string(&herald.log).unwrap_or_default();
    text.lines().any(|l| l.contains("WARN") && parts.iter().all(|p| l.contains(p)))
}

/// Issue 15: 99 spoofed OPTIONS "from" 127.0.0.2 locked it out for 300 s, over UDP and TCP.
#[test]
fn udp_evidence_never_locks_out_tcp_and_a_udp_flood_loses_only_its_excess() {
    let (herald, url) =
        start("flood_policy_udp", "max_requests = 40\nmax_auth_failures = 5\nmax_auth_failures_per_source = 10");
    // The TCP client connects from 127.0.0.1: the UDP evidence below is all "from" it too.
    let flood = udp_from("127.0.0.1");
    let local = flood.local_addr().unwrap();
    for i in 0..200 {
        flood.send_to(options_request(herald.addr, local, &format!("fl-{i}"), "UDP").as_bytes(), herald.addr).unwrap();
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(
        tcp_options(&mut TcpStream::connect(herald.addr).unwrap(), herald.addr, "tcp-during-udp-flood"),
        Some(200)
    );
    // The receivers may still be reading the flood: wait for the count.
    let deadline = Instant::now() + secs(5);
    while metric(&url, "herald_flood_rate_limited_total") < 100.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&url, "herald_flood_rate_limited_total") >= 100.0);
    assert_eq!(metric(&url, "herald_flood_request_bans_total"), 0.0);
    assert!(log_has(&herald, &["rate limit", "source=127.0.0.1", "evidence=\"udp\""]), "{}", log_excerpt(&herald.log));
    // No ban: once the window has slid past the flood, UDP is answered again.
    std::thread::sleep(secs(4));
    udp_options_ok(&flood, herald.addr, "udp-after-flood", secs(5)).expect("UDP answered again");

    // Failures over UDP under 11 names: the source total (10) bans its UDP.
    let mut guesser = Phone::new("127.0.0.1", herald.addr);
    for i in 0..11 {
        assert_eq!(guesser.register(&format!("nobody{i}"), "guess"), 401);
    }
    assert!(udp_options_ok(&flood, herald.addr, "udp-banned", secs(2)).is_err(), "UDP is banned");
    assert_eq!(metric(&url, "herald_flood_auth_bans_total"), 1.0);
    assert_eq!(metric(&url, "herald_flood_banned_sources"), 1.0);
    assert!(log_has(&herald, &["source banned", "source=127.0.0.1", "reason=\"auth-failures\"", "count=11"]));
    // The peer that proves its address is still served.
    assert_eq!(tcp_options(&mut TcpStream::connect(herald.addr).unwrap(), herald.addr, "tcp-after-udp-ban"), Some(200));
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// Issue 15: one phone retrying a wrong password banned its NAT address; a second phone with
/// the right password behind it was dropped without a trace.
#[test]
fn a_wrong_password_behind_a_nat_locks_only_its_own_user() {
    let (herald, url) = start("flood_policy_nat", "max_auth_failures = 5");
    let mut misconfigured = Phone::new("127.0.0.6", herald.addr);
    for _ in 0..8 {
        assert_eq!(misconfigured.register("alice", "old-password"), 401);
    }
    assert_eq!(metric(&url, "herald_flood_user_locks_total"), 1.0);
    assert!(
        log_has(&herald, &["user locked", "source=127.0.0.6", "user=alice", "count=6"]),
        "{}",
        log_excerpt(&herald.log)
    );
    // Locked at this address: even the right password is challenged again, unchecked.
    assert_eq!(misconfigured.register("alice", "alice-password"), 401);
    assert!(metric(&url, "herald_flood_auth_refused_total") >= 3.0);
    // Bob behind the same address registers; alice from elsewhere too; nothing is banned.
    let mut colleague = Phone::new("127.0.0.6", herald.addr);
    assert_eq!(colleague.register("bob", "bob-password"), 200);
    let mut home = Phone::new("127.0.0.7", herald.addr);
    assert_eq!(home.register("alice", "alice-password"), 200);
    assert_eq!(metric(&url, "herald_flood_auth_bans_total"), 0.0);
    assert_eq!(metric(&url, "herald_flood_banned_sources"), 0.0);
    assert_eq!(metric(&url, "herald_flood_locked_users"), 1.0);
    assert!(herald.stop().is_some_and(|s| s.success()));
}

/// Issue 16: 11 addresses found a password with no ban. One wrong guess from each of 10
/// addresses locks the account: the right password from an 11th is refused until the lock ends.
#[test]
fn guesses_from_many_addresses_meet_the_account_back_off() {
    let (herald, url) = start("flood_policy_account", "");
    for i in 1..=10 {
        let mut guesser = Phone::new(&format!("127.0.1.{i}"), herald.addr);
        assert_eq!(guesser.register("alice", &format!("guess-{i}")), 401);
    }
    // Locked for 1 s from the 10th guess: the owner, right away, is challenged again unchecked.
    let mut owner = Phone::new("127.0.1.50", herald.addr);
    assert_eq!(owner.register("alice", "alice-password"), 401);
    assert_eq!(metric(&url, "herald_flood_account_locks_total"), 1.0);
    assert_eq!(metric(&url, "herald_flood_auth_refused_total"), 1.0);
    assert!(
        log_has(&herald, &["account back-off", "user=alice", "failures=10", "lock_ms=1000"]),
        "{}",
        log_excerpt(&herald.log)
    );
    assert_eq!(metric(&url, "herald_flood_banned_sources"), 0.0);
    // Once it ends, the owner gets in.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(owner.register("alice", "alice-password"), 200);
    // Other accounts were never locked.
    assert_eq!(Phone::new("127.0.1.51", herald.addr).register("bob", "bob-password"), 200);
    assert!(herald.stop().is_some_and(|s| s.success()));
}
