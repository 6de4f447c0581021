//! Realms and domains (issue 15): a users file made before `domains` was set does not stop
//! `herald serve`; each configured domain is its own realm with its own users; `herald users`
//! adds, lists and removes per realm, and says when a realm is not one herald challenges in.

mod common;

use common::{herald_users_add, test_dir, Herald, HeraldConfig, HeraldExtras};
use herald_core::auth::Algorithm;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::Duration;

fn herald_users(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_herald")).arg("users").args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A REGISTER for `user@domain` from `sock`, with `auth` (an Authorization value) or none.
fn register(sock: &UdpSocket, herald: std::net::SocketAddr, user: &str, domain: &str, cseq: u32, auth: &str) -> String {
    static SENT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let local = sock.local_addr().unwrap();
    let auth = if auth.is_empty() { String::new() } else { format!("Authorization: {auth}\r\n") };
    let req = format!(
        "REGISTER sip:{domain} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK{user}{domain}{n};rport\r\nMax-Forwards: 70\r\nFrom: <sip:{user}@{domain}>;tag=t{cseq}\r\nTo: <sip:{user}@{domain}>\r\nCall-ID: realms-{user}-{domain}\r\nCSeq: {} REGISTER\r\nContact: <sip:{user}@{local}>\r\n{auth}Expires: 60\r\nContent-Length: 0\r\n\r\n",
        n * 10 + cseq
    );
    sock.send_to(req.as_bytes(), herald).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).expect("an answer to the REGISTER");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn param<'a>(resp: &'a str, name: &str) -> &'a str {
    let at = resp.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("no {name} in {resp}")) + name.len() + 2;
    &resp[at..at + resp[at..].find('"').unwrap()]
}

/// Registers with digest MD5: the challenge's realm, and the final status.
fn register_with(
    sock: &UdpSocket,
    herald: std::net::SocketAddr,
    user: &str,
    domain: &str,
    password: &str,
) -> (String, String) {
    let challenge = register(sock, herald, user, domain, 1, "");
    assert!(challenge.starts_with("SIP/2.0 401"), "{challenge}");
    let realm = param(&challenge, "realm").to_owned();
    let nonce = param(&challenge, "nonce").to_owned();
    let md5 = |parts: &[&str]| Algorithm::Md5.hex_hash(&parts.iter().map(|p| p.as_bytes()).collect::<Vec<_>>());
    let ha1 = md5(&[user, ":", &realm, ":", password]);
    let uri = format!("sip:{domain}");
    let ha2 = md5(&["REGISTER:", &uri]);
    let response = md5(&[&ha1, ":", &nonce, ":00000001:c0ffee:auth:", &ha2]);
    let auth = format!("Digest username=\"{user}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\", algorithm=MD5, qop=auth, nc=00000001, cnonce=\"c0ffee\"");
    let answer = register(sock, herald, user, domain, 2, &auth);
    (realm, answer.lines().next().unwrap_or("").to_owned())
}

#[test]
fn each_domain_is_a_realm_and_an_old_users_file_does_not_stop_herald() {
    let dir = test_dir("users_realms");
    let users = dir.join("users.txt");
    let users_s = users.to_str().unwrap();
    // Made for the host name, before any domain was configured (what a new user does first).
    herald_users_add("carol", "host-pw", &["--file", users_s]);
    let conf = dir.join("domains.toml");
    std::fs::write(
        &conf,
        format!("domains = [\"example.test\", \"example.org\"]\n[auth]\nusers_file = \"{users_s}\"\n"),
    )
    .unwrap();
    let conf_s = conf.to_str().unwrap();
    // NAME@DOMAIN goes to that domain's realm; the same name in two domains is two accounts.
    herald_users_add("alice@example.test", "test-pw", &["--config", conf_s]);
    herald_users_add("alice@example.org", "org-pw", &["--config", conf_s]);
    // --realm of a realm herald does not challenge in: added, with a note saying so.
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["users", "add", "dave", "--password-stdin", "--realm", "elsewhere", "--config", conf_s])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"pw\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && note.contains("'elsewhere' is not one of them"), "{note}");

    let (ok, listed, realms) = herald_users(&["list", "--file", users_s]);
    assert!(ok);
    assert_eq!(realms.lines().filter(|l| l.starts_with("realm ")).count(), 4, "{realms}");
    assert!(realms.contains("realm example.test\n") && realms.contains("realm example.org\n"), "{realms}");
    assert_eq!(listed.lines().filter(|l| *l == "alice").count(), 2, "{listed}");

    // alice is in two realms: removing her needs a realm or a domain.
    let (ok, _, err) = herald_users(&["remove", "alice", "--file", users_s]);
    assert!(!ok && err.contains("say which with --realm"), "{err}");

    // herald serve starts with this file (it exited 2 on a realm mismatch before), warns about
    // the realms it never asks for, and challenges each domain in its own realm.
    let extras = HeraldExtras {
        toml: Some(format!("[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nusers_file = \"{users_s}\"\n")),
        domains: vec!["example.test".into(), "example.org".into()],
        ..HeraldExtras::default()
    };
    // At debug, one line per message with what herald did; registrations at info.
    std::env::set_var("HERALD_TEST_LOG", "info,herald::sip=debug");
    let herald = Herald::start_with(&dir, &HeraldConfig::default(), &extras);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (realm, status) = register_with(&sock, herald.addr, "alice", "example.test", "test-pw");
    assert_eq!((realm.as_str(), status.as_str()), ("example.test", "SIP/2.0 200 OK"));
    let (realm, status) = register_with(&sock, herald.addr, "alice", "example.org", "org-pw");
    assert_eq!((realm.as_str(), status.as_str()), ("example.org", "SIP/2.0 200 OK"));
    // example.test's password does not open example.org's alice.
    let (_, status) = register_with(&sock, herald.addr, "alice", "example.org", "test-pw");
    assert!(status.starts_with("SIP/2.0 401"), "{status}");
    let log = herald.log_text();
    assert!(log.contains("the users of this realm are never asked for") && log.contains("realm=elsewhere"), "{log}");
    assert!(!log.contains("no users in this realm"), "every challenged realm has users: {log}");
    let added = log.lines().filter(|l| l.contains("registration added") && l.contains("aor=alice@example.")).count();
    assert_eq!(added, 2, "one info line per new binding: {log}");
    assert!(
        log.lines()
            .any(|l| l.contains("REGISTER -> sent 401 to UDP:127.0.0.1:")
                && l.contains("call_id=realms-alice-example.test")),
        "a debug line per message with the decision: {log}"
    );
    assert!(log.lines().any(|l| l.contains("REGISTER -> sent 200 to UDP:")), "{log}");
}
