//! Tests of [`super::tls`] through the endpoint the event loop uses ([`super::net::Endpoint`]):
//! handshakes against a rustls server made here, certificate failures, close and limits.

use super::framing::Incoming;
use super::net::{wait, Endpoint};
use super::tls_config::TlsOptions;
use bytes::Bytes;
use herald_sip::Limits;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A CA (`NAME-ca.pem`) and a server certificate for IP 127.0.0.1 signed by it
/// (`NAME-server.pem`, `NAME-server.key`), made with the openssl command.
fn make_pki(dir: &Path, name: &str) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (ca, ca_key) = (format!("{name}-ca.pem"), format!("{name}-ca.key"));
    let (crt, key, csr) = (format!("{name}-server.pem"), format!("{name}-server.key"), format!("{name}.csr"));
    let ext = format!("{name}.ext");
    std::fs::write(dir.join(&ext), "subjectAltName=IP:127.0.0.1\n").unwrap();
    let subject = format!("/CN=herald bench {name} test CA");
    run(&[
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj",
        &subject,
    ]);
    run(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
    let sign = ["x509", "-req", "-in", &csr, "-CA", &ca, "-CAkey", &ca_key, "-CAcreateserial"];
    run(&[&sign[..], &["-out", &crt, "-extfile", &ext]].concat());
}

fn pki_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herald-bench-tls-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A blocking rustls server on a free loopback port; `serve` runs on the accepted stream.
fn server(dir: &Path, serve: fn(&mut StreamOwned<ServerConnection, std::net::TcpStream>)) -> SocketAddr {
    let chain: Vec<_> =
        CertificateDer::pem_file_iter(dir.join("good-server.pem")).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("good-server.key")).unwrap();
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let listener = TcpListener::bind((LO, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Arc::new(config);
    std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut stream = StreamOwned::new(ServerConnection::new(config).unwrap(), tcp);
        serve(&mut stream);
    });
    addr
}

fn client(dir: &Path, ca: &str, peer: SocketAddr) -> Endpoint {
    let options = TlsOptions { ca: Some(dir.join(ca)), ..Default::default() };
    Endpoint::tls(LO, peer, &options.client(LO).unwrap()).unwrap()
}

/// Runs the client's side of the loop until `done` or 5 s.
fn pump(ep: &mut Endpoint, got: &mut Vec<Incoming>, done: impl Fn(&Endpoint, &[Incoming]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(ep, got) && Instant::now() < deadline {
        ep.flush();
        if wait([&*ep], 10_000)[0] {
            ep.receive(got, &Limits::default());
        }
    }
}

const MSG: &[u8] = b"OPTIONS sip:x SIP/2.0\r\nContent-Length: 2\r\n\r\nhi";

#[test]
fn handshake_frames_messages_both_ways_and_answers_pings() {
    let dir = pki_dir("ok");
    make_pki(&dir, "good");
    let peer = server(&dir, |s| {
        // Read one message from the client, then send one back split across records, with
        // an RFC 5626 ping between its halves, and expect the pong.
        let mut buf = vec![0u8; MSG.len()];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(buf, MSG);
        s.write_all(&MSG[..10]).unwrap();
        s.flush().unwrap();
        s.write_all(&MSG[10..]).unwrap();
        s.write_all(b"\r\n\r\n").unwrap();
        s.flush().unwrap();
        let mut pong = [0u8; 2];
        s.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"\r\n");
        s.write_all(MSG).unwrap();
        s.conn.send_close_notify();
        s.flush().unwrap();
    });
    let mut ep = client(&dir, "good-ca.pem", peer);
    assert_eq!(ep.via_transport(), "TLS");
    assert_eq!(ep.uri_param(), ";transport=tls");
    assert!(ep.is_stream());
    assert!(ep.send(Bytes::from_static(MSG), peer));
    let mut got = Vec::new();
    pump(&mut ep, &mut got, |ep, got| got.len() == 2 && ep.is_closed());
    assert_eq!(got.len(), 2, "{:?}", ep.error());
    assert!(got.iter().all(|m| &m.bytes[..] == MSG && m.from == peer));
    // The server's close_notify closed us, with a reason; sends now fail.
    assert!(ep.is_closed());
    assert!(ep.error().unwrap().contains("close_notify"), "{:?}", ep.error());
    assert!(!ep.send(Bytes::from_static(MSG), peer));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_untrusted_certificate_closes_with_the_rustls_reason() {
    let dir = pki_dir("wrong-ca");
    make_pki(&dir, "good");
    make_pki(&dir, "other");
    let peer = server(&dir, |s| {
        let mut buf = [0u8; 1];
        let _ = s.read(&mut buf); // the handshake fails in here
    });
    let mut ep = client(&dir, "other-ca.pem", peer);
    assert!(ep.send(Bytes::from_static(MSG), peer));
    let mut got = Vec::new();
    pump(&mut ep, &mut got, |ep, _| ep.is_closed());
    assert!(ep.is_closed());
    assert!(got.is_empty());
    let error = ep.error().unwrap();
    assert!(error.contains("invalid peer certificate") && error.contains("UnknownIssuer"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_peer_that_never_speaks_tls_times_out() {
    let dir = pki_dir("silent");
    make_pki(&dir, "good");
    let listener = TcpListener::bind((LO, 0)).unwrap();
    let mut ep = client(&dir, "good-ca.pem", listener.local_addr().unwrap());
    let (_silent, _) = listener.accept().unwrap();
    ep.flush();
    assert!(!ep.is_closed());
    let Endpoint::Tls(t) = &mut ep else { unreachable!() };
    t.expire_handshake();
    ep.flush();
    assert!(ep.is_closed());
    assert!(ep.error().unwrap().contains("handshake not finished"), "{:?}", ep.error());
    let _ = std::fs::remove_dir_all(&dir);
}
