//! STUN keep-alives (RFC 5626 §8) with a real STUN client as the peer: coturn's
//! `turnutils_stunclient` (RFC 5389) asks a running `herald serve` for its reflexive address on
//! herald's SIP UDP port, and SIP on that port goes on. crates/server/tests/stun.rs checks the
//! bytes; this checks that another implementation understands them.

mod common;

use common::*;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `turnutils_stunclient` against `herald` and returns its output; panics if it fails or
/// takes more than 10 s (it retransmits for a few seconds when nothing answers).
fn stunclient(herald: SocketAddr) -> String {
    let mut child = Command::new("turnutils_stunclient")
        .args(["-p", &herald.port().to_string(), &herald.ip().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("turnutils_stunclient (Debian package coturn; scripts/test.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            stop_child(&mut child);
            panic!("turnutils_stunclient got no answer within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "turnutils_stunclient failed: {text}");
    text
}

#[test]
fn a_real_stun_client_learns_its_address_from_heralds_sip_port() {
    let dir = test_dir("stun_peer");
    let extras = HeraldExtras { metrics: true, ..Default::default() };
    let mut herald =
        Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let url = herald.metrics_url.clone().unwrap();
    for _ in 0..3 {
        let out = stunclient(herald.addr);
        // "0: : IPv4. UDP reflexive addr: 127.0.0.1:47064": the client's own address, from
        // herald's XOR-MAPPED-ADDRESS.
        let reflexive = out
            .lines()
            .find_map(|l| l.split("UDP reflexive addr: ").nth(1))
            .unwrap_or_else(|| panic!("no reflexive address in {out:?}"));
        let addr: SocketAddr = reflexive.trim().parse().unwrap_or_else(|e| panic!("{reflexive:?}: {e}"));
        assert_eq!(addr.ip().to_string(), "127.0.0.1", "{out}");
        assert_ne!(addr.port(), 0, "{out}");
    }
    let answered = metric(&url, "herald_stun_requests_answered_total");
    assert!(answered >= 3.0, "one answer per run at least (the client retransmits only if none came): {answered}");
    assert_eq!(metric(&url, "herald_stun_dropped_total"), 0.0);
    assert_eq!(metric(&url, "herald_malformed_dropped_total"), 0.0, "STUN was not taken for SIP");
    // SIP on the same port is still served.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp_options_ok(&sock, herald.addr, "after-stunclient", Duration::from_secs(5)).unwrap();
    assert!(herald.exited().is_none());
    herald.stop();
}
