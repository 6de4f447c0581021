//! Digest authentication end to end (RFC 3261 §22, RFC 7616): a real `herald serve` with a
//! users file made by `herald users add`, and SIPp answering its challenges (`-au`/`-ap`).
//!
//! * REGISTER: 401, answer, 200; a wrong password gets 401 again.
//! * INVITE from a local user: 407, ACK, answer, forwarded to the registered callee, call
//!   completes (ACK and BYE in dialog, not challenged).
//! * Over UDP and TCP. TLS is not built yet, so it is not tested.
//! * The users file is reloaded while herald runs (bob is added after the start).
//!
//! SIPp 3.6 computes only MD5 and reads only the first challenge, so these tests configure
//! `algorithms = ["MD5"]`; the SHA-256 and SHA-512-256 paths are covered by the unit tests in
//! crates/core/src/auth. Files: `target/tmp/<test>/`.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

/// `herald serve` with `[auth]` on, killed (SIGTERM) on drop.
struct AuthHerald {
    child: Child,
    addr: String,
    config: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Drop for AuthHerald {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

fn herald_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_herald"))
}

/// `herald users add NAME --password-stdin --config CONFIG`.
fn add_user(config: &Path, name: &str, password: &str) {
    herald_users_add(name, password, &["--config", config.to_str().unwrap()]);
}

fn start(dir: &Path) -> AuthHerald {
    let base = port_block();
    let addr = format!("127.0.0.1:{base}");
    let users = dir.join("users.txt");
    let config = dir.join("herald.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nworkers = 2\ndrain_timeout_s = 1\n[[listen]]\naddress = \"{addr}\"\n\
             [auth]\nrealm = \"herald.test\"\nusers_file = \"{}\"\nalgorithms = [\"MD5\"]\n",
            users.display()
        ),
    )
    .unwrap();
    add_user(&config, "alice", "alice-secret");
    let log = dir.join("herald.log");
    let child = herald_bin()
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", std::env::var("HERALD_TEST_LOG").unwrap_or_else(|_| "info".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let h = AuthHerald { child, addr: addr.clone(), config, log };
    // OPTIONS is not challenged: it tells when herald is up.
    let probe = std::net::UdpSocket::bind(("127.0.0.1", base + 1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = udp_options_ok(&probe, addr.parse().unwrap(), "auth-probe", Duration::from_millis(500)) {
        assert!(Instant::now() < deadline, "herald did not start ({e}):\n{}", tail(&h.log, 30));
    }
    h
}

fn transport(tcp: bool) -> &'static [&'static str] {
    if tcp {
        &["-t", "t1"]
    } else {
        &[]
    }
}

/// A REGISTER run of `scenario` as `(user, password)`, contact port `port`.
fn register(dir: &Path, h: &AuthHerald, name: &str, scenario: &str, (user, pw): (&str, &str), port: u16, tcp: bool) {
    let port = port.to_string();
    let a = [
        &[h.addr.as_str(), "-s", user, "-au", user, "-ap", pw, "-key", "contact_host", "127.0.0.1"][..],
        &["-key", "contact_port", &port, "-m", "1", "-timeout", "30"],
        transport(tcp),
    ]
    .concat();
    Sipp::start(dir, name, scenario, &a).wait(TIMEOUT).assert_all_successful(1);
}

fn register_and_call(test: &str, tcp: bool) {
    let dir = test_dir(test);
    let h = start(&dir);
    // A wrong password: a fresh 401, not a 200.
    register(&dir, &h, "wrong", "register_auth_rejected.xml", ("alice", "guess"), 1, tcp);
    // bob is added while herald runs: the users file is reloaded (the watcher sees the change through inotify).
    add_user(&h.config, "bob", "bob-secret");
    std::thread::sleep(Duration::from_millis(1500));
    let uas = Sipp::start(&dir, "uas", "uas.xml", &[&["-m", "3", "-timeout", "60"][..], transport(tcp)].concat());
    wait_bound(uas.port, tcp);
    register(&dir, &h, "register", "register_auth.xml", ("bob", "bob-secret"), uas.port, tcp);
    let uac_args = [
        &[h.addr.as_str(), "-s", "bob", "-key", "caller", "alice", "-au", "alice", "-ap", "alice-secret"][..],
        &["-m", "3", "-r", "3", "-timeout", "60"],
        transport(tcp),
    ]
    .concat();
    Sipp::start(&dir, "uac", "uac_auth.xml", &uac_args).wait(TIMEOUT).assert_all_successful(3);
    uas.wait(TIMEOUT).assert_all_successful(3);
    let log = std::fs::read_to_string(&h.log).unwrap();
    assert!(log.contains("users file reloaded"), "no reload logged:\n{log}");
}

#[test]
fn udp_register_and_call_with_digest() {
    register_and_call("sipp_auth_udp", false);
}

#[test]
fn tcp_register_and_call_with_digest() {
    register_and_call("sipp_auth_tcp", true);
}

#[test]
fn calling_as_another_user_is_refused() {
    let dir = test_dir("sipp_auth_identity");
    let h = start(&dir);
    // alice's credentials for a REGISTER of bob's AoR: the answer is 403, so the scenario
    // (which expects 200) fails and SIPp counts one failed call.
    let a = [h.addr.as_str(), "-s", "bob", "-au", "alice", "-ap", "alice-secret", "-key", "contact_host", "127.0.0.1"];
    let a = [&a[..], &["-key", "contact_port", "9", "-m", "1", "-timeout", "20"]].concat();
    let run = Sipp::start(&dir, "identity", "register_auth.xml", &a).wait(TIMEOUT);
    assert_eq!(run.count("FailedCall"), 1, "REGISTER of bob with alice's credentials must fail");
    assert_eq!(run.count("SuccessfulCall"), 0);
}
