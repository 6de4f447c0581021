//! The RFC 4475 torture messages that are registrations, read byte-exact from
//! `shared/testdata/sip-torture` (or HERALD_TORTURE_DIR), and every other corpus message to show
//! that no input makes the registrar panic.

use super::tests::{listed, udp_peer, Fixture};
use super::*;
use bytes::Bytes;
use herald_sip::Limits;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    std::env::var("HERALD_TORTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/sip-torture"))
}

fn read(name: &str) -> Vec<u8> {
    let path = corpus_dir().join("rfc4475").join(format!("{name}.dat"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("torture corpus file {} missing: {e}", path.display()))
}

fn run(name: &str) -> (Fixture, Message) {
    let f = Fixture::new();
    let resp = f.send_from(0, &read(name), udp_peer());
    (f, resp)
}

fn uris(f: &Fixture, aor: &str) -> Vec<String> {
    let mut v: Vec<String> = f.lookup(aor, 0).iter().map(|b| b.contact.to_string()).collect();
    v.sort();
    v
}

/// §3.1.1.4: `%00` in the user parts; the two contacts differ (one and two NULs).
#[test]
fn escnull_registers_two_distinct_bindings() {
    let (f, resp) = run("escnull");
    assert_eq!(resp.status(), Some(200));
    assert_eq!(
        uris(&f, "sip:null-%00-null@example.com"),
        ["sip:%00%00@host5.example.com", "sip:%00@host5.example.com"]
    );
    assert_eq!(listed(&resp).len(), 2);
    // The AoR key holds the unescaped NUL.
    assert!(f.store.lookup(&Aor::from_canonical(&b"null-\0-null@example.com"[..]), f.at(0)).len() == 2);
}

/// §3.3.12: in the addr-spec form, `;unknownparam` is a Contact parameter, not part of the URI.
#[test]
fn cparam01_binding_has_no_unknownparam() {
    let (f, resp) = run("cparam01");
    assert_eq!(resp.status(), Some(200));
    assert_eq!(uris(&f, "sip:watson@example.com"), ["sip:+19725552222@gw1.example.net"]);
}

/// §3.3.13: inside `<>`, `;unknownparam` is a URI parameter and stays in the binding.
#[test]
fn cparam02_binding_keeps_unknownparam() {
    let (f, resp) = run("cparam02");
    assert_eq!(resp.status(), Some(200));
    assert_eq!(uris(&f, "sip:watson@example.com"), ["sip:+19725552222@gw1.example.net;unknownparam"]);
    assert_eq!(listed(&resp)[0].0, "sip:+19725552222@gw1.example.net;unknownparam");
}

/// §3.3.14: the escaped Route header component is part of the contact URI and is kept.
#[test]
fn regescrt_binding_keeps_the_escaped_route() {
    let (f, resp) = run("regescrt");
    assert_eq!(resp.status(), Some(200));
    assert_eq!(uris(&f, "sip:user@example.com"), ["sip:user@example.com?Route=%3Csip:sip.example.com%3E"]);
}

/// §3.3.4: "A registrar would reject this request with a 400 Bad Request response, since the
/// To: header field is required to contain a SIP or SIPS URI as an AOR."
#[test]
fn unksm2_is_rejected_with_400() {
    let (f, resp) = run("unksm2");
    assert_eq!(resp.status(), Some(400));
    assert!(f.store.is_empty());
}

/// Every corpus message that parses, and every prefix-truncation and byte flip of a valid
/// REGISTER, goes through `handle_register` without a panic, and the answer to a request is a
/// parseable response.
#[test]
fn no_input_panics() {
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for sub in ["rfc4475", "rfc5118"] {
        if let Ok(rd) = std::fs::read_dir(corpus_dir().join(sub)) {
            inputs.extend(rd.flatten().filter_map(|e| std::fs::read(e.path()).ok()));
        }
    }
    assert!(inputs.len() > 40, "torture corpus missing");
    let base = read("escnull");
    for cut in (20..base.len()).step_by(7) {
        let mut m = base[..cut].to_vec();
        m.extend_from_slice(b"\r\n\r\n");
        inputs.push(m);
    }
    for (i, byte) in [b'*', b',', b'<', b'>', b';', b'%', b'0', b' '].iter().cycle().take(400).enumerate() {
        let mut m = read("cparam02");
        let at = 16 + (i * 13) % (m.len() - 20);
        m[at] = *byte;
        inputs.push(m);
    }
    let f = Fixture::new();
    for raw in inputs {
        let Ok(msg) = Message::parse(Bytes::from(raw), &Limits::default()) else { continue };
        let out = f.reg.handle_register(f.at(0), &msg, udp_peer(), &f.store);
        if msg.is_request() {
            let resp = Message::parse(out.freeze(), &Limits::default()).expect("a response to every request");
            assert!(resp.status().is_some());
        } else {
            assert!(out.is_empty());
        }
    }
}
