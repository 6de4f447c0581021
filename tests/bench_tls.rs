//! `herald bench --transport tls` against a real TLS peer on loopback: Kamailio 5.6 with its tls
//! module (Debian kamailio-tls-modules, installed with apt-get when missing) as the
//! proxy-registrar, listening on TLS only, with a CA and server certificate made by the openssl
//! command for this run (tests/bench_tls/). Checks that calls and registrations succeed over
//! TLS, and that an untrusted certificate, a wrong server name or a connection lost mid-run end
//! the run with the rustls reason and a non-zero exit status, promptly.
//!
//! herald's own TLS listener is tested with herald's server, not here.

mod bench_support;
mod common;
#[path = "bench_tls/support.rs"]
mod support;
mod tls_support;

use bench_support::{read_run, spawn_bench, wait_output};
use common::test_dir;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{assert_exit, bench, TlsKamailio};
use tls_support::Pki;

const LIMIT: Duration = Duration::from_secs(90);

/// Kamailio serving a certificate from a fresh CA "good"; returns it and the CA file.
fn kamailio(dir: &Path) -> (TlsKamailio, PathBuf) {
    let good = Pki::generate(dir, "good");
    (TlsKamailio::start(dir, &good.cert, &good.key, None), good.ca)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn calls_and_registrations_over_tls_through_kamailio() {
    let dir = test_dir("bench_tls_calls");
    let (k, ca) = kamailio(&dir);
    let (addr, ca) = (k.addr(), ca.to_str().unwrap().to_string());
    let json = dir.join("calls.json");
    let (out, _) = bench(
        &["calls", "--proxy", &addr, "--transport", "tls", "--tls-ca", &ca, "--rate", "20", "--duration", "3"]
            .into_iter()
            .chain(["--users", "10", "--hold", "30", "--arrivals", "uniform", "--seed", "5"])
            .chain(["--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0, &k);
    let r = read_run(&json, "calls");
    assert_eq!(r.transport, "tls");
    assert!(r.attempted >= 55, "only {} calls attempted", r.attempted);
    assert_eq!(r.failed, 0, "failures: {:?}", r.failures);
    assert_eq!(r.succeeded, r.attempted);
    assert_eq!(r.srd.count, r.attempted);
    assert_eq!(r.sdd.count, r.attempted);
    // Over a stream nothing is retransmitted (RFC 3261 §17.1.1.2: Timer A only for UDP).
    assert_eq!(r.retransmissions, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains(" tls over uniform"), "{}", stderr(&out));

    // Registration load over TLS too, with the server name given explicitly.
    let json = dir.join("register.json");
    let (out, _) = bench(
        &["register", "--registrar", &addr, "--transport", "tls", "--tls-ca", &ca, "--tls-server-name", "127.0.0.1"]
            .into_iter()
            .chain(["--rate", "20", "--duration", "2", "--users", "10", "--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0, &k);
    let r = read_run(&json, "register");
    assert_eq!(r.transport, "tls");
    assert!(r.attempted >= 30, "only {} registrations attempted", r.attempted);
    assert_eq!(r.failed, 0, "failures: {:?}", r.failures);
}

#[test]
fn untrusted_certificate_or_wrong_name_fails_with_the_rustls_reason() {
    let dir = test_dir("bench_tls_untrusted");
    let (k, good_ca) = kamailio(&dir);
    let other_ca = Pki::generate(&dir, "other").ca;
    let addr = k.addr();
    // A CA that did not sign the server's certificate.
    let (out, took) = bench(
        &["calls", "--proxy", &addr, "--transport", "tls", "--tls-ca", other_ca.to_str().unwrap()]
            .into_iter()
            .chain(["--rate", "20", "--duration", "3", "--users", "10"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 2, &k);
    let err = stderr(&out);
    assert!(err.contains("invalid peer certificate") && err.contains("UnknownIssuer"), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}: a failed handshake must end the run at once");
    // The right CA but a name the certificate does not carry.
    let (out, took) = bench(
        &["register", "--registrar", &addr, "--transport", "tls", "--tls-ca", good_ca.to_str().unwrap()]
            .into_iter()
            .chain(["--tls-server-name", "sip.example.com", "--rate", "20", "--duration", "2", "--users", "5"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 2, &k);
    let err = stderr(&out);
    assert!(err.contains("certificate not valid for name \"sip.example.com\""), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // The same server with the right CA works: the failures above were the certificate's.
    let (out, _) = bench(
        &["register", "--registrar", &addr, "--transport", "tls", "--tls-ca", good_ca.to_str().unwrap()]
            .into_iter()
            .chain(["--rate", "20", "--duration", "1", "--users", "5"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0, &k);
    // Skipping verification accepts even the wrong name, and says so.
    let (out, _) = bench(
        &["register", "--registrar", &addr, "--transport", "tls", "--tls-insecure-skip-verify"]
            .into_iter()
            .chain(["--tls-server-name", "sip.example.com", "--rate", "20", "--duration", "1", "--users", "5"])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_exit(&out, 0, &k);
    assert!(stderr(&out).contains("warning: --tls-insecure-skip-verify"), "{}", stderr(&out));
}

#[test]
fn client_certificate_when_the_server_demands_one() {
    let dir = test_dir("bench_tls_client_cert");
    // The generator's certificate comes from its own CA, which Kamailio requires of clients.
    let server = Pki::generate(&dir, "good");
    let client = Pki::generate(&dir, "client");
    let (client_cert, client_key) = (client.cert, client.key);
    let ca = server.ca;
    let k = TlsKamailio::start(&dir, &server.cert, &server.key, Some(&client.ca));
    let (addr, ca) = (k.addr(), ca.to_str().unwrap().to_string());
    let register = |extra: &[&str]| {
        let mut args = vec!["register", "--registrar", &addr, "--transport", "tls", "--tls-ca", &ca];
        args.extend(["--rate", "20", "--duration", "1", "--users", "5"]);
        args.extend(extra);
        bench(&args, LIMIT)
    };
    // Without one, Kamailio refuses with an alert, which is the reason given. Over TLS 1.3 the
    // client's handshake is complete before the server has seen the (missing) certificate, so
    // the alert comes once the run is under way: every registration fails with it (exit 1).
    // Over TLS 1.2 it would end the handshake itself (a set-up error, exit 2).
    let json = dir.join("register.json");
    let (out, took) = register(&["--json", json.to_str().unwrap()]);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    if out.status.code() == Some(2) {
        assert!(stderr(&out).contains("TLS: received fatal alert"), "{}", stderr(&out));
    } else {
        assert_exit(&out, 1, &k);
        let r = read_run(&json, "register");
        assert!(r.attempted > 0 && r.failed == r.attempted, "{r:?}");
        assert!(
            r.failures.keys().all(|why| why.starts_with("transport: TLS: received fatal alert")),
            "{:?}",
            r.failures
        );
    }
    let (out, _) = register(&["--tls-cert", client_cert.to_str().unwrap(), "--tls-key", client_key.to_str().unwrap()]);
    assert_exit(&out, 0, &k);
}

#[test]
fn a_tls_connection_lost_mid_run_fails_the_rest_of_the_window() {
    let dir = test_dir("bench_tls_lost");
    let (k, ca) = kamailio(&dir);
    let json = dir.join("calls.json");
    // Calls held 500 ms at 20/s: about ten are up when Kamailio dies 3 s into a 6 s window.
    let child = spawn_bench(
        &["calls", "--proxy", &k.addr(), "--transport", "tls", "--tls-ca", ca.to_str().unwrap()]
            .into_iter()
            .chain(["--rate", "20", "--duration", "6", "--users", "10", "--hold", "500", "--arrivals", "uniform"])
            .chain(["--json", json.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    std::thread::sleep(Duration::from_secs(3));
    k.signal("-KILL");
    let started = std::time::Instant::now();
    let out = wait_output(child, LIMIT);
    // The rest of the window (3 s) and no drain: nothing waits for a dead connection's timers.
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?} after the loss", started.elapsed());
    assert_exit(&out, 1, &k);
    let r = read_run(&json, "calls");
    assert_eq!(r.transport, "tls");
    assert!(!r.interrupted, "open loop: the window runs to its end");
    assert!(r.attempted >= 110, "arrivals go on after the loss: {}", r.attempted);
    assert!(r.succeeded >= 40, "calls before the loss succeeded: {r:?}");
    // The calls in flight and every arrival after the loss, all with the TLS reason.
    let lost: u64 = r
        .failures
        .iter()
        .filter(|(why, _)| why.trim_start_matches("after answer: ").starts_with("transport: TLS: "))
        .map(|(_, n)| n)
        .sum();
    assert!(lost >= 50 && lost == r.failed, "failures: {:?}", r.failures);
}
