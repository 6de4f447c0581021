//! Gateway sets end to end (issue 18 items 1 and 5): a running `herald serve` whose `[[route]]`
//! rules send number prefixes to `[[gateway_set]]`s of SIPp gateways on their own loopback
//! ports (tests/sipp/gateway.xml answers OPTIONS probes and calls; gateway_busy.xml answers
//! calls with 503), SIPp callers (tests/sipp/gateway_caller.xml).
//!
//! * Distribution per algorithm, counted at the gateways (SIPp -trace_counts): round-robin
//!   even, weighted in proportion, hash over Call-ID and over From user sticky, priority all on
//!   the first, least active calls spread over idle gateways.
//! * Killing a gateway mid-run: no failed call beyond one in flight at the kill, probing marks
//!   it down within its configured time (metrics endpoint and log), restarting it brings it
//!   back after K good probes, and it takes calls again.
//! * A gateway answering 503: the call fails over and the caller gets the other's 200.
//! * Every destination down: 503 with Retry-After at once, nothing sent.
//!
//! Files: `target/tmp/<test>/` (herald.log, each gateway's SIPp files).

mod common;
mod gateways_support;

use common::sip_client::{transaction, udp_from};
use common::*;
use gateways_support::*;
use std::time::{Duration, Instant};

/// The probing of every set here: fast, so that the test sees state changes in a second.
const FAST_PROBES: &str = "[gateway_set.probing]\ninterval_ms = 200\ntimeout_ms = 200\n\
                           [gateway_set.health]\ndown_after_probes = 2\nup_after_probes = 2\n";

fn start_herald(dir: &std::path::Path, sets: &[Set]) -> Herald {
    let extras = HeraldExtras { metrics: true, workers: Some(2), toml: Some(herald_toml(sets)), ..Default::default() };
    Herald::start_with(dir, &HeraldConfig { drain_timeout_s: Some(2), ..Default::default() }, &extras)
}

/// `herald_gateway_<name>` of one destination at the metrics endpoint.
fn gateway_metric(herald: &Herald, name: &str, set: &str, uri: &str) -> f64 {
    let url = herald.metrics_url.as_ref().expect("metrics on");
    let s = herald_bench::scrape::fetch(url).unwrap_or_else(|e| panic!("scrape {url}: {e}"));
    s.sum(&format!("herald_gateway_{name}"), &[("set", set), ("destination", uri)])
}

/// Waits up to `within` for `f`; returns how long it took.
fn within(within: Duration, what: &str, herald: &Herald, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}; herald log:\n{}", log_excerpt(&herald.log));
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

fn counts(gws: &[&Gateway]) -> Vec<u64> {
    gws.iter().map(|g| g.invites()).collect()
}

fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

#[test]
fn calls_spread_as_each_algorithm_says() {
    let dir = test_dir("gateways_spread");
    let (a, b, c) = (
        Gateway::start(&dir, "a", "gateway.xml"),
        Gateway::start(&dir, "b", "gateway.xml"),
        Gateway::start(&dir, "c", "gateway.xml"),
    );
    let all = |w: [u32; 3], p: [u32; 3]| -> Vec<(String, u32, u32)> {
        vec![(a.uri(), w[0], p[0]), (b.uri(), w[1], p[1]), (c.uri(), w[2], p[2])]
    };
    let set = |name, algorithm, prefix, destinations| Set { name, algorithm, destinations, prefix, extra: FAST_PROBES };
    let sets = [
        set("rr", "round-robin", "1", all([1, 1, 1], [0, 0, 0])),
        set("weighted", "weighted", "2", all([3, 2, 1], [0, 0, 0])),
        set("callid", "hash-call-id", "3", all([1, 1, 1], [0, 0, 0])),
        set("from", "hash-from-user", "4", all([1, 1, 1], [0, 0, 0])),
        set("prio", "priority", "5", all([1, 1, 1], [2, 0, 1])),
        set("least", "least-calls", "6", all([1, 1, 1], [0, 0, 0])),
    ];
    let herald = start_herald(&dir, &sets);
    let gws = [&a, &b, &c];
    let run = |name: &str, number: &str, users: &[&str], calls: u32, cid: Option<&str>| -> Vec<u64> {
        let before = counts(&gws);
        call(&dir, name, herald.addr, &Calls { number, from: users, calls, rate: 100, call_ids: cid })
            .assert_all_successful(u64::from(calls));
        Gateway::settle();
        let got = delta(&counts(&gws), &before);
        assert_eq!(got.iter().sum::<u64>(), u64::from(calls), "{name}: {got:?}");
        eprintln!("{name}: {got:?}");
        got
    };

    // Round-robin: each call starts at the next gateway.
    assert_eq!(run("rr", "1001", &["alice"], 30, None), [10, 10, 10]);

    // Weighted 3:2:1 over 300 calls: 150/100/50 expected, each within 4 standard deviations of
    // a draw in proportion (±35, ±33, ±26); an even spread (100 each) would fail.
    let w = run("weighted", "2001", &["alice"], 300, None);
    for (got, share) in w.iter().zip([3.0 / 6.0, 2.0 / 6.0, 1.0 / 6.0]) {
        let (want, sd) = (300.0 * share, 300.0 * share * (1.0 - share));
        assert!((*got as f64 - want).abs() <= 4.0 * sd.sqrt(), "weighted 3:2:1 gave {w:?}");
    }

    // Hash over the Call-ID: the same 12 Call-IDs twice reach the same gateways.
    let first = run("callid1", "3001", &["alice"], 12, Some("sticky-%u@gateways-test"));
    assert!(first.iter().filter(|n| **n > 0).count() >= 2, "12 Call-IDs all on one gateway: {first:?}");
    let again = run("callid2", "3001", &["alice"], 12, Some("sticky-%u@gateways-test"));
    assert_eq!(first, again, "the same Call-IDs went elsewhere");

    // Hash over the From user: one caller's calls all reach one gateway; callers spread.
    let one = run("from1", "4001", &["dave"], 9, None);
    assert_eq!(one.iter().filter(|n| **n > 0).count(), 1, "one caller, several gateways: {one:?}");
    let again = run("from2", "4001", &["dave"], 9, None);
    assert_eq!(one, again, "the same caller went elsewhere");
    let callers = ["u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10", "u11", "u12"];
    let many = run("from3", "4001", &callers, 24, None);
    assert!(many.iter().filter(|n| **n > 0).count() >= 2, "12 callers all on one gateway: {many:?}");
    assert!(many.iter().all(|n| n % 2 == 0), "each caller's two calls went to one gateway: {many:?}");

    // Priority: b has the lowest value and takes every call.
    assert_eq!(run("prio", "5001", &["alice"], 10, None), [0, 10, 0]);

    // Fewest active calls: short calls one after another leave ties, which go round in turn.
    let least = run("least", "6001", &["alice"], 30, None);
    assert!(least.iter().all(|n| *n >= 5), "least-calls left a gateway idle: {least:?}");

    for (set, g) in [("rr", &a), ("prio", &b)] {
        assert_eq!(gateway_metric(&herald, "up", set, &g.uri()), 1.0);
        assert!(gateway_metric(&herald, "probes_total", set, &g.uri()) > 0.0, "{set} was never probed");
    }
    assert_eq!(gateway_metric(&herald, "calls_total", "prio", &b.uri()), 10.0);
    for g in gws {
        assert!(g.errors().trim().is_empty() || !g.errors().contains("Unexpected"), "{}: {}", g.name, g.errors());
    }
}

#[test]
fn a_killed_gateway_costs_no_calls_is_marked_down_and_comes_back() {
    let dir = test_dir("gateways_kill");
    let mut a = Gateway::start(&dir, "a", "gateway.xml");
    let b = Gateway::start(&dir, "b", "gateway.xml");
    // Failed calls never take a destination down here (down_after_calls = 0): only the probes
    // can, which is what is measured.
    let extra = "[gateway_set.probing]\ninterval_ms = 200\ntimeout_ms = 200\n[gateway_set.health]\n\
                 down_after_probes = 2\nup_after_probes = 2\ndown_after_calls = 0\n\
                 [gateway_set.failover]\nattempt_timeout_ms = 300\n";
    let sets = [Set {
        name: "pstn",
        algorithm: "round-robin",
        destinations: vec![(a.uri(), 1, 0), (b.uri(), 1, 0)],
        prefix: "9",
        extra,
    }];
    let herald = start_herald(&dir, &sets);
    let h = herald.addr;
    // 200 calls at 40/s: five seconds, the kill after one and the restart after three.
    let caller = std::thread::spawn({
        let dir = dir.clone();
        move || {
            call(&dir, "caller", h, &Calls { number: "9001", from: &["alice"], calls: 200, rate: 40, call_ids: None })
        }
    });
    std::thread::sleep(Duration::from_secs(1));
    let before_kill = a.invites();
    a.kill();
    let down = within(Duration::from_secs(2), "a marked down", &herald, || {
        gateway_metric(&herald, "up", "pstn", &a.uri()) == 0.0
    });
    // Two failed probes 200 ms apart (each waits up to 200 ms), plus one interval of phase.
    assert!(down <= Duration::from_millis(1000), "marked down after {down:?}");
    std::thread::sleep(Duration::from_secs(1));
    a.restart();
    let up =
        within(Duration::from_secs(2), "a back up", &herald, || gateway_metric(&herald, "up", "pstn", &a.uri()) == 1.0);
    assert!(up <= Duration::from_millis(1200), "back after {up:?}");
    let run = caller.join().unwrap();
    // A call in flight at a at the kill may fail (its BYE has nowhere to go); no other.
    let failed = run.count("FailedCall");
    assert!(failed <= 1, "{failed} failed calls; caller errors:\n{}", run.errors);
    assert_eq!(run.count("SuccessfulCall") + failed, 200);
    eprintln!("a marked down {down:?} after the kill, back up {up:?} after the restart; {failed} failed calls of 200");
    Gateway::settle();
    assert!(a.invites() > before_kill, "the restarted a took no calls");
    let log = herald.log_text();
    let changes: Vec<&str> = log.lines().filter(|l| l.contains("gateway state changed")).collect();
    let logged =
        |to: &str, why: &str| changes.iter().any(|l| l.contains(&a.uri()) && l.contains(to) && l.contains(why));
    assert!(logged("to=\"down\"", "2 failed probes in a row"), "no logged change to down: {changes:?}");
    assert!(logged("to=\"up\"", "2 good probes in a row"), "no logged change to up: {changes:?}");
    assert!(gateway_metric(&herald, "state_changes_total", "pstn", &a.uri()) >= 2.0);
    assert_eq!(gateway_metric(&herald, "up", "pstn", &b.uri()), 1.0);
    drop(b);
}

#[test]
fn a_503_fails_over_and_all_down_is_503_at_once() {
    let dir = test_dir("gateways_503");
    let busy = Gateway::start(&dir, "busy", "gateway_busy.xml");
    let good = Gateway::start(&dir, "good", "gateway.xml");
    // Nothing listens on these: probes fail, and the set goes down.
    let (block1, block2) = (Reserved::block(), Reserved::block());
    let dead1 = block1.uri();
    let dead2 = format!("{};transport=udp", block2.uri());
    let quiet = "[gateway_set.health]\ndown_after_calls = 0\n";
    let sets = [
        Set {
            name: "busy-first",
            algorithm: "priority",
            destinations: vec![(busy.uri(), 1, 0), (good.uri(), 1, 1)],
            prefix: "7",
            extra: quiet,
        },
        Set {
            name: "dead",
            algorithm: "round-robin",
            destinations: vec![(dead1.clone(), 1, 0), (dead2.clone(), 1, 0)],
            prefix: "8",
            extra: "[gateway_set.probing]\ninterval_ms = 200\ntimeout_ms = 200\n[gateway_set.health]\ndown_after_probes = 1\n",
        },
    ];
    let herald = start_herald(&dir, &sets);
    // Every call is answered 503 by busy first, then 200 by good: the caller sees 200 only.
    call(
        &dir,
        "failover",
        herald.addr,
        &Calls { number: "7001", from: &["alice"], calls: 5, rate: 20, call_ids: None },
    )
    .assert_all_successful(5);
    Gateway::settle();
    assert_eq!((busy.invites(), good.invites()), (5, 5));
    assert_eq!(gateway_metric(&herald, "call_failures_total", "busy-first", &busy.uri()), 5.0);
    assert_eq!(gateway_metric(&herald, "up", "busy-first", &busy.uri()), 1.0, "down_after_calls = 0");

    within(Duration::from_secs(3), "both dead destinations down", &herald, || {
        gateway_metric(&herald, "up", "dead", &dead1) == 0.0 && gateway_metric(&herald, "up", "dead", &dead2) == 0.0
    });
    let sock = udp_from("127.0.0.1");
    let started = Instant::now();
    let answer =
        transaction(&sock, herald.addr, &invite(herald.addr, &sock, "8001", "all-down-1"), Duration::from_secs(2))
            .expect("an answer to the INVITE");
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&answer).to_string();
    assert_eq!(status_of(&answer), Some(503), "{text}");
    assert_eq!(header_of(&answer, "Retry-After", "Retry-After").map(str::trim), Some("30"), "{text}");
    assert!(took < Duration::from_millis(500), "503 after {took:?}: not at once");
    assert_eq!(gateway_metric(&herald, "calls_total", "dead", &dead1), 0.0, "an attempt went to a down gateway");

    // A reload (SIGHUP) that adds the good gateway to the dead set: it is probed from then on,
    // shown on the metrics endpoint, and takes the set's calls; the dead ones stay down. The
    // reload also adds a set whose probing is off: the reloaded file's settings are used.
    let conf = dir.join("herald.toml");
    let text = std::fs::read_to_string(&conf).unwrap();
    let old_list = format!("[[gateway_set.destinations]]\nuri = \"{dead2}\"\nweight = 1\npriority = 0\n");
    assert!(text.contains(&old_list), "{text}");
    let new_list =
        format!("{old_list}[[gateway_set.destinations]]\nuri = \"{}\"\nweight = 1\npriority = 0\n", good.uri());
    let late = format!(
        "[[gateway_set]]\nname = \"late\"\ndestinations = [{{ uri = \"{}\" }}]\n[gateway_set.probing]\nenabled = false\n",
        good.uri()
    );
    std::fs::write(&conf, text.replace(&old_list, &new_list) + &late).unwrap();
    signal(herald.pid(), SIGHUP);
    within(Duration::from_secs(5), "the added destination probed", &herald, || {
        gateway_metric(&herald, "probes_total", "dead", &good.uri()) > 0.0
    });
    assert_eq!(gateway_metric(&herald, "up", "dead", &dead1), 0.0, "a kept destination keeps its health");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(gateway_metric(&herald, "up", "late", &good.uri()), 1.0, "the added set is exported");
    assert_eq!(gateway_metric(&herald, "probes_total", "late", &good.uri()), 0.0, "its probing is off");
    call(
        &dir,
        "after-reload",
        herald.addr,
        &Calls { number: "8002", from: &["alice"], calls: 3, rate: 20, call_ids: None },
    )
    .assert_all_successful(3);
    assert_eq!(gateway_metric(&herald, "calls_total", "dead", &good.uri()), 3.0);
}
