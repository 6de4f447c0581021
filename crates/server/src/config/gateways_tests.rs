use super::*;
use crate::config::{Config, ConfigError};

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "gw.toml")
}

#[track_caller]
fn assert_error(text: &str, line: usize, key: &str, needle: &str) {
    let e = load(text).expect_err("config should be refused");
    assert_eq!((e.file.as_str(), e.line, e.key.as_str()), ("gw.toml", line, key), "{e}");
    assert!(e.message.contains(needle), "message {:?} lacks {needle:?}", e.message);
    assert!(e.to_string().starts_with(&format!("gw.toml:{line}: key '{key}': ")), "{e}");
}

const TWO: &str = r#"
[[gateway_set]]
name = "pstn"
destinations = [{ uri = "sip:127.0.0.1:5071" }, { uri = "sip:127.0.0.1:5072" }]
"#;

#[test]
fn a_minimal_set_takes_the_defaults() {
    let c = load(TWO).unwrap();
    let s = &c.gateway_set[0];
    assert_eq!(s.name, "pstn");
    assert_eq!(s.algorithm, Algorithm::RoundRobin);
    assert_eq!(s.destinations.len(), 2);
    assert_eq!((s.destinations[0].weight, s.destinations[0].priority), (1, 0));
    assert_eq!(s.retry_after_s, 30);
    assert_eq!(s.failover, Failover::default());
    assert_eq!(s.failover.statuses, vec![408, 503]);
    assert_eq!(s.failover.max_attempts, 3);
    assert_eq!(s.health, Health { down_after_probes: 3, down_after_calls: 5, up_after_probes: 2 });
    assert!(s.probing.enabled);
    assert_eq!((s.probing.interval(), s.probing.timeout()), (Duration::from_secs(10), Duration::from_secs(5)));
    assert!(Config::default().gateway_set.is_empty());
}

#[test]
fn every_key_can_be_set() {
    let c = load(
        r#"
[[gateway_set]]
name = "media.eu-1"
algorithm = "weighted"
retry_after_s = 0
[[gateway_set.destinations]]
uri = "sip:gw1.example.net;transport=tcp"
weight = 3
priority = 2
[[gateway_set.destinations]]
uri = "sips:[2001:db8::1]:5081"
[gateway_set.failover]
statuses = [503, 480]
max_attempts = 1
attempt_timeout_ms = 1500
[gateway_set.health]
down_after_probes = 1
down_after_calls = 2
up_after_probes = 4
[gateway_set.probing]
enabled = false
interval_ms = 200
timeout_ms = 200
failed_statuses = [503]
"#,
    )
    .unwrap();
    let s = &c.gateway_set[0];
    assert_eq!((s.name.as_str(), s.algorithm, s.retry_after_s), ("media.eu-1", Algorithm::Weighted, 0));
    assert_eq!(
        s.destinations[0],
        Destination { uri: "sip:gw1.example.net;transport=tcp".into(), weight: 3, priority: 2 }
    );
    assert_eq!(s.failover, Failover { statuses: vec![503, 480], max_attempts: 1, attempt_timeout_ms: Some(1500) });
    assert_eq!(s.health, Health { down_after_probes: 1, down_after_calls: 2, up_after_probes: 4 });
    assert_eq!(s.probing, Probing { enabled: false, interval_ms: 200, timeout_ms: 200, failed_statuses: vec![503] });
    assert!(s.probing.alive(404) && s.probing.alive(408) && !s.probing.alive(503));
}

#[test]
fn every_algorithm_is_spelled_as_documented() {
    for a in [
        Algorithm::RoundRobin,
        Algorithm::Weighted,
        Algorithm::HashCallId,
        Algorithm::HashFromUser,
        Algorithm::Priority,
        Algorithm::LeastCalls,
    ] {
        let text = TWO.replace("name = \"pstn\"", &format!("name = \"pstn\"\nalgorithm = \"{}\"", a.as_str()));
        assert_eq!(load(&text).unwrap().gateway_set[0].algorithm, a);
    }
}

#[test]
fn any_reply_but_408_and_503_proves_a_destination_alive() {
    let p = Probing::default();
    for s in [200, 404, 405, 483, 500] {
        assert!(p.alive(s), "{s}");
    }
    assert!(!p.alive(408) && !p.alive(503));
}

#[test]
fn an_unknown_algorithm_is_named_with_its_line() {
    assert_error(
        "[[gateway_set]]\nname = \"a\"\nalgorithm = \"random\"\ndestinations = [{ uri = \"sip:10.0.0.1\" }]\n",
        3,
        "gateway_set[0].algorithm",
        "unknown variant `random`",
    );
}

#[test]
fn a_duplicate_set_name_is_refused_at_the_second() {
    let text = format!("{TWO}{}", TWO.replace("5071", "5073").replace("5072", "5074"));
    assert_error(&text, 7, "gateway_set[1].name", "already defined by gateway_set[0]");
}

#[test]
fn a_bad_set_name_is_refused() {
    assert_error(&TWO.replace("\"pstn\"", "\"p s\""), 3, "gateway_set[0].name", "not a set name");
    assert_error(&TWO.replace("\"pstn\"", "\"\""), 3, "gateway_set[0].name", "not a set name");
}

#[test]
fn a_duplicate_destination_is_refused_whatever_its_spelling() {
    assert_error(
        "[[gateway_set]]\nname = \"a\"\n[[gateway_set.destinations]]\nuri = \"sip:GW.example.net\"\n\
         [[gateway_set.destinations]]\nuri = \"sip:gw.example.net:5060;transport=UDP\"\n",
        6,
        "gateway_set[0].destinations[1].uri",
        "same destination as destinations[0]",
    );
    // Another port or transport is another destination.
    load("[[gateway_set]]\nname = \"a\"\ndestinations = [{ uri = \"sip:gw\" }, { uri = \"sip:gw;transport=tcp\" }]\n")
        .unwrap();
}

#[test]
fn bad_uris_are_refused_with_the_reason() {
    let one = |uri: &str| format!("[[gateway_set]]\nname = \"a\"\n[[gateway_set.destinations]]\nuri = \"{uri}\"\n");
    let key = "gateway_set[0].destinations[0].uri";
    assert_error(&one("10.0.0.1:5060"), 4, key, "not a sip or sips URI");
    assert_error(&one("tel:+441234"), 4, key, "not a sip or sips URI");
    assert_error(&one("sip:bob@10.0.0.1"), 4, key, "has a user part");
    assert_error(&one("sip:10.0.0.1?Subject=x"), 4, key, "URI headers");
    assert_error(&one("sip:10.0.0.1;transport=sctp"), 4, key, "transport 'sctp'");
    assert_error(&one("sips:10.0.0.1;transport=udp"), 4, key, "TLS only");
    assert_error(&one("sip:10.0.0.1:99999"), 4, key, "not a sip or sips URI");
}

#[test]
fn a_set_without_destinations_is_refused() {
    assert_error(
        "[[gateway_set]]\nname = \"a\"\ndestinations = []\n",
        3,
        "gateway_set[0].destinations",
        "at least one",
    );
    assert_error("[[gateway_set]]\nname = \"a\"\n", 1, "gateway_set[0]", "missing field `destinations`");
}

#[test]
fn weight_zero_is_refused_only_where_it_matters() {
    let text = "[[gateway_set]]\nname = \"a\"\nalgorithm = \"ALG\"\n[[gateway_set.destinations]]\nuri = \"sip:a\"\n\
                weight = W\n[[gateway_set.destinations]]\nuri = \"sip:b\"\nweight = 0\n";
    // Weight 0 is a last resort under "weighted"; with every weight 0, nothing is weighted.
    load(&text.replace("ALG", "weighted").replace("W", "2")).unwrap();
    let all_zero = text.replace("ALG", "weighted").replace("W", "0");
    assert_error(&all_zero, 6, "gateway_set[0].destinations[0].weight", "every weight is 0");
    load(&text.replace("ALG", "priority").replace("W", "0")).unwrap();
    let heavy = text.replace("ALG", "priority").replace("W", "1").replace("weight = 0", "weight = 10001");
    assert_error(&heavy, 9, "gateway_set[0].destinations[1].weight", "10000");
}

#[test]
fn bad_thresholds_are_refused() {
    let with = |table: &str, body: &str| format!("{TWO}[gateway_set.{table}]\n{body}\n");
    assert_error(&with("health", "down_after_probes = 0"), 6, "gateway_set[0].health.down_after_probes", "1..=1000");
    assert_error(&with("health", "up_after_probes = 0"), 6, "gateway_set[0].health.up_after_probes", "1..=1000");
    assert_error(&with("health", "down_after_calls = 1001"), 6, "gateway_set[0].health.down_after_calls", "0..=1000");
    load(&with("health", "down_after_calls = 0")).expect("0: calls never take a destination down");
    assert_error(&with("probing", "interval_ms = 50"), 6, "gateway_set[0].probing.interval_ms", "outside 100");
    assert_error(
        &with("probing", "interval_ms = 1000\ntimeout_ms = 2000"),
        7,
        "gateway_set[0].probing.timeout_ms",
        "between 1 and interval_ms (1000)",
    );
    assert_error(&with("probing", "failed_statuses = [180]"), 6, "gateway_set[0].probing.failed_statuses", "180");
    assert_error(&with("failover", "statuses = [200]"), 6, "gateway_set[0].failover.statuses", "4xx or 5xx");
    assert_error(&with("failover", "statuses = [603]"), 6, "gateway_set[0].failover.statuses", "4xx or 5xx");
    assert_error(&with("failover", "max_attempts = 0"), 6, "gateway_set[0].failover.max_attempts", "outside 1..=");
    assert_error(
        &with("failover", "attempt_timeout_ms = 5"),
        6,
        "gateway_set[0].failover.attempt_timeout_ms",
        "outside 100..=300000",
    );
    assert_error(&with("health", "down_after_probes = -1"), 6, "gateway_set[0].health.down_after_probes", "");
}

#[test]
fn an_unknown_key_is_named() {
    assert_error(
        &format!("{TWO}[gateway_set.probing]\ninterval = 5\n"),
        6,
        "gateway_set[0].probing.interval",
        "unknown field",
    );
}

#[test]
fn the_engine_gets_every_key() {
    let c = load(
        r#"
[[gateway_set]]
name = "pstn"
algorithm = "least-calls"
retry_after_s = 7
destinations = [{ uri = "sip:127.0.0.1:5071", weight = 3, priority = 1 }, { uri = "sip:127.0.0.1:5072" }]
[gateway_set.failover]
statuses = [503, 502]
max_attempts = 2
attempt_timeout_ms = 800
[gateway_set.health]
down_after_probes = 4
down_after_calls = 0
up_after_probes = 6
"#,
    )
    .unwrap();
    let sets = to_core(&c.gateway_set, None);
    let s = sets.get("pstn").expect("the set by name");
    assert_eq!((s.algorithm, s.retry_after_s), (core::Algorithm::LeastActive, 7));
    let want = core::FailoverPolicy {
        statuses: vec![503, 502],
        max_attempts: 2,
        attempt_timeout: Some(Duration::from_millis(800)),
    };
    assert_eq!(s.failover, want);
    assert_eq!(s.health, core::HealthRules { probe_failures_down: 4, call_failures_down: 0, probe_successes_up: 6 });
    let d = &s.destinations[0];
    assert_eq!((d.uri.as_str(), d.weight, d.priority), ("sip:127.0.0.1:5071", 3, 1));
    assert!(d.health.is_up(), "a destination starts up");
    // A reload keeps the health of a destination that stays.
    d.health.force(Some(core::HealthState::Down));
    let again = to_core(&c.gateway_set, Some(&sets));
    assert!(!again.get("pstn").unwrap().destinations[0].health.is_up());
    assert!(again.get("pstn").unwrap().destinations[1].health.is_up());
}

#[test]
fn the_core_algorithm_names_are_accepted_too() {
    for (name, want) in [("round_robin", Algorithm::RoundRobin), ("least_active", Algorithm::LeastCalls)] {
        let text = TWO.replace("name = \"pstn\"", &format!("name = \"pstn\"\nalgorithm = \"{name}\""));
        assert_eq!(load(&text).unwrap().gateway_set[0].algorithm, want);
    }
}
