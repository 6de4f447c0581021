//! `herald bench --transport ws|wss` (SIP over WebSocket, RFC 7118) against `herald serve` with
//! WebSocket listeners (`--listen-ws`, `--listen-wss` with a certificate made for the run):
//! every call of the generator's callers and callees, both on WebSocket connections, succeeds,
//! and so does a registration load; a server that refuses the upgrade (a plain TCP SIP port)
//! ends the run with the reason.

mod bench_support;
mod common;
mod tls_support;

use bench_support::{assert_exit, bench, read_run};
use common::{log_excerpt, metric, port_block, sigterm, test_dir, wait_bound};
use herald_bench::results::RunResult;
use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tls_support::Pki;

const LIMIT: Duration = Duration::from_secs(90);

/// `herald serve` listening on UDP/TCP, WS and WSS; SIGTERM on drop.
struct WsHerald {
    child: Child,
    /// UDP and TCP.
    plain: SocketAddr,
    ws: SocketAddr,
    wss: SocketAddr,
    /// The metrics endpoint's URL.
    metrics: String,
    log: std::path::PathBuf,
}

impl WsHerald {
    fn start(dir: &Path, pki: &Pki) -> WsHerald {
        let base = port_block();
        let at = |offset: u16| -> SocketAddr { format!("127.0.0.1:{}", base + offset).parse().unwrap() };
        let (plain, ws, wss, metrics) = (at(0), at(6), at(7), at(8));
        let config = dir.join("herald.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nworkers = 2\ndrain_timeout_s = 1\n\
                 [tls]\ncertificate = \"{}\"\nprivate_key = \"{}\"\n\
                 [flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n\
                 [metrics]\nlisten = \"{metrics}\"\n",
                pki.cert.display(),
                pki.key.display()
            ),
        )
        .unwrap();
        let log = dir.join("herald.log");
        let child = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["serve", "--listen", &plain.to_string(), "--listen-ws", &ws.to_string()])
            .args(["--listen-wss", &wss.to_string(), "--config", config.to_str().unwrap()])
            .env("RUST_LOG", std::env::var("HERALD_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("start herald");
        for port in [ws.port(), wss.port()] {
            wait_bound(port, true);
        }
        wait_bound(metrics.port(), true);
        WsHerald { child, plain, ws, wss, metrics: format!("http://{metrics}/metrics"), log }
    }
}

impl Drop for WsHerald {
    fn drop(&mut self) {
        sigterm(&self.child);
        if self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}

fn calls(h: &WsHerald, transport: &str, target: SocketAddr, extra: &[&str], json: &Path) -> RunResult {
    let out = bench(
        &["calls", "--proxy", &target.to_string(), "--transport", transport, "--rate", "30", "--duration", "3"]
            .into_iter()
            .chain(["--users", "7", "--ring", "20", "--hold", "50", "--seed", "11"])
            .chain(extra.iter().copied())
            .chain(["--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    if !out.status.success() {
        eprintln!("herald log:\n{}", log_excerpt(&h.log));
    }
    assert_exit(&out, 0);
    read_run(json, "calls")
}

/// Every call attempted succeeded, with one SRD and SDD sample each, nothing retransmitted (a
/// WebSocket is a reliable transport: no Timer A or E, RFC 3261 §17.1.1.2).
fn assert_clean(r: &RunResult, transport: &str) {
    assert_eq!(r.transport, transport);
    assert!(r.attempted >= 40, "only {} calls attempted", r.attempted);
    assert_eq!(r.failed, 0, "failures: {:?}", r.failures);
    assert_eq!(r.succeeded, r.attempted);
    assert_eq!(r.srd.count, r.attempted);
    assert_eq!(r.sdd.count, r.attempted);
    assert!(r.response_time["INVITE"].p50_us >= 20_000, "{:?}", r.response_time["INVITE"]);
    assert_eq!(r.retransmissions, 0);
    assert_eq!((r.unregister_failed, r.unregister_error.as_deref()), (0, None));
}

#[test]
fn calls_over_ws_and_wss_through_herald() {
    let dir = test_dir("bench_ws_calls");
    let pki = Pki::generate(&dir, "wss");
    let h = WsHerald::start(&dir, &pki);
    let r = calls(&h, "ws", h.ws, &[], &dir.join("ws.json"));
    assert_clean(&r, "ws");
    // The generator ends its caller and callee connections with a close frame (RFC 6455 §7.1.2),
    // not by dropping them: herald counts both as closed by the peer.
    let closed = || metric(&h.metrics, "herald_ws_closed_by_peer_total");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while closed() < 2.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(closed(), 2.0, "close frames herald saw after one ws run");
    let ca = pki.ca.to_str().unwrap();
    let r = calls(&h, "wss", h.wss, &["--tls-ca", ca], &dir.join("wss.json"));
    assert_clean(&r, "wss");
}

#[test]
fn registrations_over_ws_and_a_refused_upgrade() {
    let dir = test_dir("bench_ws_register");
    let pki = Pki::generate(&dir, "wss");
    let h = WsHerald::start(&dir, &pki);
    let json = dir.join("register.json");
    let out = bench(
        &["register", "--registrar", &h.ws.to_string(), "--transport", "ws", "--users", "20", "--rate", "40"]
            .into_iter()
            .chain(["--duration", "2", "--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0);
    let r = read_run(&json, "register");
    assert_eq!(r.transport, "ws");
    assert!((78..=80).contains(&r.attempted), "{}", r.attempted);
    assert_eq!(r.failed, 0, "failures: {:?}", r.failures);

    // herald's plain TCP port answers the upgrade request as what it is there, not SIP: no 101,
    // so the run ends before it starts, saying why.
    let out = bench(
        &["calls", "--proxy", &h.plain.to_string(), "--transport", "ws", "--rate", "10", "--duration", "1"],
        LIMIT,
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WebSocket"), "{stderr}");
}
