//! Routing-table lookup (issue 18: "a lookup must stay well under 1 µs with 10,000 prefix
//! rules"). The table: 10,000 user-prefix rules of 5 to 9 digits after `+` (a national dial
//! plan's worth), a regular-expression rule in their middle and a domain rule at the end.
//! Measured: the lookup alone (`Query` in, rule out) for a number whose longest prefix matches,
//! for one no prefix matches (the regex and the domain rule are tested), and the whole decision
//! the engine makes per request (`routing::decide`: served domain, user extraction from the
//! parsed Request-URI, lookup).
//!
//! Run: `cargo bench -p herald-core --bench routing -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use herald_core::proxy::Identity;
use herald_core::routing::{decide, Action, DomainMatch, Query, Request, RoutingTable, Rule, UserMatch};
use herald_sip::uri::Uri;
use herald_sip::Method;
use std::net::IpAddr;

/// 10,000 distinct prefixes `+D…` of 5 to 9 digits, from a fixed linear congruential sequence.
fn prefixes() -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while seen.len() < 10_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let len = 5 + (x >> 60) as usize % 5;
        let digits: String = (0..len).map(|i| char::from(b'0' + ((x >> (4 * i)) % 10) as u8)).collect();
        seen.insert(format!("+{digits}"));
    }
    let mut v: Vec<String> = seen.into_iter().collect();
    v.sort();
    v
}

fn table() -> (RoutingTable, Vec<String>) {
    let prefixes = prefixes();
    let mut rules: Vec<Rule> = prefixes
        .iter()
        .enumerate()
        .map(|(i, p)| Rule {
            user: Some(UserMatch::Prefix(vec![p.clone()])),
            ..Rule::new(Action::GatewaySet(format!("set{}", i % 16)))
        })
        .collect();
    let regex = Rule { user: Some(UserMatch::regex("^[0-9]{4}$").unwrap()), ..Rule::new(Action::Location) };
    rules.insert(5_000, regex);
    rules.push(Rule {
        domains: vec![DomainMatch::parse("*.carrier.example").unwrap()],
        ..Rule::new(Action::NextHop("sip:sbc.carrier.example".into()))
    });
    (RoutingTable::new(rules), prefixes)
}

fn query<'a>(user: &'a str, domain: &'a str) -> Query<'a> {
    Query {
        user: Some(user),
        domain: Some(domain),
        method: "INVITE",
        source: IpAddr::from([192, 0, 2, 1]),
        authenticated: true,
    }
}

fn bench_routing(c: &mut Criterion) {
    let (table, prefixes) = table();
    // A number under the longest prefix of the table, and one that no prefix holds.
    let deep = prefixes.iter().max_by_key(|p| p.len()).unwrap().clone() + "123456";
    let miss = (0..10)
        .map(|d| format!("+{}", d.to_string().repeat(11)))
        .find(|m| !prefixes.iter().any(|p| m.starts_with(p.as_str())))
        .expect("a number no prefix holds");
    assert!(table.lookup(&query(&deep, "example.com")).is_some());
    assert!(table.lookup(&query(&miss, "example.com")).is_none());
    assert_eq!(table.lookup(&query(&miss, "a.carrier.example")).map(|m| m.0), Some(10_001));

    let mut g = c.benchmark_group("routing_lookup_10k_prefixes");
    g.bench_function("longest_prefix_hit", |b| {
        b.iter(|| black_box(table.lookup(black_box(&query(&deep, "example.com")))))
    });
    g.bench_function("no_prefix_regex_and_domain_tested", |b| {
        b.iter(|| black_box(table.lookup(black_box(&query(&miss, "example.com")))))
    });
    g.bench_function("domain_rule_hit", |b| {
        b.iter(|| black_box(table.lookup(black_box(&query(&miss, "a.carrier.example")))))
    });
    let identity = Identity::new(vec!["192.0.2.10:5060".parse().unwrap()], ["example.com".to_owned()]);
    let ruri_text = format!("sip:{deep}@example.com;user=phone");
    let req = Request {
        method: Some(Method::Invite),
        in_dialog: false,
        source: IpAddr::from([192, 0, 2, 1]),
        authenticated: true,
    };
    g.bench_function("decide_from_parsed_request_uri", |b| {
        b.iter(|| {
            let ruri = Uri::parse(black_box(ruri_text.as_bytes())).unwrap();
            black_box(matches!(decide(&table, &identity, &ruri, req), herald_core::routing::Decision::Rule(..)))
        })
    });
    g.finish();
}

criterion_group!(benches, bench_routing);
criterion_main!(benches);
