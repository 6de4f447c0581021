//! REGISTER processing (RFC 3261 §10.3, RFC 3327) against a real store with a simulated clock.

use super::*;
use crate::peer::{ConnId, Transport};
use bytes::Bytes;
use herald_sip::Limits;
use std::time::Duration;

pub(super) struct Fixture {
    pub reg: Registrar,
    pub store: Location,
    pub t0: Instant,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with(RegistrarConfig::default())
    }

    pub fn with(config: RegistrarConfig) -> Fixture {
        let reg = Registrar::new(config);
        let store = reg.new_store();
        Fixture { reg, store, t0: Instant::now() }
    }

    pub fn at(&self, secs: u64) -> Instant {
        self.t0 + Duration::from_secs(secs)
    }

    /// Sends `raw` at t0 + `secs` from `from` and parses the response.
    pub fn send_from(&self, secs: u64, raw: &[u8], from: Peer) -> Message {
        let req = Message::parse(Bytes::copy_from_slice(raw), &Limits::default()).expect("test request parses");
        let resp = self.reg.handle_register(self.at(secs), &req, from, &self.store);
        let resp = Message::parse(resp.freeze(), &Limits::default()).expect("response parses");
        resp.validate_all().expect("response is valid");
        resp
    }

    pub fn send(&self, secs: u64, raw: &str) -> Message {
        self.send_from(secs, raw.as_bytes(), udp_peer())
    }

    pub fn lookup(&self, aor: &str, secs: u64) -> Vec<Binding<Peer>> {
        self.store.lookup(&Aor::parse(aor).unwrap(), self.at(secs))
    }
}

pub(super) fn udp_peer() -> Peer {
    Peer::udp("192.0.2.10:5060".parse().unwrap())
}

/// A REGISTER for alice with the given Call-ID, CSeq and extra header lines.
fn register(call_id: &str, cseq: u32, extra: &str) -> String {
    format!(
        "REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK{call_id}{cseq}\r\n\
         Max-Forwards: 70\r\nTo: Alice <sip:alice@example.com>\r\nFrom: Alice <sip:alice@example.com>;tag=a73kszlfl\r\n\
         Call-ID: {call_id}\r\nCSeq: {cseq} REGISTER\r\n{extra}Content-Length: 0\r\n\r\n"
    )
}

/// The 200's contacts: (URI, expires, q).
pub(super) fn listed(resp: &Message) -> Vec<(String, u32, Option<u16>)> {
    resp.contacts()
        .map(|c| {
            let c = c.unwrap();
            (c.address().unwrap().uri.as_str().to_string(), c.expires().unwrap(), c.q())
        })
        .collect()
}

fn status(resp: &Message) -> u16 {
    resp.status().unwrap()
}

#[test]
fn add_lists_the_binding_with_its_interval_and_tags_to() {
    let f = Fixture::new();
    let resp = f.send(0, &register("c1", 1, "Contact: <sip:alice@192.0.2.10:5060>\r\n"));
    assert_eq!(status(&resp), 200);
    assert_eq!(listed(&resp), [("sip:alice@192.0.2.10:5060".into(), 3600, None)]);
    assert!(resp.to_header().unwrap().tag().is_some_and(|t| t.len() == 16));
    assert_eq!(resp.call_id().unwrap(), "c1");
    assert_eq!(resp.cseq().unwrap().seq, 1);
    let b = &f.lookup("sip:alice@example.com", 0)[0];
    assert_eq!((&*b.call_id, b.cseq, b.source), ("c1", 1, udp_peer()));
    // Half an hour later the remaining lifetime is reported.
    let resp = f.send(1800, &register("c1", 2, ""));
    assert_eq!(listed(&resp), [("sip:alice@192.0.2.10:5060".into(), 1800, None)]);
}

#[test]
fn refresh_and_remove() {
    let f = Fixture::new();
    f.send(0, &register("c1", 1, "Contact: <sip:alice@192.0.2.10>\r\n"));
    let resp = f.send(10, &register("c1", 2, "Contact: <sip:alice@192.0.2.10>\r\nExpires: 120\r\n"));
    assert_eq!(listed(&resp), [("sip:alice@192.0.2.10".into(), 120, None)]);
    let resp = f.send(20, &register("c1", 3, "Contact: <sip:alice@192.0.2.10>;expires=0\r\n"));
    assert_eq!(status(&resp), 200);
    assert!(listed(&resp).is_empty());
    assert!(f.lookup("sip:alice@example.com", 20).is_empty());
    assert!(f.store.is_empty());
}

#[test]
fn star_with_expires_zero_removes_everything() {
    let f = Fixture::new();
    f.send(0, &register("c1", 1, "Contact: <sip:a@h1>, <sip:a@h2>\r\n"));
    f.send(0, &register("other", 1, "Contact: <sip:a@h3>\r\n"));
    assert_eq!(f.lookup("sip:alice@example.com", 0).len(), 3);
    // Not newer than c1's bindings: refused, nothing removed.
    assert_eq!(status(&f.send(1, &register("c1", 1, "Contact: *\r\nExpires: 0\r\n"))), 500);
    assert_eq!(f.lookup("sip:alice@example.com", 1).len(), 3);
    let resp = f.send(1, &register("c1", 2, "Contact: *\r\nExpires: 0\r\n"));
    assert_eq!((status(&resp), listed(&resp).len()), (200, 0));
    assert!(f.store.is_empty());
}

#[test]
fn star_misuse_is_a_bad_request() {
    let f = Fixture::new();
    for extra in [
        "Contact: *, <sip:a@h>\r\nExpires: 0\r\n",
        "Contact: <sip:a@h>\r\nContact: *\r\nExpires: 0\r\n",
        "Contact: *\r\n",
        "Contact: *\r\nExpires: 10\r\n",
    ] {
        let resp = f.send(0, &register("c", 1, extra));
        assert_eq!(status(&resp), 400, "{extra}");
        assert!(resp.to_header().unwrap().tag().is_some());
    }
    assert!(f.store.is_empty());
}

#[test]
fn too_brief_gets_423_with_min_expires() {
    let f = Fixture::new();
    // The contact parameter wins over the header.
    let resp = f.send(0, &register("c", 1, "Contact: <sip:a@h>;expires=30\r\nExpires: 3600\r\n"));
    assert_eq!((status(&resp), resp.min_expires().unwrap()), (423, Some(60)));
    let resp = f.send(0, &register("c", 2, "Contact: <sip:a@h>, <sip:b@h>\r\nExpires: 59\r\n"));
    assert_eq!(status(&resp), 423);
    assert!(f.store.is_empty());
    // Exactly the minimum, and 0 (a removal), are fine.
    assert_eq!(status(&f.send(0, &register("c", 3, "Contact: <sip:a@h>;expires=60\r\n"))), 200);
    assert_eq!(status(&f.send(0, &register("c", 4, "Contact: <sip:a@h>;expires=0\r\n"))), 200);
    // With a minimum above an hour, intervals of an hour or more are not "too brief".
    let f = Fixture::with(RegistrarConfig { min_expires: 7200, ..RegistrarConfig::default() });
    assert_eq!(status(&f.send(0, &register("c", 1, "Contact: <sip:a@h>;expires=3599\r\n"))), 423);
    let resp = f.send(0, &register("c", 2, "Contact: <sip:a@h>;expires=3600\r\n"));
    assert_eq!(listed(&resp), [("sip:a@h".into(), 3600, None)]);
}

#[test]
fn long_intervals_are_shortened_to_the_maximum() {
    let f = Fixture::with(RegistrarConfig { max_expires: 7200, ..RegistrarConfig::default() });
    let resp = f.send(0, &register("c", 1, "Contact: <sip:a@h>;expires=4294967295\r\n"));
    assert_eq!(listed(&resp), [("sip:a@h".into(), 7200, None)]);
    let resp = f.send(0, &register("c", 2, "Contact: <sip:a@h>\r\nExpires: 86400\r\n"));
    assert_eq!(listed(&resp)[0].1, 7200);
}

#[test]
fn cseq_ordering() {
    let f = Fixture::new();
    assert_eq!(status(&f.send(0, &register("c1", 5, "Contact: <sip:a@h>\r\n"))), 200);
    // Out of order (lower) and replayed (equal) CSeq with the same Call-ID fail...
    for cseq in [4, 5] {
        let resp = f.send(1, &register("c1", cseq, "Contact: <sip:a@h>;expires=0\r\n"));
        assert_eq!(status(&resp), 500, "CSeq {cseq}");
        assert!(resp.retry_after().unwrap().is_none());
    }
    assert_eq!(f.lookup("sip:alice@example.com", 1).len(), 1);
    // ... a different Call-ID (the UA restarted) is accepted with any CSeq...
    let resp = f.send(2, &register("c2", 1, "Contact: <sip:a@h>;expires=300\r\n"));
    assert_eq!(listed(&resp), [("sip:a@h".into(), 300, None)]);
    assert_eq!(&*f.lookup("sip:alice@example.com", 2)[0].call_id, "c2");
    // ... and then the old Call-ID may update the binding again.
    assert_eq!(status(&f.send(3, &register("c1", 1, "Contact: <sip:a@h>\r\n"))), 200);
}

#[test]
fn q_values_order_the_200() {
    let f = Fixture::new();
    let resp =
        f.send(0, &register("c", 1, "Contact: <sip:low@h>;q=0.1, <sip:high@h>;q=0.9\r\nContact: <sip:none@h>\r\n"));
    assert_eq!(
        listed(&resp),
        [
            ("sip:none@h".into(), 3600, None),
            ("sip:high@h".into(), 3600, Some(900)),
            ("sip:low@h".into(), 3600, Some(100))
        ]
    );
    let resp = f.send(0, &register("c", 2, "Contact: <sip:x@h>;q=0.125, <sip:y@h>;q=1.0, <sip:z@h>;q=0\r\n"));
    let raw = String::from_utf8_lossy(resp.as_bytes()).into_owned();
    assert!(raw.contains("<sip:x@h>;expires=3600;q=0.125\r\n"), "{raw}");
    assert!(raw.contains("<sip:y@h>;expires=3600;q=1\r\n"), "{raw}");
    assert!(raw.contains("<sip:z@h>;expires=3600;q=0\r\n"), "{raw}");
    assert_eq!(listed(&resp).iter().map(|c| c.0.as_str()).collect::<Vec<_>>()[..2], ["sip:y@h", "sip:none@h"]);
}

#[test]
fn several_contact_headers_and_comma_lists() {
    let f = Fixture::new();
    let resp = f.send(
        0,
        &register(
            "c",
            1,
            "Contact: <sip:a@h>, \"B\" <sip:b@h>;expires=100\r\nm: sip:c@h;expires=200\r\nContact: <sip:d@h>\r\n",
        ),
    );
    let mut got = listed(&resp);
    got.sort();
    assert_eq!(
        got,
        [
            ("sip:a@h".into(), 3600, None),
            ("sip:b@h".into(), 100, None),
            ("sip:c@h".into(), 200, None),
            ("sip:d@h".into(), 3600, None)
        ]
    );
}

#[test]
fn query_returns_current_bindings() {
    let f = Fixture::new();
    assert!(listed(&f.send(0, &register("c", 1, ""))).is_empty());
    f.send(0, &register("c", 2, "Contact: <sip:a@h>\r\n"));
    // A query from another Call-ID with a low CSeq is fine: it changes nothing.
    let resp = f.send(100, &register("q", 1, ""));
    assert_eq!(listed(&resp), [("sip:a@h".into(), 3500, None)]);
}

#[test]
fn path_is_stored_and_echoed_only_to_supporting_uas() {
    let f = Fixture::new();
    let path = "Path: <sip:p1.example.com;lr>\r\nPath: <sip:p2.example.com;lr>, <sip:p3.example.com;lr>\r\n";
    let resp = f.send(0, &register("c", 1, &format!("{path}Supported: path\r\nContact: <sip:a@h>\r\n")));
    assert_eq!(status(&resp), 200);
    let want = "<sip:p1.example.com;lr>, <sip:p2.example.com;lr>, <sip:p3.example.com;lr>";
    assert_eq!(resp.get(HeaderName::Path), Some(want.as_bytes()));
    assert_eq!(f.lookup("sip:alice@example.com", 0)[0].path.as_deref(), Some(want));
    // Without Supported: path the Path is still stored but not echoed.
    let resp = f.send(0, &register("c", 2, "Path: <sip:p9.example.com;lr>\r\nContact: <sip:a@h>\r\n"));
    assert_eq!((status(&resp), resp.get(HeaderName::Path)), (200, None));
    assert_eq!(f.lookup("sip:alice@example.com", 0)[0].path.as_deref(), Some("<sip:p9.example.com;lr>"));
    // A refresh without Path clears it.
    f.send(0, &register("c", 3, "Contact: <sip:a@h>\r\n"));
    assert_eq!(f.lookup("sip:alice@example.com", 0)[0].path, None);
    assert_eq!(status(&f.send(0, &register("c", 4, "Path: <sip:p1;lr\r\nContact: <sip:a@h>\r\n"))), 400);
}

#[test]
fn require_with_unknown_extensions_gets_420() {
    let f = Fixture::new();
    let resp = f.send(0, &register("c", 1, "Require: path, foo, bar, foo\r\nContact: <sip:a@h>\r\n"));
    assert_eq!(status(&resp), 420);
    assert_eq!(resp.get(HeaderName::Unsupported), Some(&b"foo, bar"[..]));
    assert!(f.store.is_empty());
    assert_eq!(status(&f.send(0, &register("c", 2, "Require: path\r\nContact: <sip:a@h>\r\n"))), 200);
}

#[test]
fn to_must_be_a_sip_uri_in_a_served_domain() {
    let f = Fixture::with(RegistrarConfig { domains: vec!["example.com".into()], ..RegistrarConfig::default() });
    let tel =
        register("c", 1, "Contact: <sip:a@h>\r\n").replace("To: Alice <sip:alice@example.com>", "To: <tel:+15551234>");
    assert_eq!(status(&f.send(0, &tel)), 400);
    let other =
        register("c", 1, "Contact: <sip:a@h>\r\n").replace("alice@example.com>\r\nFrom", "alice@EXAMPLE.org>\r\nFrom");
    assert_eq!(status(&f.send(0, &other)), 404);
    let upper = register("c", 1, "Contact: <sip:a@h>\r\n")
        .replace("To: Alice <sip:alice@example.com>", "To: <sips:alice@EXAMPLE.COM>");
    assert_eq!(status(&f.send(0, &upper)), 200);
    assert_eq!(f.lookup("sip:alice@example.com", 0).len(), 1);
}

#[test]
fn too_many_bindings_gets_503_with_retry_after() {
    let f = Fixture::with(RegistrarConfig { max_bindings_per_aor: 2, ..RegistrarConfig::default() });
    f.send(0, &register("c", 1, "Contact: <sip:a@h>;expires=100, <sip:b@h>\r\n"));
    let resp = f.send(40, &register("c", 2, "Contact: <sip:c@h>\r\n"));
    assert_eq!(status(&resp), 503);
    assert_eq!(resp.retry_after().unwrap().unwrap().seconds, 60);
    assert_eq!(f.lookup("sip:alice@example.com", 40).len(), 2);
    // After the retry interval the same request succeeds.
    assert_eq!(status(&f.send(100, &register("c", 3, "Contact: <sip:c@h>\r\n"))), 200);
    let stats = f.reg.stats();
    assert_eq!((stats.too_many_bindings, stats.accepted), (1, 2), "{stats:?}");
    assert_eq!(stats.rejections().iter().map(|(_, n)| n).sum::<u64>(), 1, "{stats:?}");
}

#[test]
fn every_answer_is_counted_by_outcome_and_clones_share_the_counters() {
    let f = Fixture::with(RegistrarConfig { max_bindings_per_aor: 1, ..RegistrarConfig::default() });
    // Each engine shard holds a clone; one set of counters covers them all.
    let other_shard = f.reg.clone();
    assert_eq!(status(&f.send(0, &register("c", 1, "Contact: <sip:a@h>\r\n"))), 200);
    for _ in 0..3 {
        assert_eq!(status(&f.send(0, &register("c", 2, "Contact: <sip:b@h>\r\n"))), 503);
    }
    assert_eq!(status(&f.send(0, &register("c", 1, "Contact: <sip:a@h>\r\n"))), 500, "CSeq not newer");
    assert_eq!(status(&f.send(0, &register("c", 5, "Contact: <sip:a@h>;expires=5\r\n"))), 423);
    assert_eq!(status(&f.send(0, &register("c", 6, "Require: foo\r\nContact: <sip:a@h>\r\n"))), 420);
    assert_eq!(status(&f.send(0, &register("c", 7, "Contact: <sip:a@h\r\n"))), 400);
    assert_eq!(status(&f.send(0, &register("c", 8, ""))), 200, "a query");
    let domains = Registrar::new(RegistrarConfig { domains: vec!["example.org".into()], ..RegistrarConfig::default() });
    let req = Message::parse(Bytes::from(register("c", 9, "Contact: <sip:a@h>\r\n")), &Limits::default()).unwrap();
    let resp = Message::parse(domains.handle_register(f.t0, &req, udp_peer(), &f.store).freeze(), &Limits::default());
    assert_eq!(resp.unwrap().status(), Some(404));
    assert_eq!(domains.stats().not_found, 1, "another registrar, its own counters");
    let want = RegistrarStatsSnapshot {
        accepted: 2,
        too_many_bindings: 3,
        out_of_order: 1,
        interval_too_brief: 1,
        not_found: 0,
        bad_extension: 1,
        malformed: 1,
        other: 0,
    };
    assert_eq!(other_shard.stats(), want);
    assert_eq!(f.reg.shared_stats().snapshot(), want);
    let by_reason: Vec<(&str, u64)> = want.rejections().into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        by_reason,
        [
            ("too_many_bindings", 3),
            ("out_of_order", 1),
            ("interval_too_brief", 1),
            ("bad_extension", 1),
            ("malformed", 1)
        ]
    );
}

#[test]
fn the_source_peer_is_stored_for_connection_reuse() {
    let f = Fixture::new();
    let tcp = Peer { transport: Transport::Tcp, addr: "198.51.100.7:40001".parse().unwrap(), conn: Some(ConnId(42)) };
    let raw = register("c", 1, "Contact: <sip:alice@10.0.0.5:5060;transport=tcp>\r\n");
    assert_eq!(status(&f.send_from(0, raw.as_bytes(), tcp)), 200);
    assert_eq!(f.lookup("sip:alice@example.com", 0)[0].source, tcp);
}

#[test]
fn outbound_instance_and_reg_id_are_kept_and_echoed() {
    let f = Fixture::new();
    let inst = "+sip.instance=\"<urn:uuid:00000000-0000-1000-8000-000A95A0E128>\"";
    let resp = f.send(0, &register("c", 1, &format!("Contact: <sip:a@192.0.2.1:5060>;{inst};reg-id=1\r\n")));
    let raw = String::from_utf8_lossy(resp.as_bytes()).into_owned();
    assert!(raw.contains(&format!("Contact: <sip:a@192.0.2.1:5060>;expires=3600;{inst};reg-id=1\r\n")), "{raw}");
    // The same flow from a new port replaces the binding (RFC 5626 §6).
    let resp = f.send(0, &register("c", 2, &format!("Contact: <sip:a@192.0.2.1:6000>;{inst};reg-id=1\r\n")));
    assert_eq!(listed(&resp), [("sip:a@192.0.2.1:6000".into(), 3600, None)]);
}

#[test]
fn outbound_is_applied_and_required_only_for_a_supported_flow_through_an_ob_first_hop() {
    let f = Fixture::new();
    let inst = "+sip.instance=\"<urn:uuid:00000000-0000-1000-8000-000A95A0E128>\"";
    let flow = |reg_id: u32| format!("Contact: <sip:a@x.invalid;transport=ws;ob>;{inst};reg-id={reg_id}\r\n");
    let require = |resp: &Message| resp.get(HeaderName::Require).map(|v| String::from_utf8_lossy(v).into_owned());
    // RFC 5626 §6: Supported: outbound and a flow, no Path (herald is the first hop): applied.
    let resp = f.send(0, &register("c", 1, &format!("Supported: outbound\r\n{}", flow(1))));
    assert_eq!((status(&resp), require(&resp).as_deref()), (200, Some("outbound")));
    // A second flow of the instance is a second binding; both are listed.
    let resp = f.send(0, &register("d", 1, &format!("Supported: outbound\r\n{}", flow(2))));
    assert_eq!((status(&resp), listed(&resp).len()), (200, 2));
    // Without Supported: outbound the flow is still keyed by instance and reg-id, but nothing
    // is required of the UA.
    let resp = f.send(0, &register("d", 2, &flow(2)));
    assert_eq!((status(&resp), require(&resp)), (200, None));
    // A first hop whose Path lacks `ob` does not support Outbound: 439 (§6, §11.5).
    let path = "Path: <sip:edge.example.net;lr>\r\nSupported: path, outbound\r\n";
    let resp = f.send(0, &register("e", 1, &format!("{path}{}", flow(3))));
    assert_eq!(status(&resp), 439);
    let path = "Path: <sip:edge.example.net;lr;ob>\r\nSupported: path, outbound\r\n";
    let resp = f.send(0, &register("e", 2, &format!("{path}{}", flow(3))));
    assert_eq!((status(&resp), require(&resp).as_deref()), (200, Some("outbound")));
    // Two flows in one REGISTER: 400 (§4.2: one per REGISTER).
    let resp = f.send(0, &register("g", 1, &format!("Supported: outbound\r\n{}{}", flow(4), flow(5))));
    assert_eq!(status(&resp), 400);
    // A contact without reg-id is not a flow: no Outbound, whatever the UA supports.
    let resp = f.send(0, &register("h", 1, "Supported: outbound\r\nContact: <sip:a@192.0.2.1>\r\n"));
    assert_eq!((status(&resp), require(&resp)), (200, None));
}

#[test]
fn malformed_or_misdirected_requests() {
    let f = Fixture::new();
    assert_eq!(status(&f.send(0, &register("c", 1, "Contact: <sip:a@h\r\n"))), 400);
    assert_eq!(status(&f.send(0, &register("c", 1, "Contact: <sip:a@h>\r\nExpires: soon\r\n"))), 400);
    assert_eq!(status(&f.send(0, &register("c", 1, "Require: a b\r\n"))), 400);
    for header in ["Call-ID: c\r\n", "From: Alice <sip:alice@example.com>;tag=a73kszlfl\r\n"] {
        let raw = register("c", 1, "").replace(header, "");
        let req = Message::parse(Bytes::from(raw), &Limits::default()).unwrap();
        let resp = f.reg.handle_register(f.t0, &req, udp_peer(), &f.store);
        let resp = Message::parse(resp.freeze(), &Limits::default()).unwrap();
        assert_eq!(resp.status(), Some(400), "without {header}");
    }
    let cseq = register("c", 1, "").replace("CSeq: 1 REGISTER", "CSeq: 1 OPTIONS");
    assert_eq!(status(&f.send(0, &cseq)), 400);
    let options = register("c", 1, "").replace("REGISTER sip:", "OPTIONS sip:").replace("1 REGISTER", "1 OPTIONS");
    let resp = f.send(0, &options);
    assert_eq!((status(&resp), resp.get(HeaderName::Allow)), (405, Some(&b"REGISTER"[..])));
    // A response is not answered.
    let response = Message::parse(Bytes::from_static(b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nTo: <sip:a@h>\r\nFrom: <sip:a@h>;tag=1\r\nCall-ID: x\r\nCSeq: 1 REGISTER\r\nContent-Length: 0\r\n\r\n"), &Limits::default()).unwrap();
    assert!(f.reg.handle_register(f.t0, &response, udp_peer(), &f.store).is_empty());
    assert!(f.store.is_empty());
}

#[test]
fn to_tags_are_stable_per_request_and_differ_between_requests() {
    let f = Fixture::new();
    let tag = |raw: &str| f.send(0, raw).to_header().unwrap().tag().unwrap().to_string();
    let q1 = register("c", 1, "");
    assert_eq!(tag(&q1), tag(&q1));
    assert_ne!(tag(&q1), tag(&register("c", 2, "")));
    // A To tag already present is kept.
    let tagged = q1.replace("To: Alice <sip:alice@example.com>", "To: <sip:alice@example.com>;tag=mine");
    assert_eq!(tag(&tagged), "mine");
}

#[test]
fn config_is_made_consistent() {
    let r =
        Registrar::new(RegistrarConfig { default_expires: 10, min_expires: 60, max_expires: 30, ..Default::default() });
    assert_eq!((r.config().min_expires, r.config().max_expires, r.config().default_expires), (60, 60, 60));
    assert_eq!(r.new_store().max_bindings_per_aor(), 20);
}

#[test]
fn q_formatting() {
    assert_eq!(
        [0, 1, 10, 100, 125, 500, 999, 1000].map(format_q),
        ["0", "0.001", "0.01", "0.1", "0.125", "0.5", "0.999", "1"]
    );
}

#[test]
fn bindings_stay_compact() {
    // 4 boxed strings, the 56-byte Peer and four 32-bit fields (see herald_store::Binding).
    assert_eq!(std::mem::size_of::<Peer>(), 56);
    assert_eq!(std::mem::size_of::<Binding<Peer>>(), 136);
}
