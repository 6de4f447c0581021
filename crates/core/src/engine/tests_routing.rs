//! The routing table (`[[route]]`, issue 18) through the engine: each action, number handling
//! on the Request-URI sent on, in-dialog requests left alone, and the relay rule of issue 16
//! for rules that send requests away.

use super::*;
use crate::auth::tests::{authenticator, client_answer, nonce_of};
use crate::auth::{Algorithm, AuthPolicy, PeerPrefix};
use crate::routing::{Action, NumberRules, Plus, RoutingTable, Rule, UserMatch};
use herald_sip::HeaderName;

/// A gateway (a fixed next hop), a caller from another domain, a trunk.
const GW: &str = "192.0.2.50:5080";
const CAROL: &str = "198.51.100.20:5070";
const TRUNK: &str = "203.0.113.7:5060";

fn prefix(p: &str) -> Option<UserMatch> {
    Some(UserMatch::Prefix(vec![p.to_owned()]))
}

fn to_gw() -> Action {
    Action::NextHop(format!("sip:{GW}"))
}

fn with_table(rules: Vec<Rule>, policy: Option<AuthPolicy>) -> Harness {
    let cfg = EngineConfig { routing: Arc::new(RoutingTable::new(rules)), ..config(Forking::Parallel, false) };
    let registrar = Registrar::new(RegistrarConfig::default());
    let store = Arc::new(registrar.new_store());
    let now = Instant::now();
    let mut engine = Engine::new(Arc::new(cfg), store, registrar, 0);
    if let Some(policy) = policy {
        engine = engine.with_auth(Arc::new(authenticator(&[Algorithm::Md5], policy, now)));
    }
    Harness { engine, now }
}

/// An out-of-dialog request to `ruri` from `from_uri` at `source`, with extra header lines.
fn request(method: &str, ruri: &str, from_uri: &str, source: &str, call: &str, extra: &str) -> String {
    format!("{method} {ruri} SIP/2.0\nVia: SIP/2.0/UDP {source};branch=z9hG4bK-{call};rport\n{extra}Max-Forwards: 70\nFrom: <{from_uri}>;tag=f1\nTo: <{ruri}>\nCall-ID: {call}\nCSeq: 1 {method}\nContact: <sip:c@{source}>\nContent-Length: 0\n\n")
}

/// The requests sent to `host`, parsed.
fn requests_to(out: &[Output], host: &str) -> Vec<Message> {
    sent(out).into_iter().filter(|(p, m)| m.is_request() && p.addr == addr(host)).map(|(_, m)| m).collect()
}

fn ruri_of(m: &Message) -> String {
    String::from_utf8_lossy(m.request_uri_bytes().unwrap()).into_owned()
}

fn statuses(out: &[Output]) -> Vec<(u16, String)> {
    sent(out)
        .iter()
        .filter_map(|(_, m)| Some((m.status()?, String::from_utf8_lossy(m.reason()?).into_owned())))
        .collect()
}

#[test]
fn a_next_hop_rule_rewrites_the_number_and_sends_it_there() {
    let uk = Rule {
        number: NumberRules { plus: Plus::ToPrefix("00".into()), ..Default::default() },
        ..Rule { user: prefix("+44"), ..Rule::new(to_gw()) }
    };
    let mut h = with_table(vec![uk], None);
    let out = h.send(ALICE, &request("INVITE", "sip:+441234@example.com", "sip:alice@example.com", ALICE, "nh1", ""));
    let at_gw = requests_to(&out, GW);
    assert_eq!(at_gw.len(), 1, "{out:?}");
    assert_eq!(ruri_of(&at_gw[0]), "sip:00441234@example.com");
    // RFC 3261 §19.1.6: a tel: URI reaches the gateway as a sip: URI with user=phone.
    let out = h.send(ALICE, &request("INVITE", "tel:+44-20-1234", "sip:alice@example.com", ALICE, "nh2", ""));
    assert_eq!(ruri_of(&requests_to(&out, GW)[0]), "sip:0044201234@192.0.2.50:5080;user=phone");
    // Other numbers keep the default routing: a served domain's user, unknown here.
    let out = h.send(ALICE, &request("INVITE", "sip:+331234@example.com", "sip:alice@example.com", ALICE, "nh3", ""));
    assert!(requests_to(&out, GW).is_empty());
    assert_eq!(statuses(&out).last().map(|s| s.0), Some(404));
}

#[test]
fn a_location_rule_turns_a_number_into_an_extension() {
    let did = Rule {
        number: NumberRules { strip: 9, ..Default::default() },
        ..Rule { user: prefix("+44207946"), ..Rule::new(Action::Location) }
    };
    let mut h = with_table(vec![did], None);
    h.register("1001", BOB, None);
    let out =
        h.send(ALICE, &request("INVITE", "sip:+442079461001@example.com", "sip:alice@example.com", ALICE, "l1", ""));
    let at_bob = requests_to(&out, BOB);
    assert_eq!(at_bob.len(), 1, "{out:?}");
    assert_eq!(ruri_of(&at_bob[0]), format!("sip:1001@{BOB}"), "the registered contact");
    let out =
        h.send(ALICE, &request("INVITE", "sip:+442079461002@example.com", "sip:alice@example.com", ALICE, "l2", ""));
    assert_eq!(statuses(&out).last().map(|s| s.0), Some(404), "extension 1002 is not registered");
}

#[test]
fn reject_and_request_uri_rules() {
    let rules = vec![
        Rule { user: prefix("+1900"), ..Rule::new(Action::Reject(403, "Premium Numbers Barred".into())) },
        Rule { methods: vec!["MESSAGE".into()], ..Rule::new(Action::RequestUri) },
    ];
    let mut h = with_table(rules, None);
    let out =
        h.send(ALICE, &request("INVITE", "sip:+19005550100@example.com", "sip:alice@example.com", ALICE, "r1", ""));
    assert_eq!(statuses(&out).last().cloned(), Some((403, "Premium Numbers Barred".to_owned())));
    // A MESSAGE to a served domain's user goes by its Request-URI here, not to the location
    // service (which would answer 404): to the host it names.
    let out = h.send(ALICE, &request("MESSAGE", "sip:bob@192.0.2.60:5090", "sip:alice@example.com", ALICE, "r2", ""));
    assert_eq!(requests_to(&out, "192.0.2.60:5090").len(), 1);
    let out = h.send(ALICE, &request("MESSAGE", "sip:bob@example.com", "sip:alice@example.com", ALICE, "r3", ""));
    assert!(out.iter().any(|o| matches!(o, Output::Resolve { .. })), "example.com is resolved by RFC 3263: {out:?}");
}

#[test]
fn in_dialog_requests_and_routes_do_not_consult_the_table() {
    let mut h = with_table(vec![Rule::new(to_gw())], None);
    // A BYE with a To tag goes to its remote target (RFC 3261 §12.2.1.1), not to the gateway.
    let bye = request("BYE", "sip:+441234@192.0.2.60:5090", "sip:alice@example.com", ALICE, "d1", "")
        .replace("To: <sip:+441234@192.0.2.60:5090>", "To: <sip:+441234@192.0.2.60:5090>;tag=t1");
    let out = h.send(ALICE, &bye);
    assert_eq!(requests_to(&out, "192.0.2.60:5090").len(), 1);
    assert!(requests_to(&out, GW).is_empty());
    // A request with a Route follows it.
    let routed = request(
        "INVITE",
        "sip:+441234@example.com",
        "sip:alice@example.com",
        ALICE,
        "d2",
        "Route: <sip:192.0.2.61:5090;lr>\n",
    );
    let out = h.send(ALICE, &routed);
    assert_eq!(requests_to(&out, "192.0.2.61:5090").len(), 1);
    assert!(requests_to(&out, GW).is_empty());
    // REGISTER for a served domain is the registrar's; OPTIONS to herald is herald's.
    h.register("bob", BOB, None);
    let out = h.send(ALICE, &request("OPTIONS", "sip:example.com", "sip:alice@example.com", ALICE, "d3", ""));
    assert_eq!(statuses(&out).last().map(|s| s.0), Some(200));
}

fn trunk_policy() -> AuthPolicy {
    AuthPolicy { trusted_peers: vec![PeerPrefix::parse("203.0.113.0/24").unwrap()], ..Default::default() }
}

#[test]
fn an_anonymous_caller_cannot_reach_a_gateway_through_a_rule() {
    let uk = || Rule { user: prefix("+44"), ..Rule::new(to_gw()) };
    let mut h = with_table(vec![uk()], Some(trunk_policy()));
    // From another domain to a number "of" a served domain: without the table this would be
    // an inbound call to a local user (no credentials); the rule sends it away: a relay.
    for (i, ruri) in ["sip:+441234@example.com", "sip:+441234@other.net", "tel:+441234"].iter().enumerate() {
        let out = h.send(CAROL, &request("INVITE", ruri, "sip:carol@other.org", CAROL, &format!("a{i}"), ""));
        assert!(requests_to(&out, GW).is_empty(), "{ruri}");
        assert_eq!(statuses(&out).last().map(|s| s.0), Some(407), "{ruri}");
    }
    assert_eq!(h.engine.transactions(), 0, "challenged statelessly");
    // From a trusted peer it goes.
    let out = h.send(TRUNK, &request("INVITE", "sip:+441234@example.com", "sip:x@carrier.net", TRUNK, "a5", ""));
    assert_eq!(requests_to(&out, GW).len(), 1);
    // A local user who authenticates goes.
    let ruri = "sip:+441234@example.com";
    let first = sent(&h.send(ALICE, &request("INVITE", ruri, "sip:alice@example.com", ALICE, "a6", "")));
    let nonce = nonce_of(std::str::from_utf8(first[0].1.get(HeaderName::ProxyAuthenticate).unwrap()).unwrap());
    let answer = client_answer(Algorithm::Md5, "alice", "example.com", "secret-a", &nonce, "INVITE", ruri, 1);
    let retry =
        request("INVITE", ruri, "sip:alice@example.com", ALICE, "a6", &format!("Proxy-Authorization: {answer}\n"))
            .replace("CSeq: 1", "CSeq: 2")
            .replace("z9hG4bK-a6", "z9hG4bK-a6-2");
    assert_eq!(requests_to(&h.send(ALICE, &retry), GW).len(), 1);
    // A rule naming a source that is not a trusted peer does not make it one.
    let from_carol = Rule { sources: vec![PeerPrefix::parse("198.51.100.0/24").unwrap()], ..uk() };
    let mut h = with_table(vec![from_carol], Some(trunk_policy()));
    let out = h.send(CAROL, &request("INVITE", "sip:+441234@example.com", "sip:carol@other.org", CAROL, "b1", ""));
    assert_eq!((requests_to(&out, GW).len(), statuses(&out).last().map(|s| s.0)), (0, Some(407)));
    // Unless the operator says so for the rule.
    let allowed =
        Rule { sources: vec![PeerPrefix::parse("198.51.100.0/24").unwrap()], allow_unauthenticated: true, ..uk() };
    let mut h = with_table(vec![allowed], Some(trunk_policy()));
    let out = h.send(CAROL, &request("INVITE", "sip:+441234@example.com", "sip:carol@other.org", CAROL, "b2", ""));
    assert_eq!(requests_to(&out, GW).len(), 1);
    // ... and only for what the rule matches: from another source no rule matches, and the
    // default routing takes it to the location service (no such user).
    let out = h.send(
        "192.0.2.99:5060",
        &request("INVITE", "sip:+441234@example.com", "sip:z@other.org", "192.0.2.99:5060", "b3", ""),
    );
    assert_eq!((requests_to(&out, GW).len(), statuses(&out).last().map(|s| s.0)), (0, Some(404)));
}

#[test]
fn rules_that_keep_a_request_here_need_no_credentials_and_authenticated_rules_need_them() {
    let rules = vec![
        Rule { authenticated: Some(true), ..Rule { user: prefix("+44"), ..Rule::new(to_gw()) } },
        Rule { user: prefix("+44"), ..Rule::new(Action::Reject(403, "Callers Must Authenticate".into())) },
        Rule { user: prefix("bo"), ..Rule::new(Action::Location) },
    ];
    let mut h = with_table(rules, Some(trunk_policy()));
    h.register_bob(BOB);
    // Inbound from another domain to a local user through a location rule: as today.
    let out = h.send(CAROL, &request("INVITE", "sip:bob@example.com", "sip:carol@other.org", CAROL, "k1", ""));
    assert_eq!(requests_to(&out, BOB).len(), 1);
    // The anonymous caller meets the reject rule: herald's answer, sent statelessly.
    let out = h.send(CAROL, &request("INVITE", "sip:+441234@example.com", "sip:carol@other.org", CAROL, "k2", ""));
    assert_eq!(statuses(&out).last().cloned(), Some((403, "Callers Must Authenticate".to_owned())));
    assert!(requests_to(&out, GW).is_empty());
}

impl Harness {
    /// Registers bob at `from`, answering the 401 with his password.
    fn register_bob(&mut self, from: &str) {
        let text = |cseq: u32, auth: &str| {
            format!("REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP {from};branch=z9hG4bKreg{cseq}\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r1\nTo: <sip:bob@example.com>\nCall-ID: reg-bob\nCSeq: {cseq} REGISTER\nContact: <sip:bob@{from}>\n{auth}Expires: 3600\nContent-Length: 0\n\n")
        };
        let first = sent(&self.send(from, &text(1, "")));
        let nonce = nonce_of(std::str::from_utf8(first[0].1.get(HeaderName::WwwAuthenticate).unwrap()).unwrap());
        let answer =
            client_answer(Algorithm::Md5, "bob", "example.com", "secret-b", &nonce, "REGISTER", "sip:example.com", 1);
        let ok = sent(&self.send(from, &text(2, &format!("Authorization: {answer}\n"))));
        assert_eq!(ok[0].1.status(), Some(200));
    }
}

#[test]
fn a_gateway_set_rule_tries_the_sets_destinations_with_the_rewritten_number() {
    use super::gateways::{harness_with as gateway_harness, GW1, GW2};
    use crate::gateways::Algorithm;
    let mut h = gateway_harness(Algorithm::Priority, &[GW1, GW2], |_| {});
    let rule = Rule {
        number: NumberRules { plus: Plus::ToPrefix("00".into()), ..Default::default() },
        ..Rule { user: prefix("+49"), ..Rule::new(Action::GatewaySet("pstn".into())) }
    };
    let cfg = EngineConfig { routing: Arc::new(RoutingTable::new(vec![rule])), ..(*h.engine.cfg).clone() };
    let registrar = Registrar::new(RegistrarConfig::default());
    h.engine = Engine::new(Arc::new(cfg), Arc::new(registrar.new_store()), registrar, 0);
    let out = h.send(ALICE, &request("INVITE", "sip:+4930123@example.com", "sip:alice@example.com", ALICE, "g1", ""));
    let first = requests_to(&out, GW1);
    assert_eq!(first.len(), 1, "{out:?}");
    assert!(requests_to(&out, GW2).is_empty(), "one attempt at a time (failover: tests_gateways)");
    assert_eq!(ruri_of(&first[0]), "sip:004930123@example.com");
    // A tel: URI reaches each gateway as a sip: URI of that gateway's host (RFC 3261 §19.1.6).
    let out = h.send(ALICE, &request("INVITE", "tel:+4930123", "sip:alice@example.com", ALICE, "g2", ""));
    assert_eq!(ruri_of(&requests_to(&out, GW1)[0]), format!("sip:004930123@{GW1};user=phone"));
}

#[test]
fn stateless_mode_follows_the_table_too() {
    let uk = Rule {
        number: NumberRules { plus: Plus::ToPrefix("00".into()), ..Default::default() },
        ..Rule { user: prefix("+44"), ..Rule::new(to_gw()) }
    };
    let cfg = EngineConfig { routing: Arc::new(RoutingTable::new(vec![uk])), ..config(Forking::Parallel, true) };
    let mut h = Harness::from_config(cfg);
    let out = h.send(ALICE, &request("INVITE", "sip:+441234@example.com", "sip:alice@example.com", ALICE, "st1", ""));
    let at_gw = requests_to(&out, GW);
    assert_eq!(at_gw.len(), 1, "{out:?}");
    assert_eq!(ruri_of(&at_gw[0]), "sip:00441234@example.com");
    assert_eq!(h.engine.transactions(), 0, "no state");
}
