//! Phones behind a real NAT (issue 18 item 4): herald, a home router doing nftables masquerade,
//! and a phone on the router's private network, each in its own network namespace
//! (tests/nat_support). The phone is a UDP socket the test drives by hand, so every byte it
//! sends and every keep-alive it gets is checked.
//!
//! * A phone registering with its private Contact (192.168.N.2) from the NAT's address is
//!   called: the INVITE reaches it through the NAT with its contact as Request-URI; its 200's
//!   Contact reaches the caller rewritten to the NAT's address, and the caller's BYE to that
//!   Contact reaches the phone; CRLF keep-alives arrive from herald's SIP port every second.
//! * OPTIONS keep-alives: answered, the binding stays; unanswered twice in a row, it is removed
//!   and a call gets 404; the metrics endpoint counts sent, answered and dropped.
//! * A phone behind NAT on TCP registers over its connection; the call reaches it over that
//!   connection, its 200's private Contact (no `transport`) reaches the caller as the NAT's
//!   address with `transport=tcp`, and the BYE sent there comes back over the connection.
//! * Real phones: SIPp as bob (tests/sipp/uas.xml) behind the NAT, SIPp as the caller
//!   (tests/sipp/uac.xml) in herald's namespace: three calls, each ACK and BYE following the
//!   fixed Contact through the NAT to bob.
//! * Path (RFC 3327): a second herald is the registrar; the first is an edge proxy in front of
//!   it (serving no domain). The phone registers through the edge, which adds its Path and
//!   keeps the phone's NAT mapping open with CRLF keep-alives; the registrar's INVITE goes
//!   through the edge and reaches the phone over the NAT.
//!
//! Needs root, iproute2 and nftables (scripts/test.sh installs them); without network
//! namespaces the tests print "skipped" and pass. Logs: `target/tmp/nat_traversal_*/`.

mod common;
mod nat_support;
mod netns_support;

use common::test_dir;
use nat_support::*;
use netns_support::{wait_until, Proc};
use std::net::SocketAddr;
use std::time::Duration;

const PHONE_PORT: u16 = 5062;
const WAIT: Duration = Duration::from_secs(5);

/// herald at `herald_ip:5060` (UDP only), no authentication, serving `domains`, with `[nat]`
/// as given.
fn config(listen: &str, domains: &[&str], nat: &str) -> String {
    let domains: Vec<String> = domains.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        "domains = [{}]\n[[listen]]\naddress = \"{listen}\"\ntransports = [\"udp\"]\n[auth]\nenabled = false\n[nat]\n{nat}\n",
        domains.join(", ")
    )
}

fn register(phone: &Ua, ruri_host: &str, user: &str, domain: &str, extra: &str) -> String {
    let local = phone.addr;
    format!(
        "REGISTER sip:{ruri_host} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-reg-{user};rport\nMax-Forwards: 70\nFrom: <sip:{user}@{domain}>;tag=r{user}\nTo: <sip:{user}@{domain}>\nCall-ID: reg-{user}@{local}\nCSeq: 1 REGISTER\n{extra}Contact: <sip:{user}@{local}>\nExpires: 120\nContent-Length: 0\n\n"
    )
}

fn invite(caller: &Ua, ruri: &str, call_id: &str) -> String {
    let local = caller.addr;
    format!(
        "INVITE {ruri} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.net>;tag=a1\nTo: <{ruri}>\nCall-ID: {call_id}\nCSeq: 1 INVITE\nContact: <sip:alice@{local}>\nContent-Length: 0\n\n"
    )
}

fn fail(what: &str, heralds: &[&Proc], uas: &[(&str, &Ua)]) -> String {
    let mut s = format!("{what}\n");
    for h in heralds {
        s += &format!("--- {} log (last 30 lines):\n{}\n", h.name, netns_support::last_lines(h, 30));
    }
    for (name, ua) in uas {
        s += &format!("--- {name} received:\n{}\n", ua.seen());
    }
    s
}

/// The phone registers from behind the NAT (its 200 comes back through the NAT's mapping).
fn register_behind_nat(phone: &mut Ua, herald: SocketAddr, text: &str, h: &[&Proc]) {
    phone.send(herald, text);
    let Some((ok, _)) = phone.wait_for(WAIT, |m| status(m).is_some_and(|s| s >= 200)) else {
        panic!("{}", fail("no answer to the REGISTER", h, &[("phone", phone)]));
    };
    assert_eq!(status(&ok), Some(200), "{ok}");
}

#[test]
fn a_phone_behind_nat_is_called_through_the_nat_and_gets_crlf_keepalives() {
    let Some(lab) = lab_or_skip("nat_traversal") else { return };
    let dir = test_dir("nat_traversal_crlf");
    let herald_addr: SocketAddr = format!("{}:5060", lab.herald_ip).parse().unwrap();
    let herald = lab.start_herald(
        &dir,
        "herald",
        &config("0.0.0.0:5060", &[&lab.herald_ip], "keepalive = \"crlf\"\nkeepalive_interval_s = 1"),
    );
    let mut phone = Ua::new(NatLab::udp_in(&lab.phone_ns, &format!("{}:{PHONE_PORT}", lab.phone_ip)));
    let mut caller = Ua::new(NatLab::udp_in(&lab.herald_ns, &format!("{}:0", lab.herald_ip)));
    let reg = register(&phone, &lab.herald_ip, "bob", &lab.herald_ip, "");
    register_behind_nat(&mut phone, herald_addr, &reg, &[&herald]);

    // CRLF keep-alives from herald's SIP port, through the NAT's mapping.
    let got = wait_until(Duration::from_secs(5), || {
        phone.wait_for(Duration::from_millis(100), |_| false);
        phone.keepalives.len() >= 2
    });
    assert!(got, "{}", fail("fewer than 2 CRLF keep-alives in 5 s", &[&herald], &[("phone", &phone)]));
    assert!(phone.keepalives.iter().all(|from| *from == herald_addr), "{:?}", phone.keepalives);

    // A call to bob reaches him through the NAT, addressed to his contact.
    let bob_ruri = format!("sip:bob@{}", lab.herald_ip);
    caller.send(herald_addr, &invite(&caller, &bob_ruri, "nat-call-1"));
    let Some((inv, from)) = phone.wait_for(WAIT, |m| m.starts_with("INVITE ")) else {
        panic!("{}", fail("the INVITE did not reach the phone", &[&herald], &[("phone", &phone), ("caller", &caller)]));
    };
    assert_eq!(from, herald_addr);
    assert_eq!(request_uri(&inv), format!("sip:bob@{}", phone.addr), "the Request-URI is the registered contact");
    phone.send(from, &respond(&inv, 200, "OK", "b1", Some(&format!("sip:bob@{}", phone.addr))));
    let Some((ok, _)) = caller.wait_for(WAIT, |m| status(m) == Some(200)) else {
        panic!("{}", fail("no 200 at the caller", &[&herald], &[("phone", &phone), ("caller", &caller)]));
    };
    // The NAT's address and the port it mapped bob's socket to.
    let contact = uri_of(header(&ok, "Contact").unwrap()).to_owned();
    let public_port = contact.strip_prefix(&format!("sip:bob@{}:", lab.public_ip)).and_then(|p| p.parse::<u16>().ok());
    assert!(public_port.is_some(), "the caller sees bob at the NAT's address: {contact}");

    // The caller's BYE goes to that Contact (through herald's Record-Route) and reaches bob.
    let rr = uri_of(header(&ok, "Record-Route").expect("herald record-routes")).to_owned();
    let local = caller.addr;
    let bye = format!("BYE {contact} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-bye1;rport\nMax-Forwards: 70\nRoute: <{rr}>\nFrom: <sip:alice@example.net>;tag=a1\nTo: <{bob_ruri}>;tag=b1\nCall-ID: nat-call-1\nCSeq: 2 BYE\nContent-Length: 0\n\n");
    caller.send(herald_addr, &bye);
    let Some((bye_in, _)) = phone.wait_for(WAIT, |m| m.starts_with("BYE ")) else {
        panic!("{}", fail("the BYE did not reach the phone", &[&herald], &[("phone", &phone), ("caller", &caller)]));
    };
    assert_eq!(request_uri(&bye_in), contact, "sent where the fixed Contact says, through the NAT");
    phone.send(herald_addr, &respond(&bye_in, 200, "OK", "b1", None));
    let bye_ok =
        caller.wait_for(WAIT, |m| status(m) == Some(200) && header(m, "CSeq").is_some_and(|c| c.ends_with("BYE")));
    assert!(bye_ok.is_some(), "{}", fail("no 200 for the BYE", &[&herald], &[("phone", &phone), ("caller", &caller)]));
}

#[test]
fn options_keepalives_keep_an_answering_phone_and_drop_a_silent_one() {
    let Some(lab) = lab_or_skip("nat_traversal") else { return };
    let dir = test_dir("nat_traversal_options");
    let herald_addr: SocketAddr = format!("{}:5060", lab.herald_ip).parse().unwrap();
    let herald = lab.start_herald(
        &dir,
        "herald",
        &config(
            "0.0.0.0:5060",
            &[&lab.herald_ip],
            "keepalive = \"options\"\nkeepalive_interval_s = 1\nkeepalive_max_failures = 2\n[metrics]\nlisten = \"127.0.0.1:9190\"",
        ),
    );
    let mut phone = Ua::new(NatLab::udp_in(&lab.phone_ns, &format!("{}:{PHONE_PORT}", lab.phone_ip)));
    let mut caller = Ua::new(NatLab::udp_in(&lab.herald_ns, &format!("{}:0", lab.herald_ip)));
    let reg = register(&phone, &lab.herald_ip, "bob", &lab.herald_ip, "");
    register_behind_nat(&mut phone, herald_addr, &reg, &[&herald]);

    // Answered for three rounds: the binding stays.
    for round in 0..3 {
        let Some((options, from)) = phone.wait_for(WAIT, |m| m.starts_with("OPTIONS ")) else {
            panic!("{}", fail(&format!("no OPTIONS keep-alive in round {round}"), &[&herald], &[("phone", &phone)]));
        };
        assert_eq!(from, herald_addr, "from herald's SIP port");
        assert_eq!(request_uri(&options), format!("sip:bob@{}", phone.addr), "addressed to the contact");
        assert_eq!(header(&options, "Max-Forwards"), Some("1"));
        phone.send(from, &respond(&options, 200, "OK", "k", None));
    }
    assert!(!herald.text().contains("NAT keep-alive unanswered"), "{}", herald.text());

    // Silent from now on: removed after two unanswered rounds, and a call finds nobody.
    let dropped = wait_until(Duration::from_secs(10), || {
        phone.wait_for(Duration::from_millis(100), |_| false);
        herald.text().contains("NAT keep-alive unanswered")
    });
    assert!(dropped, "{}", fail("the silent binding was not dropped within 10 s", &[&herald], &[("phone", &phone)]));
    caller.send(herald_addr, &invite(&caller, &format!("sip:bob@{}", lab.herald_ip), "after-drop"));
    let answer = caller.wait_for(WAIT, |m| status(m).is_some_and(|s| s >= 300));
    let code = answer.as_ref().and_then(|(m, _)| status(m));
    assert_eq!(code, Some(404), "{}", fail("a call after the drop", &[&herald], &[("caller", &caller)]));

    // The metrics endpoint counts them: at least the three answered and two unanswered sent.
    let metrics = NatLab::http_get_in(&lab.herald_ns, "127.0.0.1:9190", "/metrics");
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}:\n{metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("herald_nat_keepalives_sent_total") >= 5.0, "{metrics}");
    assert!(value("herald_nat_keepalives_answered_total") >= 3.0, "{metrics}");
    assert_eq!(value("herald_nat_keepalive_bindings_dropped_total"), 1.0, "{metrics}");
}

#[test]
fn path_through_an_edge_proxy_reaches_the_phone_behind_nat() {
    let Some(lab) = lab_or_skip("nat_traversal") else { return };
    let dir = test_dir("nat_traversal_path");
    let edge_addr: SocketAddr = format!("{}:5060", lab.herald_ip).parse().unwrap();
    let registrar_addr: SocketAddr = "127.0.0.1:5070".parse().unwrap();
    // The edge serves no domain of its own; the registrar serves 127.0.0.1 and knows nothing
    // of the NAT (its keep-alives skip bindings with a Path).
    let edge = lab.start_herald(
        &dir,
        "edge",
        &config(&edge_addr.to_string(), &["edge.invalid"], "edge_path = \"supported\"\nkeepalive_interval_s = 1"),
    );
    let registrar = lab.start_herald(&dir, "registrar", &config(&registrar_addr.to_string(), &["127.0.0.1"], ""));
    let heralds = [&edge, &registrar];
    let mut phone = Ua::new(NatLab::udp_in(&lab.phone_ns, &format!("{}:{PHONE_PORT}", lab.phone_ip)));
    let mut caller = Ua::new(NatLab::udp_in(&lab.herald_ns, "127.0.0.1:0"));

    // The phone's outbound proxy is the edge; the registrar's domain is in the Request-URI.
    let reg = register(&phone, "127.0.0.1:5070", "carol", "127.0.0.1", "Supported: path\n");
    phone.send(edge_addr, &reg);
    let Some((ok, _)) = phone.wait_for(WAIT, |m| status(m).is_some_and(|s| s >= 200)) else {
        panic!("{}", fail("no answer to the REGISTER through the edge", &heralds, &[("phone", &phone)]));
    };
    assert_eq!(status(&ok), Some(200), "{ok}");
    let path = header(&ok, "Path").unwrap_or_else(|| panic!("the registrar echoes the Path (RFC 3327 §5.3): {ok}"));
    assert!(path.contains(&format!("sip:{edge_addr};lr;ft=")), "the edge's URI with a flow token: {path}");
    // The edge keeps the phone's NAT mapping open: the registrar holds the binding, but the
    // mapping points at the edge.
    let kept = wait_until(Duration::from_secs(5), || {
        phone.wait_for(Duration::from_millis(100), |_| false);
        phone.keepalives.contains(&edge_addr)
    });
    assert!(kept, "{}", fail("no CRLF keep-alive from the edge in 5 s", &heralds, &[("phone", &phone)]));

    // A call at the registrar goes through the edge and over the NAT to the phone.
    caller.send(registrar_addr, &invite(&caller, "sip:carol@127.0.0.1", "path-call-1"));
    let Some((inv, from)) = phone.wait_for(WAIT, |m| m.starts_with("INVITE ")) else {
        panic!("{}", fail("the INVITE did not reach the phone", &heralds, &[("phone", &phone), ("caller", &caller)]));
    };
    assert_eq!(from, edge_addr, "delivered by the edge");
    assert_eq!(request_uri(&inv), format!("sip:carol@{}", phone.addr));
    phone.send(from, &respond(&inv, 200, "OK", "c1", Some(&format!("sip:carol@{}", phone.addr))));
    let Some((answer, _)) = caller.wait_for(WAIT, |m| status(m) == Some(200)) else {
        panic!("{}", fail("no 200 at the caller", &heralds, &[("phone", &phone), ("caller", &caller)]));
    };
    let contact = uri_of(header(&answer, "Contact").unwrap());
    assert!(contact.starts_with(&format!("sip:carol@{}:", lab.public_ip)), "the edge fixed the Contact: {contact}");
}

#[test]
fn sipp_calls_reach_a_sipp_phone_behind_nat_and_its_dialogs_follow_the_fixed_contact() {
    let Some(lab) = lab_or_skip("nat_traversal") else { return };
    netns_support::require("sipp", "sip-tester");
    let dir = test_dir("nat_traversal_sipp");
    let herald_addr: SocketAddr = format!("{}:5060", lab.herald_ip).parse().unwrap();
    // No keep-alives: SIPp's UAS scenario would take a CRLF datagram for an unexpected message.
    let herald = lab.start_herald(&dir, "herald", &config("0.0.0.0:5060", &[&lab.herald_ip], "keepalive = \"off\""));
    // bob registers from the port SIPp will answer on, so that the NAT maps that port (the
    // mapping lives on for the conntrack UDP timeout, longer than this test).
    let mut bob = Ua::new(NatLab::udp_in(&lab.phone_ns, &format!("{}:5100", lab.phone_ip)));
    let reg = register(&bob, &lab.herald_ip, "bob", &lab.herald_ip, "");
    register_behind_nat(&mut bob, herald_addr, &reg, &[&herald]);
    drop(bob);
    let uas = lab.sipp(true, &dir, "uas", "uas.xml", 5100, &["-m", "3", "-timeout", "30"]);
    let bound = wait_until(Duration::from_secs(10), || {
        uas.text().contains("Call") || std::fs::metadata(dir.join("uas.csv")).is_ok()
    });
    assert!(bound, "sipp uas did not start:\n{}", uas.text());
    let target = herald_addr.to_string();
    let uac =
        lab.sipp(false, &dir, "uac", "uac.xml", 5120, &[&target, "-s", "bob", "-m", "3", "-r", "2", "-timeout", "30"]);
    let uac = NatLab::sipp_result(uac, &dir, Duration::from_secs(40));
    let logs = || {
        format!(
            "--- herald:\n{}\n--- uas messages:\n{}",
            herald.text(),
            common::tail(&dir.join("uas_messages.log"), 60)
        )
    };
    assert!(uac.status.success() && uac.count("SuccessfulCall") == 3, "{uac:?}\n{}", logs());
    let uas = NatLab::sipp_result(uas, &dir, Duration::from_secs(30));
    // The UAS ends each call on the BYE the caller sent to bob's fixed Contact.
    uas.assert_all_successful(3);
    let uas_log = std::fs::read_to_string(dir.join("uas_messages.log")).unwrap_or_default();
    assert!(uas_log.contains(&format!("BYE sip:{}:", lab.public_ip)), "BYE to the NAT's address:\n{}", logs());
}

#[test]
fn a_tcp_phone_behind_nat_is_called_over_its_connection_and_its_dialog_comes_back_on_it() {
    let Some(lab) = lab_or_skip("nat_traversal") else { return };
    let dir = test_dir("nat_traversal_tcp");
    let herald_addr: SocketAddr = format!("{}:5060", lab.herald_ip).parse().unwrap();
    let cfg = format!(
        "domains = [\"{}\"]\n[[listen]]\naddress = \"0.0.0.0:5060\"\ntransports = [\"udp\", \"tcp\"]\n[auth]\nenabled = false\n",
        lab.herald_ip
    );
    let herald = lab.start_herald(&dir, "herald", &cfg);
    let mut carl = TcpUa::new(NatLab::tcp_in(&lab.phone_ns, herald_addr));
    let lan = format!("{}:5070", lab.phone_ip);
    let domain = &lab.herald_ip;
    carl.send(&format!("REGISTER sip:{domain} SIP/2.0\nVia: SIP/2.0/TCP {lan};branch=z9hG4bK-tcpreg;rport\nMax-Forwards: 70\nFrom: <sip:carl@{domain}>;tag=c1\nTo: <sip:carl@{domain}>\nCall-ID: reg-carl\nCSeq: 1 REGISTER\nContact: <sip:carl@{lan};transport=tcp>\nExpires: 120\nContent-Length: 0\n\n"));
    let ok = carl.wait_for(WAIT, |m| status(m).is_some_and(|s| s >= 200));
    assert_eq!(ok.as_deref().and_then(status), Some(200), "{}", herald.text());

    let mut caller = Ua::new(NatLab::udp_in(&lab.herald_ns, &format!("{}:0", lab.herald_ip)));
    let ruri = format!("sip:carl@{domain}");
    caller.send(herald_addr, &invite(&caller, &ruri, "tcp-call-1"));
    let Some(inv) = carl.wait_for(WAIT, |m| m.starts_with("INVITE ")) else {
        panic!("the INVITE did not come over carl's connection; carl saw:\n{}\n{}", carl.seen(), herald.text());
    };
    // Carl answers with his private address and no transport, as many phones do.
    carl.send(&respond(&inv, 200, "OK", "k1", Some(&format!("sip:carl@{lan}"))));
    let Some((ok, _)) = caller.wait_for(WAIT, |m| status(m) == Some(200)) else {
        panic!("no 200 at the caller:\n{}\n{}", caller.seen(), herald.text());
    };
    let contact = uri_of(header(&ok, "Contact").unwrap()).to_owned();
    let public = contact.strip_prefix(&format!("sip:carl@{}:", lab.public_ip)).unwrap_or_else(|| panic!("{contact}"));
    assert!(public.ends_with(";transport=tcp"), "the connection's transport added: {contact}");
    let rr = uri_of(header(&ok, "Record-Route").expect("herald record-routes")).to_owned();
    let local = caller.addr;
    caller.send(herald_addr, &format!("BYE {contact} SIP/2.0\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-tcpbye;rport\nMax-Forwards: 70\nRoute: <{rr}>\nFrom: <sip:alice@example.net>;tag=a1\nTo: <{ruri}>;tag=k1\nCall-ID: tcp-call-1\nCSeq: 2 BYE\nContent-Length: 0\n\n"));
    let Some(bye) = carl.wait_for(WAIT, |m| m.starts_with("BYE ")) else {
        panic!("the BYE did not come back over carl's connection; carl saw:\n{}\n{}", carl.seen(), herald.text());
    };
    carl.send(&respond(&bye, 200, "OK", "k1", None));
    let bye_ok =
        caller.wait_for(WAIT, |m| status(m) == Some(200) && header(m, "CSeq").is_some_and(|c| c.ends_with("BYE")));
    assert!(bye_ok.is_some(), "no 200 for the BYE:\n{}", caller.seen());
}
