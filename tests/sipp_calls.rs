//! RFC 3261 §16 end to end: real SIPp callers and callees through a running `herald serve`.
//!
//! * Calls (INVITE/180/200/ACK/BYE) over UDP, TCP, and UDP caller to TCP callee, with
//!   record-routing: the callee (`tests/sipp/uas_routed.xml`) checks that the INVITE carries
//!   exactly herald's Record-Route value(s), and that the ACK and BYE arrive with two Vias, herald's
//!   on top, and no Route left, i.e. they were routed through herald by their Route headers.
//! * REGISTER edge cases, OPTIONS, 404s, and CANCEL.
//!
//! The load runs take a lock so that only one of them loads the machine at a time; each test
//! stops its herald with SIGTERM and requires exit status 0. Files: `target/tmp/<test>/`
//! (`HERALD_SIPP_TRACE=1` adds SIPp message traces, `HERALD_TEST_LOG=debug` herald's debug log).

mod common;

use common::*;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a load run may take before SIPp is killed (it is 20 s when all is well).
const LOAD_TIMEOUT: Duration = Duration::from_secs(150);
/// How long a short SIPp run may take.
const SHORT_TIMEOUT: Duration = Duration::from_secs(60);

fn load_lock() -> MutexGuard<'static, ()> {
    static LOAD: Mutex<()> = Mutex::new(());
    LOAD.lock().unwrap_or_else(|e| e.into_inner())
}

fn tcp_flag(tcp: bool) -> &'static [&'static str] {
    if tcp {
        &["-t", "t1"]
    } else {
        &[]
    }
}

fn args<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// A third-party REGISTER (tests/sipp/register.xml) binding `user` to 127.0.0.1:`port`.
fn register(dir: &std::path::Path, herald: &mut Herald, name: &str, user: &str, port: u16, tcp: bool) {
    let h = herald.addr.to_string();
    let port = port.to_string();
    let a = args(&[
        &[&h, "-s", user, "-key", "contact_host", "127.0.0.1", "-key", "contact_port", &port],
        &["-m", "1", "-timeout", "30"],
        tcp_flag(tcp),
    ]);
    Sipp::start(dir, name, "register.xml", &a).wait_watching(herald, SHORT_TIMEOUT).assert_all_successful(1);
}

/// SIGTERM; herald must exit 0 ("stopped" logged) within its drain time.
fn stop_cleanly(herald: Herald) {
    let log = herald.log.clone();
    let started = Instant::now();
    let status = herald.stop();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.is_some_and(|s| s.success()), "herald exit status {status:?}; log:\n{}", log_excerpt(&log));
    assert!(text.contains("stopped"), "no 'stopped' in herald's log:\n{}", log_excerpt(&log));
    eprintln!("herald stopped cleanly in {:?}", started.elapsed());
}

/// `calls` calls at `rate` per second, each 100 ms long, from a SIPp caller to a SIPp callee
/// registered as bob, both through herald.
fn routed_calls(test: &str, caller_tcp: bool, callee_tcp: bool, calls: u32, rate: u32) {
    let _load = load_lock();
    let dir = test_dir(test);
    let mut herald = Herald::start(&dir, &HeraldConfig::default());
    let h = herald.addr.to_string();
    // RFC 3261 §16.6 step 4, RFC 5658: one value when the request leaves on the transport it
    // came in on, else two, the one facing the callee first.
    let rr = |tcp: bool| if tcp { format!("sip:{h};transport=tcp;lr") } else { format!("sip:{h};lr") };
    let expected_rr = if caller_tcp == callee_tcp {
        format!("{} ", rr(callee_tcp))
    } else {
        format!("{} {}", rr(callee_tcp), rr(caller_tcp))
    };
    let (n, r) = (calls.to_string(), rate.to_string());
    let uas_args = args(&[
        &["-m", &n, "-timeout", "150", "-key", "proxy_hostport", &h, "-key", "expected_rr", &expected_rr],
        tcp_flag(callee_tcp),
    ]);
    let uas = Sipp::start(&dir, "uas", "uas_routed.xml", &uas_args);
    wait_bound(uas.port, callee_tcp);
    register(&dir, &mut herald, "register", "bob", uas.port, callee_tcp);
    let uac_args =
        args(&[&[&h, "-s", "bob", "-r", &r, "-m", &n, "-d", "100", "-timeout", "150"], tcp_flag(caller_tcp)]);
    let started = Instant::now();
    let uac = Sipp::start(&dir, "uac", "uac.xml", &uac_args).wait_watching(&mut herald, LOAD_TIMEOUT);
    let uas = uas.wait_watching(&mut herald, SHORT_TIMEOUT);
    eprintln!("{calls} calls in {:?}", started.elapsed());
    uac.assert_all_successful(u64::from(calls));
    uas.assert_all_successful(u64::from(calls));
    stop_cleanly(herald);
}

#[test]
fn udp_calls_300_per_second_for_20_seconds() {
    routed_calls("sipp_udp_calls", false, false, 6000, 300);
}

#[test]
fn tcp_calls_300_per_second_for_20_seconds() {
    routed_calls("sipp_tcp_calls", true, true, 6000, 300);
}

#[test]
fn udp_caller_to_tcp_callee_double_record_route() {
    routed_calls("sipp_mixed_calls", false, true, 200, 50);
}

#[test]
fn cancel_after_ringing() {
    let _load = load_lock();
    let dir = test_dir("sipp_cancel");
    let mut herald = Herald::start(&dir, &HeraldConfig::default());
    let h = herald.addr.to_string();
    let uas = Sipp::start(&dir, "uas", "uas_cancel.xml", &["-m", "50", "-timeout", "60", "-key", "proxy_hostport", &h]);
    wait_bound(uas.port, false);
    register(&dir, &mut herald, "register", "carol", uas.port, false);
    let uac =
        Sipp::start(&dir, "uac", "uac_cancel.xml", &[&h, "-s", "carol", "-r", "25", "-m", "50", "-timeout", "60"])
            .wait_watching(&mut herald, SHORT_TIMEOUT);
    let uas = uas.wait_watching(&mut herald, SHORT_TIMEOUT);
    uac.assert_all_successful(50);
    uas.assert_all_successful(50);
    stop_cleanly(herald);
}

#[test]
fn register_edge_cases_options_and_404() {
    let dir = test_dir("sipp_register_edges");
    let mut herald = Herald::start(&dir, &HeraldConfig::default());
    let h = herald.addr.to_string();
    // A contact nobody listens on: nothing is ever sent there (the binding is only queried).
    let contact_port = (port_block() + 5).to_string();
    let key = ["-key", "contact_host", "127.0.0.1", "-key", "contact_port", &contact_port];
    let mut run = |name: &str, scenario: &str, extra: &[&str]| {
        let a = args(&[&[&h, "-m", "1", "-timeout", "30"], extra]);
        Sipp::start(&dir, name, scenario, &a).wait_watching(&mut herald, SHORT_TIMEOUT).assert_all_successful(1);
    };
    run("options", "options.xml", &[]);
    run("invite-unknown-user", "invite_404.xml", &["-s", "nobody"]);
    run("register", "register.xml", &args(&[&["-s", "carol"], &key]));
    run("query-bound", "register_query.xml", &args(&[&["-s", "carol"], &key]));
    run("unregister", "unregister.xml", &args(&[&["-s", "carol"], &key]));
    run("invite-unregistered", "invite_404.xml", &["-s", "carol"]);
    run("register-too-brief", "register_brief.xml", &["-s", "dave"]);
    stop_cleanly(herald);
}
