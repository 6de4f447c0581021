//! `[[route]]` from TOML: rules reach the core's table in order, and every mistake is reported
//! with file, line and key.

use super::*;
use crate::config::Config;
use herald_core::routing::Query;

fn error(text: &str) -> String {
    Config::from_toml(text, "herald.toml").expect_err("a bad rule").to_string()
}

#[test]
fn rules_reach_the_table_in_order() {
    let c = Config::from_toml(
        r#"
[[route]]
name = "uk"
user_prefix = ["+44", "0044"]
domain = "*.example.com"
methods = ["invite"]
source = "10.0.0.0/8"
authenticated = true
replace_plus_with = "00"
strip = 1
prepend = "9"
next_hop = "sip:gw.example.net:5080;transport=tcp"

[[route]]
user_regex = "^[0-9]{4}$"
location = true

[[route]]
reject = 403
"#,
        "herald.toml",
    )
    .unwrap();
    let t = table(&c.route, &c.gateway_set);
    let r = &t.rules()[0];
    assert_eq!(r.name.as_deref(), Some("uk"));
    assert_eq!(r.methods, vec!["INVITE".to_string()]);
    assert_eq!(r.number.plus, Plus::ToPrefix("00".into()));
    assert_eq!((r.number.strip, r.number.prepend.as_str()), (1, "9"));
    assert_eq!(r.action, Action::NextHop("sip:gw.example.net:5080;transport=tcp".into()));
    assert_eq!(t.rules()[2].action, Action::Reject(403, "Forbidden".into()));
    let q = |user, domain, source: &str, authenticated| Query {
        user: Some(user),
        domain: Some(domain),
        method: "INVITE",
        source: source.parse().unwrap(),
        authenticated,
    };
    assert_eq!(t.lookup(&q("00441", "a.example.com", "10.1.1.1", true)).map(|m| m.0), Some(0));
    assert_eq!(t.lookup(&q("00441", "a.example.com", "10.1.1.1", false)).map(|m| m.0), Some(2));
    assert_eq!(t.lookup(&q("1234", "b", "192.0.2.1", false)).map(|m| m.0), Some(1));
}

#[test]
fn bad_rules_are_reported_with_file_line_and_key() {
    let e =
        error("[[route]]\nuser_prefix = \"1\"\nlocation = true\n\n[[route]]\nuser_regex = \"^(12\"\nlocation = true\n");
    assert!(e.starts_with("herald.toml:6: key 'route[1].user_regex': not a regular expression"), "{e}");
    let e = error("[[route]]\nname = \"a\"\nlocation = true\n[[route]]\nname = \"a\"\nreject = 404\n");
    assert_eq!(e, "herald.toml:5: key 'route[1].name': duplicate rule name 'a' (route[0] has it too)");
    let e = error("[[route]]\nuser_prefix = \"+44\"\ngateway_set = \"uk\"\n");
    assert_eq!(
        e,
        "herald.toml:3: key 'route[0].gateway_set': unknown gateway set 'uk' (no [[gateway_set]] is configured)"
    );
    let e = error("[[route]]\nuser = \"a\"\nuser_prefix = \"b\"\nlocation = true\n");
    assert!(
        e.starts_with("herald.toml:3: key 'route[0].user_prefix': conflicting matchers: user and user_prefix"),
        "{e}"
    );
    let e = error("[[route]]\nlocation = true\nreject = 403\n");
    assert!(e.starts_with("herald.toml:3: key 'route[0].reject': conflicting actions"), "{e}");
    let e = error("[[route]]\nsource = [\"10.0.0.0/33\"]\nlocation = true\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].source': '10.0.0.0/33'"), "{e}");
    let e = error("[[route]]\nuser_prefix = \"\"\nlocation = true\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].user_prefix': must not be empty"), "{e}");
    let e = error("[[route]]\nname = \"x\"\n");
    assert!(e.starts_with("herald.toml:1: key 'route[0].location': the rule has no action"), "{e}");
    let e = error("[[route]]\nnext_hop = \"gw.example.net\"\n");
    assert!(
        e.starts_with("herald.toml:2: key 'route[0].next_hop': 'gw.example.net' is not a sip: or sips: URI"),
        "{e}"
    );
    let e = error("[[route]]\nreplace_plus_with = \"00\"\nreplace_with_plus = \"00\"\nlocation = true\n");
    assert!(e.starts_with("herald.toml:3: key 'route[0].replace_with_plus': conflicts"), "{e}");
    let e = error("[[route]]\nreject = 302\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].reject': 302 is not a final error status"), "{e}");
    let e = error("[[route]]\ndomain = \"a b\"\nlocation = true\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].domain'"), "{e}");
    let e = error("[[route]]\nuser_prefix = 44\nlocation = true\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].user_prefix': expected a string or a list of strings"), "{e}");
    let e = error("[[route]]\nuser_prefx = \"44\"\nlocation = true\n");
    assert!(e.starts_with("herald.toml:2: key 'route[0].user_prefx': unknown field"), "{e}");
}
