//! Interoperability with Kamailio 5.6: herald and a real Kamailio (tests/kamailio/proxy.cfg, an
//! in-memory registrar and record-routing stateful proxy) in one signalling path, SIPp as caller
//! (tests/kamailio_support/uac_domain.xml: outbound proxy = SIPp's remote address, callee's
//! domain from -key target_domain) and callee (tests/sipp/uas.xml).
//!
//! a. caller → herald → Kamailio → callee: herald has no binding and forwards by Request-URI to
//!    Kamailio, the callee's registrar.
//! b. caller → Kamailio → herald → callee: Kamailio relays domain herald.test to herald, the
//!    callee's registrar.
//! c. REGISTER through Kamailio (which adds Path) to herald; then caller → herald → (Path)
//!    Kamailio → callee.
//!
//! Each call is INVITE/100/180/200/ACK, then BYE/200 along the Record-Route set; the tests
//! assert zero failed calls and, from the callee's message log, that every INVITE, ACK and BYE
//! crossed both proxies in the expected order. Each test has its own block of ports in
//! 17100-17399 on 127.0.0.1. Set KAMAILIO_DEBUG=3 and RUST_LOG=debug for verbose logs (kept in
//! a temp directory when a test fails).

mod kamailio_support;

use kamailio_support::*;
use std::collections::HashSet;

/// Calls per test.
const CALLS: u64 = 100;

/// The ports of one test: Kamailio, herald, and the callee, registering and calling SIPps.
struct Ports {
    kamailio: u16,
    herald: u16,
    uas: u16,
    register: u16,
    uac: u16,
}

fn ports(base: u16) -> Ports {
    Ports { kamailio: base, herald: base + 1, uas: base + 10, register: base + 20, uac: base + 30 }
}

fn rr_of(port: u16) -> String {
    format!("<sip:127.0.0.1:{port};lr")
}

fn via_of(port: u16) -> String {
    format!("SIP/2.0/UDP 127.0.0.1:{port};")
}

/// From the callee's log: every INVITE, ACK and BYE arrived through the proxies at `hops`
/// (caller side first): Vias and Record-Routes name them nearest first, and each dialog's
/// INVITE, ACK and BYE all arrived.
fn assert_path(s: &Scratch, p: &Ports, hops: &[u16]) {
    let log = read_messages(&s.path("uas.msg"));
    let nearest_first: Vec<u16> = hops.iter().rev().copied().collect();
    for method in ["INVITE", "ACK", "BYE"] {
        let mut dialogs = HashSet::new();
        for m in log.iter().filter(|m| m.received && m.is_request(method)) {
            // A Route left at the callee means the last proxy sent the request to the Request-URI
            // instead of the top Route (RFC 3261 §16.6 step 7, §16.12; RFC 3327 §5.3 for a Path).
            let route = m.header("Route");
            assert!(
                route.is_empty(),
                "{method} reached the callee with Route {route:?}, skipping that hop:\n{}",
                m.text
            );
            let vias = m.header("Via");
            let want: Vec<String> =
                nearest_first.iter().map(|&h| via_of(h)).chain(std::iter::once(via_of(p.uac))).collect();
            assert_eq!(vias.len(), want.len(), "{method} Vias {vias:?}\n{}", m.text);
            for (via, w) in vias.iter().zip(&want) {
                assert!(via.starts_with(w), "{method}: Via {via:?}, want {w}...\n{}", m.text);
            }
            if method == "INVITE" {
                let rr = m.header("Record-Route");
                assert_eq!(rr.len(), hops.len(), "INVITE Record-Route {rr:?}\n{}", m.text);
                for (r, &h) in rr.iter().zip(&nearest_first) {
                    assert!(r.starts_with(&rr_of(h)), "Record-Route {r:?}, want {}...\n{}", rr_of(h), m.text);
                }
            } else {
                assert!(m.first_line().starts_with(&format!("{method} sip:127.0.0.1:{};", p.uas)), "{}", m.text);
            }
            dialogs.insert(m.header("Call-ID").remove(0));
        }
        assert_eq!(dialogs.len() as u64, CALLS, "dialogs whose {method} reached the callee");
    }
    // The caller learnt both proxies as its route set.
    let uac = read_messages(&s.path("uac.msg"));
    let bye = uac.iter().find(|m| !m.received && m.is_request("BYE")).expect("caller sent BYE");
    let route = bye.header("Route");
    assert_eq!(route.len(), hops.len(), "BYE Route {route:?}");
    for (r, &h) in route.iter().zip(hops) {
        assert!(r.starts_with(&rr_of(h)), "BYE Route {r:?}, want {}...", rr_of(h));
    }
}

#[test]
fn caller_herald_kamailio_callee() {
    require_tools();
    let s = Scratch::new("a");
    let p = ports(17100);
    let _kamailio = start_kamailio(&s, p.kamailio, p.herald);
    let _herald = start_herald(&s, p.herald);
    let _uas = start_uas(&s, p.uas);
    // The callee registers at Kamailio (AoR bob@127.0.0.1:KPORT); herald knows nothing of bob.
    register_bob(&s, p.kamailio, p.uas, p.register, None);
    // sip:bob@127.0.0.1:KPORT is not herald's domain (herald.test, 127.0.0.1:HPORT): herald
    // forwards by Request-URI.
    call_bob(&s, p.herald, &format!("127.0.0.1:{}", p.kamailio), p.uac, CALLS, 100);
    assert_path(&s, &p, &[p.herald, p.kamailio]);
}

#[test]
fn caller_kamailio_herald_callee() {
    require_tools();
    let s = Scratch::new("b");
    let p = ports(17200);
    let _kamailio = start_kamailio(&s, p.kamailio, p.herald);
    let _herald = start_herald(&s, p.herald);
    let _uas = start_uas(&s, p.uas);
    // The callee registers directly at herald as bob@herald.test.
    let reg = register_bob(&s, p.herald, p.uas, p.register, Some("herald.test"));
    let ok = reg.iter().find(|m| m.received && m.is_response(200, "REGISTER")).expect("200 to REGISTER");
    assert!(ok.header("Path").is_empty(), "no Path was sent, none echoed:\n{}", ok.text);
    // Kamailio relays everything for herald.test to herald.
    call_bob(&s, p.kamailio, "herald.test", p.uac, CALLS, 100);
    assert_path(&s, &p, &[p.kamailio, p.herald]);
}

#[test]
fn register_through_kamailio_with_path_then_call() {
    require_tools();
    let s = Scratch::new("c");
    let p = ports(17300);
    let _kamailio = start_kamailio(&s, p.kamailio, p.herald);
    let _herald = start_herald(&s, p.herald);
    let _uas = start_uas(&s, p.uas);
    // REGISTER sip:herald.test sent to Kamailio, which adds Path and relays to herald.
    let reg = register_bob(&s, p.kamailio, p.uas, p.register, Some("herald.test"));
    let ok = reg.iter().find(|m| m.received && m.is_response(200, "REGISTER")).expect("200 to REGISTER");
    let contact = ok.header("Contact");
    assert_eq!(contact.len(), 1, "one binding in the 200:\n{}", ok.text);
    let want = format!("<sip:bob@127.0.0.1:{};transport=UDP>", p.uas);
    assert!(
        contact[0].to_ascii_lowercase().starts_with(&want.to_ascii_lowercase()),
        "Contact {contact:?}, want {want}"
    );
    assert!(contact[0].contains(";expires="), "binding without expires: {contact:?}");
    // Supported: path: herald echoes the Path Kamailio added (RFC 3327 §5.3).
    let path = ok.header("Path");
    assert_eq!(path.len(), 1, "Path echoed:\n{}", ok.text);
    assert!(path[0].starts_with(&rr_of(p.kamailio)), "Path {path:?}");
    assert_eq!(ok.header("Via").len(), 1, "proxies' Vias removed from the 200:\n{}", ok.text);
    // A call to bob@herald.test sent to herald: herald routes it along the stored Path, through
    // Kamailio, to the contact.
    call_bob(&s, p.herald, "herald.test", p.uac, CALLS, 100);
    assert_path(&s, &p, &[p.herald, p.kamailio]);
}
