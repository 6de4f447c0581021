//! `herald route check` as an operator runs it: the binary, a configuration file, the rule a
//! request matches, its rewritten Request-URI and where it would go (text and `--json`), and
//! the configuration errors of `[[route]]` reported with file, line and key.

mod common;

use common::{routes, test_dir};
use serde_json::Value;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The configuration the checks run against: premium, uk, an unnamed DID rule, trunk-only.
fn config_text() -> String {
    let premium_and_uk = routes::premium_and_uk("sip:gw.example.net:5080;transport=tcp");
    format!(
        r#"domains = ["example.com"]

[[listen]]
address = "127.0.0.1:5060"

{premium_and_uk}
[[route]]
user_regex = "^\\+4930123[0-9]{{4}}$"
strip = 8
location = true

[[route]]
name = "trunk-only"
user_prefix = "+33"
source = "192.0.2.0/24"
authenticated = false
next_hop = "sip:192.0.2.99"
"#
    )
}

fn herald(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald")).args(args).output().expect("herald runs")
}

/// `herald serve --config CONFIG`: its exit status and stderr; killed after 10 s.
fn serve(config: &Path) -> (Option<i32>, String) {
    let err = config.with_extension("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .expect("herald runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&err).unwrap_or_default())
}

fn check(config: &Path, extra: &[&str]) -> (String, Value) {
    let mut args = vec!["route", "check"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--config", config.to_str().unwrap()]);
    let text = herald(&args);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    args.push("--json");
    let json = herald(&args);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    (String::from_utf8(text.stdout).unwrap(), serde_json::from_slice(&json.stdout).unwrap())
}

#[test]
fn route_check_says_which_rule_matches_and_where_the_request_goes() {
    let dir = test_dir("route_check");
    let config = dir.join("herald.toml");
    std::fs::write(&config, config_text()).unwrap();

    let (text, json) = check(&config, &["INVITE sip:+441234@example.com"]);
    assert_eq!(
        text,
        "rule: route[1] \"uk\"\nrequest-uri: sip:00441234@example.com\n\
         goes to: next hop sip:gw.example.net:5080;transport=tcp\n\
         unauthenticated callers: challenged (a relay: it leaves herald), unless from [auth] trusted_peers or with \
         allow_relay\n"
    );
    assert_eq!(json["relay"], true);
    assert_eq!(json["rule"]["index"], 1);
    assert_eq!(json["rule"]["name"], "uk");
    assert_eq!(json["action"], "next_hop");
    assert_eq!(json["request_uri"], "sip:00441234@example.com");

    // A tel: URI becomes a sip: URI of the next hop's host with user=phone.
    let (_, json) = check(&config, &["INVITE tel:+44-20-1234"]);
    assert_eq!(json["request_uri"], "sip:0044201234@gw.example.net:5080;user=phone");

    let (text, json) = check(&config, &["INVITE sip:+19005550100@example.com"]);
    assert!(text.contains("goes to: rejected: 403 Premium Numbers Barred\n"), "{text}");
    assert_eq!((json["status"].as_u64(), json["reason"].as_str()), (Some(403), Some("Premium Numbers Barred")));

    // An unnamed rule; a DID becomes an extension of the location service.
    let (text, json) = check(&config, &["INVITE sip:+49301231001@example.com"]);
    assert!(text.starts_with("rule: route[2]\nrequest-uri: sip:1001@example.com\n"), "{text}");
    assert_eq!(json["action"], "location");
    assert_eq!(json["rule"]["name"], Value::Null);

    // Source and authentication matchers follow --from and --authenticated.
    let (_, json) = check(&config, &["INVITE sip:+33123@example.com", "--from", "192.0.2.7"]);
    assert_eq!((json["rule"]["index"].as_u64(), json["next_hop"].as_str()), (Some(3), Some("sip:192.0.2.99")));
    let (_, json) = check(&config, &["INVITE sip:+33123@example.com", "--from", "192.0.2.7", "--authenticated"]);
    assert_eq!((json["rule"].clone(), json["action"].as_str()), (Value::Null, Some("location")));
    let (text, _) = check(&config, &["INVITE sip:+33123@example.com", "--from", "198.51.100.1"]);
    assert!(text.starts_with("rule: none (herald's default routing)\n"), "{text}");
    assert!(text.contains("goes to: the location service (registered contacts)\n"), "{text}");
    assert!(text.ends_with("unauthenticated callers: no challenge for where it goes (it stays with herald, or its rule has allow_unauthenticated)\n"), "{text}");

    // Herald's own roads: the registrar, OPTIONS to herald, a foreign domain.
    let (_, json) = check(&config, &["REGISTER sip:example.com"]);
    assert_eq!(json["action"], "registrar");
    let (_, json) = check(&config, &["OPTIONS sip:127.0.0.1:5060"]);
    assert_eq!((json["action"].as_str(), json["status"].as_u64()), (Some("herald"), Some(200)));
    let (_, json) = check(&config, &["MESSAGE sip:bob@other.org"]);
    assert_eq!((json["rule"].clone(), json["action"].as_str()), (Value::Null, Some("request_uri")));

    // A gateway set: its destinations in the order its algorithm tries them (priority here),
    // a tel: number converted for each destination's host.
    let with_sets = dir.join("gateways.toml");
    let sets = "\n[[route]]\nname = \"de\"\nuser_prefix = \"+49\"\ngateway_set = \"pstn\"\n\n\
                [[gateway_set]]\nname = \"pstn\"\nalgorithm = \"priority\"\ndestinations = [\n\
                { uri = \"sip:192.0.2.11:5060\", priority = 2 },\n{ uri = \"sip:192.0.2.10\", priority = 1 },\n]\n";
    std::fs::write(&with_sets, format!("{}{sets}", config_text())).unwrap();
    let (text, json) = check(&with_sets, &["INVITE tel:+49-30-123"]);
    assert_eq!(json["gateway_set"], "pstn");
    let dests: Vec<(String, String)> = json["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["uri"].as_str().unwrap().to_owned(), d["request_uri"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        dests,
        [
            ("sip:192.0.2.10".to_owned(), "sip:+4930123@192.0.2.10;user=phone".to_owned()),
            ("sip:192.0.2.11:5060".to_owned(), "sip:+4930123@192.0.2.11:5060;user=phone".to_owned()),
        ]
    );
    assert!(text.contains("goes to: gateway set \"pstn\"\n  1. sip:192.0.2.10 (request-uri sip:+4930123@192.0.2.10;user=phone)\n  2. sip:192.0.2.11:5060"), "{text}");

    // Not a request: a usage error.
    let out = herald(&["route", "check", "sip:bob@example.com", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give the request as 'METHOD URI'"));
}

#[test]
fn bad_route_configurations_are_reported_with_file_line_and_key() {
    let dir = test_dir("route_check_errors");
    let cases = [
        (
            "[[route]]\nuser_prefix = \"+44\"\ngateway_set = \"uk\"\n",
            ":3: key 'route[0].gateway_set': unknown gateway set 'uk'",
        ),
        (
            "[[route]]\nuser_prefix = \"1\"\nlocation = true\n\n[[route]]\nuser_regex = \"^(12\"\nlocation = true\n",
            ":6: key 'route[1].user_regex': not a regular expression",
        ),
        (
            "[[route]]\nname = \"a\"\nlocation = true\n[[route]]\nname = \"a\"\nreject = 404\n",
            ":5: key 'route[1].name': duplicate rule name 'a' (route[0] has it too)",
        ),
        ("[[route]]\nsource = \"10.0.0.0/40\"\nlocation = true\n", ":2: key 'route[0].source': '10.0.0.0/40'"),
    ];
    for (i, (toml, expected)) in cases.iter().enumerate() {
        let config = dir.join(format!("bad{i}.toml"));
        std::fs::write(&config, toml).unwrap();
        let out = herald(&["route", "check", "INVITE sip:x@example.com", "--config", config.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("{}{expected}", config.display())), "{err}");
        // `herald serve` refuses it the same way (killed, and the test failed, if it started).
        let (code, err) = serve(&config);
        assert_eq!(code, Some(2), "{toml}");
        assert!(err.contains(expected), "{err}");
    }
}
