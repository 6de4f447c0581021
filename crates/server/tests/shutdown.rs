//! Graceful shutdown: new requests are dropped, running transactions finish, `run` returns Ok.

mod common;

use common::*;
use herald_server::{Config, Server};
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

/// `herald serve`'s exit status for a config file: 2 when it does not load, 1 when the server
/// fails (a port that cannot be bound), 0 after a clean shutdown.
fn exit_status(
    path: &Path,
    make: impl Fn(usize) -> TestHandler + Send + Sync + 'static,
    shutdown: impl Future<Output = ()>,
) -> u8 {
    let Ok(config) = Config::load_or_default(Some(path)) else { return 2 };
    match Server::bind(config).and_then(|s| s.run(make, shutdown)) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

#[test]
fn run_returns_ok_once_its_shutdown_future_completes() {
    let config = Config::from_toml("[[listen]]\naddress = \"127.0.0.1:0\"\n[server]\nworkers = 2\n", "t.toml").unwrap();
    let (tx, _rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    let r = Server::bind(config).and_then(|s| {
        s.run(move |i| TestHandler::new(i, tx.clone()), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
        })
    });
    assert!(r.is_ok(), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(2), "no transactions: no wait ({:?})", t0.elapsed());
}

#[test]
fn drain_lets_running_transactions_finish() {
    let mut server = start("[server]\nworkers = 2\ndrain_timeout_s = 20\n");
    let c = udp_client(server.udp4);
    c.send(request("BEGIN", "drain-1", 1, "UDP", None, "").as_bytes()).unwrap();
    assert_eq!(server.next_seen().method, "BEGIN");
    server.begin_stop();
    std::thread::sleep(Duration::from_millis(200));
    assert!(!server.is_finished(), "a transaction is running: keep going");
    // A new request is dropped; an in-dialog one still reaches the handler.
    c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    c.send(request("OPTIONS", "drain-new", 1, "UDP", None, "").as_bytes()).unwrap();
    let mut buf = [0u8; 2048];
    assert!(c.recv(&mut buf).is_err(), "new requests are not answered while draining");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send(request("OPTIONS", "drain-dialog", 2, "UDP", Some("x"), "").as_bytes()).unwrap();
    assert_eq!(recv_msg(&c).call_id().unwrap(), "drain-dialog");
    // Listeners are closed: no new TCP connections.
    let refused = std::net::TcpStream::connect_timeout(&server.tcp4, Duration::from_secs(1))
        .map(|mut s| closed_within(&mut s, Duration::from_secs(1)))
        .unwrap_or(true);
    assert!(refused, "new TCP connections are refused while draining");
    assert!(server.stats.snapshot().drain_dropped >= 1);
    // The transaction ends (in-dialog request, same Call-ID): the server stops.
    let t0 = Instant::now();
    c.send(request("END", "drain-1", 3, "UDP", Some("x"), "").as_bytes()).unwrap();
    while !server.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(server.is_finished(), "stopped once no transaction runs");
    server.join().unwrap();
}

#[test]
fn drain_is_bounded_by_the_timeout() {
    let mut server = start("[server]\nworkers = 1\ndrain_timeout_s = 1\n");
    let c = udp_client(server.udp4);
    c.send(request("BEGIN", "stuck", 1, "UDP", None, "").as_bytes()).unwrap();
    server.next_seen();
    let t0 = Instant::now();
    server.begin_stop();
    server.join().unwrap();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn exit_statuses() {
    let dir = std::env::temp_dir().join(format!("herald-serve-main-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[timers]\nt1_ms = 9000\n").unwrap();
    let make = |i| TestHandler::new(i, std::sync::mpsc::channel().0);
    assert_eq!(exit_status(&bad, make, async {}), 2);
    assert_eq!(exit_status(&dir.join("missing.toml"), make, async {}), 2);
    let good = dir.join("good.toml");
    std::fs::write(&good, "[[listen]]\naddress = \"127.0.0.1:0\"\n[server]\nworkers = 1\n").unwrap();
    assert_eq!(exit_status(&good, make, async {}), 0);
    // A port that cannot be bound: the server fails with status 1.
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let clash = dir.join("clash.toml");
    std::fs::write(&clash, format!("[[listen]]\naddress = \"127.0.0.1:{port}\"\ntransports = [\"udp\"]\n")).unwrap();
    assert_eq!(exit_status(&clash, make, async {}), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
