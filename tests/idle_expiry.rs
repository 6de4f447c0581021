//! Idle is idle (issue 21): no worker wakes on a period, yet a registration still expires at
//! its time with no traffic at all. The REGISTERs land on many engine shards; only shard 0's
//! engine removes expired bindings, and it sleeps until the store's next expiry - which the
//! other shards' REGISTERs brought earlier through the store's alarm. `herald ctl stats` counts
//! the bindings held, expired ones included until they are removed.

mod common;

use common::*;
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Registrations that expire in 3 s, then in 1 s.
const LATER: usize = 8;
const SOONER: usize = 3;

fn register(socket: &UdpSocket, herald: SocketAddr, user: usize, expires: u32) -> u16 {
    let local = socket.local_addr().unwrap();
    let call_id = format!("idle-exp-{user}-{}", local.port());
    let req = format!(
        "REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:u{user}@example.com>;tag=x\r\nTo: <sip:u{user}@example.com>\r\n\
         Call-ID: {call_id}\r\nCSeq: 1 REGISTER\r\nContact: <sip:u{user}@{local}>\r\nExpires: {expires}\r\n\
         Content-Length: 0\r\n\r\n"
    );
    udp_final_status(socket, herald, &req, &call_id, &format!("REGISTER of u{user}"))
}

/// The bindings the store holds (`herald ctl --json stats`: location.bindings).
fn bindings(admin: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["ctl", "--url", admin, "--json", "stats"])
        .env_remove("HERALD_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("herald ctl");
    assert!(out.status.success(), "herald ctl stats: {}", String::from_utf8_lossy(&out.stderr));
    let stats: Value = serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    stats["location"]["bindings"].as_u64().unwrap_or_else(|| panic!("no location.bindings in {stats}"))
}

#[test]
fn registrations_expire_on_time_with_no_traffic() {
    let dir = test_dir("idle_expiry");
    let admin_port = port_block();
    let toml = format!(
        "[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n[registrar]\nmin_expires = 1\n\
         [location]\nmode = \"memory\"\n[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n"
    );
    let extras = HeraldExtras {
        workers: Some(2),
        toml: Some(toml),
        domains: vec!["example.com".into()],
        ..HeraldExtras::default()
    };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    wait_bound(admin_port, true);
    let admin = format!("http://127.0.0.1:{admin_port}/");
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    // One long registration, so that the store is never empty; then LATER ones (3 s), which
    // give shard 0, should one of them land there, a deadline; then SOONER ones (1 s) on other
    // shards: only the store's alarm tells shard 0's owner of those.
    assert_eq!(register(&phone, herald.addr, 0, 3600), 200);
    for user in 1..=LATER {
        assert_eq!(register(&phone, herald.addr, user, 3), 200, "u{user}");
    }
    let registered = Instant::now();
    for user in LATER + 1..=LATER + SOONER {
        assert_eq!(register(&phone, herald.addr, user, 1), 200, "u{user}");
    }
    assert_eq!(bindings(&admin), (1 + LATER + SOONER) as u64, "all held right after registering");
    // Nothing is sent to herald from here on (the admin listener handles no SIP and sets no
    // engine timer). Store time has whole seconds: a 1 s binding goes within 1 s of its
    // REGISTER, a 3 s one between 2 and 3 s after it.
    let gone_by = |want: usize, limit: Duration| {
        let mut held = bindings(&admin);
        while held > want as u64 && registered.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(100));
            held = bindings(&admin);
        }
        (held, registered.elapsed())
    };
    let (held, took) = gone_by(1 + LATER, Duration::from_millis(1900));
    assert_eq!(
        held,
        (1 + LATER) as u64,
        "the 1 s registrations were still held {took:?} later:\n{}",
        herald.log_text()
    );
    let (held, took) = gone_by(1, Duration::from_secs(6));
    assert_eq!(held, 1, "the 3 s registrations were still held {took:?} later:\n{}", herald.log_text());
    assert!(took >= Duration::from_millis(1900), "the 3 s registrations went too early: {took:?}");
    herald.stop();
}
