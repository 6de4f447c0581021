use super::*;
use crate::auth::PeerPrefix;
use herald_sip::uri::Uri;
use regex::Regex;
use std::net::IpAddr;

fn q<'a>(user: Option<&'a str>, domain: Option<&'a str>) -> Query<'a> {
    Query { user, domain, method: "INVITE", source: "192.0.2.1".parse().unwrap(), authenticated: false }
}

fn rule(user: Option<UserMatch>, action: Action) -> Rule {
    Rule { user, ..Rule::new(action) }
}

fn prefix(p: &str) -> Option<UserMatch> {
    Some(UserMatch::Prefix(vec![p.to_string()]))
}

fn gw(name: &str) -> Action {
    Action::GatewaySet(name.to_string())
}

fn matched(t: &RoutingTable, q: &Query<'_>) -> Option<usize> {
    t.lookup(q).map(|(i, _)| i)
}

#[test]
fn the_empty_table_matches_nothing() {
    assert_eq!(matched(&RoutingTable::default(), &q(Some("1234"), Some("example.com"))), None);
}

#[test]
fn user_matchers_exact_prefix_regex() {
    let t = RoutingTable::new(vec![
        rule(Some(UserMatch::Exact("alice".into())), Action::Location),
        rule(prefix("+44"), gw("uk")),
        rule(Some(UserMatch::Regex(Regex::new("^\\+1[0-9]{10}$").unwrap())), gw("us")),
    ]);
    assert_eq!(matched(&t, &q(Some("alice"), None)), Some(0));
    assert_eq!(matched(&t, &q(Some("alicex"), None)), None, "exact is exact");
    assert_eq!(matched(&t, &q(Some("Alice"), None)), None, "user parts compare case-sensitively");
    assert_eq!(matched(&t, &q(Some("+441234"), None)), Some(1));
    assert_eq!(matched(&t, &q(Some("+44"), None)), Some(1), "the prefix itself");
    assert_eq!(matched(&t, &q(Some("+4"), None)), None);
    assert_eq!(matched(&t, &q(Some("+12025550123"), None)), Some(2));
    assert_eq!(matched(&t, &q(Some("+120255501234"), None)), None, "anchored regex");
    assert_eq!(matched(&t, &q(None, Some("example.com"))), None, "no user: no user matcher holds");
}

#[test]
fn first_match_wins_across_kinds() {
    // A regex rule before a longer prefix rule wins; a prefix rule before a regex wins.
    let t = RoutingTable::new(vec![
        rule(prefix("+4420"), Action::Reject(403, "London is closed".into())),
        rule(Some(UserMatch::Regex(Regex::new("^\\+44").unwrap())), gw("uk-regex")),
        rule(prefix("+447"), gw("uk-mobile")),
        rule(prefix("+44"), gw("uk")),
        rule(None, Action::RequestUri),
    ]);
    assert_eq!(matched(&t, &q(Some("+442012"), None)), Some(0));
    assert_eq!(matched(&t, &q(Some("+447700"), None)), Some(1), "the regex comes before the longer prefix");
    assert_eq!(matched(&t, &q(Some("+33"), None)), Some(4), "the catch-all");
    assert_eq!(matched(&t, &q(None, None)), Some(4));
    // A longer prefix later in the table does not beat a shorter one earlier.
    let t = RoutingTable::new(vec![rule(prefix("+44"), gw("uk")), rule(prefix("+447"), gw("mobile"))]);
    assert_eq!(matched(&t, &q(Some("+447700"), None)), Some(0));
}

#[test]
fn a_candidate_whose_other_matchers_fail_gives_way_to_the_next() {
    let t = RoutingTable::new(vec![
        Rule { methods: vec!["MESSAGE".into()], ..rule(prefix("+44"), gw("sms")) },
        Rule { authenticated: Some(true), ..rule(prefix("+44"), gw("uk")) },
        rule(prefix("+4"), Action::Reject(403, "Forbidden".into())),
    ]);
    assert_eq!(matched(&t, &q(Some("+441"), None)), Some(2));
    assert_eq!(matched(&t, &Query { authenticated: true, ..q(Some("+441"), None) }), Some(1));
    assert_eq!(matched(&t, &Query { method: "MESSAGE", ..q(Some("+441"), None) }), Some(0));
}

#[test]
fn domain_method_source_and_authenticated_matchers() {
    let sources = vec![PeerPrefix::parse("10.0.0.0/8").unwrap(), PeerPrefix::parse("2001:db8::/32").unwrap()];
    let t = RoutingTable::new(vec![
        Rule { domains: vec![DomainMatch::parse("Example.COM").unwrap()], ..Rule::new(Action::Location) },
        Rule { domains: vec![DomainMatch::parse("*.carrier.net").unwrap()], ..Rule::new(gw("carrier")) },
        Rule { sources, ..Rule::new(Action::NextHop("sip:core.internal".into())) },
        Rule { methods: vec!["MESSAGE".into(), "OPTIONS".into()], ..Rule::new(Action::Reject(405, "No".into())) },
        Rule { authenticated: Some(true), ..Rule::new(Action::RequestUri) },
    ]);
    let at = |domain: Option<&str>, method: &str, source: &str, authenticated: bool| {
        let source: IpAddr = source.parse().unwrap();
        matched(&t, &Query { user: Some("x"), domain, method, source, authenticated })
    };
    assert_eq!(at(Some("example.com"), "INVITE", "192.0.2.1", false), Some(0));
    assert_eq!(at(Some("a.carrier.net"), "INVITE", "192.0.2.1", false), Some(1));
    assert_eq!(at(Some("carrier.net"), "INVITE", "192.0.2.1", false), None, "*.x holds for subdomains only");
    assert_eq!(at(Some("xcarrier.net"), "INVITE", "192.0.2.1", false), None);
    assert_eq!(at(None, "INVITE", "10.1.2.3", false), Some(2), "a tel: URI has no domain");
    assert_eq!(at(Some("other.org"), "INVITE", "2001:db8::5", false), Some(2));
    assert_eq!(at(Some("other.org"), "INVITE", "::ffff:10.9.9.9", false), Some(2), "IPv4-mapped");
    assert_eq!(at(Some("other.org"), "MESSAGE", "192.0.2.1", false), Some(3));
    assert_eq!(at(Some("other.org"), "INVITE", "192.0.2.1", true), Some(4));
    assert_eq!(at(Some("other.org"), "INVITE", "192.0.2.1", false), None);
    assert!(DomainMatch::parse("bad domain").is_err() && DomainMatch::parse("*.").is_err());
}

#[test]
fn ten_thousand_prefixes_stay_exact() {
    let rules: Vec<Rule> = (0..10_000).map(|i| rule(prefix(&format!("+{}", 100_000 + i * 7)), gw("x"))).collect();
    let t = RoutingTable::new(rules);
    assert_eq!(matched(&t, &q(Some("+1000079999"), None)), Some(1));
    assert_eq!(matched(&t, &q(Some("+100006"), None)), None);
    assert_eq!(matched(&t, &q(Some(&format!("+{}55", 100_000 + 9_999 * 7)), None)), Some(9_999));
}

#[test]
fn number_rules() {
    let n = |plus: Plus, strip: usize, prepend: &str| NumberRules { plus, strip, prepend: prepend.into() };
    assert_eq!(n(Plus::ToPrefix("00".into()), 0, "").apply("+441234"), "00441234");
    assert_eq!(n(Plus::ToPrefix("00".into()), 0, "").apply("01234"), "01234", "no + to replace");
    assert_eq!(n(Plus::FromPrefix("00".into()), 0, "").apply("00441234"), "+441234");
    assert_eq!(n(Plus::FromPrefix("00".into()), 0, "").apply("0441234"), "0441234");
    assert_eq!(n(Plus::Keep, 3, "0").apply("+441234"), "01234", "national form of +44");
    assert_eq!(n(Plus::Keep, 1, "+44").apply("01234"), "+441234", "and back");
    assert_eq!(n(Plus::ToPrefix("00".into()), 2, "9").apply("+441234"), "9441234", "plus first, then strip");
    assert_eq!(n(Plus::Keep, 99, "x").apply("123"), "x", "stripping more than there is");
    assert!(NumberRules::default().is_identity());
}

fn uri(s: &str) -> Uri<'_> {
    Uri::parse(s.as_bytes()).unwrap()
}

#[test]
fn match_user_of_sip_and_tel() {
    assert_eq!(match_user(&uri("sip:alice@example.com")).as_deref(), Some("alice"));
    assert_eq!(match_user(&uri("sip:%2B44@example.com")).as_deref(), Some("+44"), "unescaped");
    assert_eq!(match_user(&uri("tel:+1-201-555-0123")).as_deref(), Some("+12015550123"), "RFC 3966 §5.1.1");
    assert_eq!(
        match_user(&uri("sip:+1-201-555-0123;isub=7@gw.example.com;user=phone")).as_deref(),
        Some("+12015550123")
    );
    assert_eq!(match_user(&uri("sip:example.com")), None);
}

#[test]
fn rewriting_the_request_uri() {
    let to00 = NumberRules { plus: Plus::ToPrefix("00".into()), ..Default::default() };
    let none = NumberRules::default();
    assert_eq!(
        rewrite(&uri("sip:+441234@example.com;transport=tcp"), &to00, None).as_deref(),
        Some("sip:00441234@example.com;transport=tcp")
    );
    assert_eq!(rewrite(&uri("sip:+441234@example.com"), &none, Some("gw")), None, "nothing to do");
    let strip1 = NumberRules { strip: 1, ..Default::default() };
    assert_eq!(rewrite(&uri("sips:9u:pw@example.com"), &strip1, None).as_deref(), Some("sips:u:pw@example.com"));
    // RFC 3261 §19.1.6: a tel: URI towards a gateway, the + of a global number kept.
    assert_eq!(
        rewrite(&uri("tel:+1-201-555-0123"), &none, Some("gw.example.net:5080")).as_deref(),
        Some("sip:+12015550123@gw.example.net:5080;user=phone")
    );
    assert_eq!(
        rewrite(&uri("tel:+44123;isub=7"), &to00, Some("gw")).as_deref(),
        Some("sip:0044123;isub=7@gw;user=phone")
    );
    assert_eq!(rewrite(&uri("tel:+44123"), &none, None), None, "no host: it stays a tel: URI");
    assert_eq!(rewrite(&uri("tel:+44123"), &to00, None).as_deref(), Some("tel:0044123"));
    assert_eq!(
        rewrite(&uri("sip:+44-123;isub=7@gw;user=phone"), &to00, None).as_deref(),
        Some("sip:0044123;isub=7@gw;user=phone")
    );
    let odd = NumberRules { prepend: "a b".into(), ..Default::default() };
    assert_eq!(rewrite(&uri("sip:1@h"), &odd, None).as_deref(), Some("sip:a%20b1@h"), "escaped");
}
