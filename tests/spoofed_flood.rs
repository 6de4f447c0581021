//! A spoofed-source flood against herald with its embedded default configuration (digest
//! authentication on), while legitimate phones register and call (issue 16, item 2's attack
//! and item 7's memory):
//!
//! * herald runs in one network namespace, the phones in another, joined by a veth pair
//!   (tests/netns_support: herald at 10.98.N.1, phones at 10.98.N.2);
//! * from a raw socket in the phones' namespace (tests/spoofed_flood_support), [`FLOOD_RATE`]
//!   unauthenticated REGISTER and INVITE requests per second for [`FLOOD_S`] seconds, each from
//!   a random forged source in 10.77.0.0/16 (routed back towards the phones' side, where the
//!   challenges herald sends them are dropped): no source sends enough to be rate-limited per
//!   source, as from a botnet or a forger;
//! * meanwhile SIPp, from 10.98.N.2, has alice call bob (a SIPp callee registered with digest)
//!   [`CALLS`] times with digest and, from 10.98.N.3, registers carol with digest
//!   [`REGISTRATIONS`] times.
//!
//! Asserted, with the bounds holding whether herald answers unauthenticated requests statefully
//! (a server transaction of ~2 KB held 32 s per request) or statelessly (issue 16, item 2: then
//! the flood allocates almost nothing):
//!
//! 1. legitimate registrations and calls are each ≥ 99 % successful (SIPp's counts);
//! 2. herald's peak resident memory (VmHWM) stays under [`PEAK_RSS_MIB`]: the stateful worst
//!    case is every flood request holding a transaction until it expires, ≈ 2.5 KB each with
//!    table and allocator overhead: 25,000 × 2.5 KB = 62 MB over a ~20 MB idle process;
//! 3. memory comes back: once the flood's transactions have expired (64×T1 = 32 s after the
//!    last flood request) herald's RSS falls, within [`RETURN_WITHIN_S`] more seconds, to no
//!    more than its RSS before the flood plus max([`RETURN_SLACK_MIB`], 25 % of what the
//!    flood added). Without returning freed memory to the kernel (glibc keeps freed chunks
//!    mapped) it stays at its peak (issue 16, item 7: 908-948 MB long after a flood).
//!    With stateless challenges the flood adds little and this holds by the slack; the
//!    trimming and shrinking themselves are unit-tested (herald-server's `memory` module, the
//!    transaction table's `shrink_tests`);
//! 4. with the embedded default configuration (stateless challenges) the flood adds at most
//!    [`STATELESS_FLOOD_ADDS_MIB`] at its peak: an attacker who cannot authenticate allocates
//!    no state per forged source. While every challenged request was charged to a per-source
//!    budget as if it held a transaction (one budget entry per forged address), the flood added
//!    10-17 MiB that never came back: the budget tables' ~5 MB and the allocator pages around
//!    them (herald-server's `source_budget` module).
//!
//! Runs in about 70 s. Needs root and iproute2; without them it prints "skipped: network
//! namespaces unavailable: ..." and passes. Files (herald's log, SIPp traces, the RSS timeline
//! `rss.csv`): `target/tmp/spoofed_flood/`. To measure, `HERALD_SPOOFED_FLOOD_BIN=path` runs
//! another herald binary (e.g. a release build) and `HERALD_SPOOFED_FLOOD_RATE=N` floods at
//! another rate.
//!
//! Hostile suite: this is one of the attacks of issue 16 that must keep running in CI. It is a
//! plain `cargo test` integration test (in `./scripts/test.sh`, which CI runs), next to
//! tests/hostile_network.rs (malformed traffic), tests/hostile_limits.rs and
//! tests/flood_policy.rs (per-source limits and bans).

mod common;
mod netns_support;
mod spoofed_flood_support;

use common::{test_dir, SippRun};
use netns_support::*;
use spoofed_flood_support::{flood, Flood};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Forged requests per second, alternately REGISTER and INVITE. Below what the debug build
/// `cargo test` runs handles on a 2-core machine beside SIPp and the flood itself (at 2,000/s it
/// starts shedding with 503 now and then, legitimate requests included: overload control doing
/// its job, which is not what this test is about); a release build was measured at 10,000/s.
const FLOOD_RATE: u32 = 1_000;
/// How long the flood lasts.
const FLOOD_S: u64 = 25;
/// Legitimate traffic, each source under `[flood] max_requests` = 60 per 2 s: alice's calls
/// cost 5 requests each (40 per 2 s), carol's registrations 2 (16 per 2 s, another address).
/// 100 each, so that one failure is 1 %.
const CALLS: u32 = 100;
const CALL_RATE: u32 = 4;
const REGISTRATIONS: u32 = 100;
const REGISTER_RATE: u32 = 4;
/// Bound on herald's peak RSS: the debug build idles at ~20 MB; a stateful flood of 20,000
/// requests added ~32 MB (measured), stateless challenges add ~6 MB.
const PEAK_RSS_MIB: u64 = 256;
/// How long after the flood's transactions expired memory must be back.
const RETURN_WITHIN_S: u64 = 15;
/// 64×T1: how long the last flood request's transaction may live.
const EXPIRY_S: u64 = 32;
/// What may stay after the flood whatever it was: the flood guard's per-source entries (one
/// per forged address, ≤ 25,000 here), tables below the size worth shrinking, allocator slack.
const RETURN_SLACK_MIB: u64 = 16;
/// What the flood may add at its peak when challenges are stateless (item 4): the flood guard's
/// sliding windows of per-source counts (two windows' worth of forged addresses) and queues
/// that grow with the backlog. Measured 2.1-2.3 MiB (release and debug builds); before the
/// budgets stopped charging stateless answers, 10-17 MiB.
const STATELESS_FLOOD_ADDS_MIB: u64 = 8;

const ALICE: (&str, &str) = ("alice", "alice-secret");
const BOB: (&str, &str) = ("bob", "bob-secret");
const CAROL: (&str, &str) = ("carol", "carol-secret");
const UAS_PORT: u16 = 5100;
const REGISTER_PORT: u16 = 5110;
const UAC_PORT: u16 = 5120;
const LOOP_PORT: u16 = 5130;
/// carol's contact: nobody listens there, nobody calls her.
const CAROL_CONTACT_PORT: u16 = 5140;

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples herald's VmRSS every 250 ms on a thread until stopped (bounded: at most 10 minutes).
struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let (s, v) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(600) {
                if let Some(kib) = rss_kib(pid, "VmRSS:") {
                    v.lock().unwrap().push((start.elapsed().as_secs_f64(), kib));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Sampler { stop, samples, thread: Some(thread) }
    }

    fn last(&self) -> u64 {
        self.samples.lock().unwrap().last().map_or(0, |s| s.1)
    }

    /// Stops sampling and writes `t_s;rss_kib` lines to `path`.
    fn finish(&mut self, path: &Path) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let v = self.samples.lock().unwrap().clone();
        let csv: String = v.iter().map(|(t, k)| format!("{t:.2};{k}\n")).collect();
        let _ = fs::write(path, format!("t_s;rss_kib\n{csv}"));
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `herald serve` (embedded default config) in herald's namespace, as netns_support's
/// `start_herald`, but with `HERALD_SPOOFED_FLOOD_BIN` honoured.
fn herald(ns: &Netns, dir: &Path) -> Proc {
    let Some(bin) = std::env::var_os("HERALD_SPOOFED_FLOOD_BIN") else {
        return start_herald(ns, dir, &[]);
    };
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.herald_ns]).arg(bin).arg("serve").current_dir(dir);
    let mut h = Proc::spawn(cmd, dir, "herald", false);
    let up = wait_until(Duration::from_secs(20), || h.text().contains("herald serving") || h.exited().is_some());
    assert!(up && h.exited().is_none(), "herald did not start; log:\n{}", h.text());
    h
}

/// Successful and failed counts of a SIPp run.
fn counts(run: &SippRun) -> (u64, u64) {
    let count = |f: &str| run.stats.get(&format!("{f}(C)")).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (count("SuccessfulCall"), count("FailedCall"))
}

fn assert_99(run: &SippRun, attempted: u32, herald: &Proc) {
    let (ok, failed) = counts(run);
    assert!(
        ok * 100 >= u64::from(attempted) * 99,
        "sipp {}: {ok} of {attempted} successful ({failed} failed), want ≥ 99 %\nerrors:\n{}\n--- herald log:\n{}",
        run.name,
        run.errors,
        last_lines(herald, 30)
    );
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn spoofed_flood_leaves_legitimate_service_and_returns_memory() {
    let test = "spoofed_flood";
    let Some(ns) = netns_or_skip(test) else { return };
    require("sipp", "sip-tester");
    let dir = test_dir(test);
    for (user, password) in [ALICE, BOB, CAROL] {
        add_user(&dir, user, password);
    }
    // Herald's answers to forged sources leave through the veth; the phones' namespace does not
    // forward, so they end there.
    ip(&["-n", &ns.herald_ns, "route", "add", "10.77.0.0/16", "via", &ns.phone_ip]);
    // carol's phone has an address of its own (SIPp's last -i wins).
    let second_ip = format!("10.98.{}.3", ns.n);
    ip(&["-n", &ns.phones_ns, "addr", "add", &format!("{second_ip}/24"), "dev", "veth-p"]);
    let herald = herald(&ns, &dir);
    let pid = herald.pid();
    let target = format!("{}:5060", ns.herald_ip);

    let calls = CALLS.to_string();
    // bob's phone answers every call it gets; killed at the end (alice's counts are the verdict).
    let mut uas = Sipp::start(&ns, &dir, "uas", "uas.xml", UAS_PORT, &["-timeout", "90"]);
    uas.wait_bound(false);
    let port = UAS_PORT.to_string();
    let reg_args = [&target, "-s", BOB.0, "-au", BOB.0, "-ap", BOB.1, "-key", "contact_host", &ns.phone_ip];
    let reg = Sipp::start(
        &ns,
        &dir,
        "register_bob",
        "register_auth.xml",
        REGISTER_PORT,
        &[&reg_args[..], &["-key", "contact_port", &port, "-m", "1", "-timeout", "20"]].concat(),
    );
    let run = reg.wait(Duration::from_secs(30));
    assert_eq!(counts(&run), (1, 0), "bob's registration before the flood; herald log:\n{}", last_lines(&herald, 30));

    std::thread::sleep(Duration::from_secs(1));
    let before = rss_kib(pid, "VmRSS:").expect("herald's /proc status");
    let mut sampler = Sampler::start(pid);

    let rate = std::env::var("HERALD_SPOOFED_FLOOD_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(FLOOD_RATE);
    let spec = Flood {
        netns: ns.phones_ns.clone(),
        target: (ns.herald_ip.parse().unwrap(), 5060),
        domain: ns.herald_ip.clone(),
        prefix: [10, 77],
        rate,
        duration: Duration::from_secs(FLOOD_S),
        max_datagrams: u64::from(rate) * FLOOD_S,
        seed: u64::from(std::process::id()),
    };
    let flooder = std::thread::spawn(move || flood(&spec));
    // Legitimate traffic starts a second into the flood and lasts as long.
    std::thread::sleep(Duration::from_secs(1));
    let contact = CAROL_CONTACT_PORT.to_string();
    let loop_args = [&target, "-s", CAROL.0, "-au", CAROL.0, "-ap", CAROL.1, "-key", "contact_host", &second_ip];
    let (regs, reg_rate) = (REGISTRATIONS.to_string(), REGISTER_RATE.to_string());
    let registrations = Sipp::start(
        &ns,
        &dir,
        "register_loop",
        "register_auth.xml",
        LOOP_PORT,
        &[
            &loop_args[..],
            &["-i", &second_ip, "-key", "contact_port", &contact, "-m", &regs, "-r", &reg_rate, "-timeout", "60"],
        ]
        .concat(),
    );
    let call_rate = CALL_RATE.to_string();
    let uac_args = [&target, "-s", BOB.0, "-key", "caller", ALICE.0, "-au", ALICE.0, "-ap", ALICE.1];
    let uac = Sipp::start(
        &ns,
        &dir,
        "uac",
        "uac_auth.xml",
        UAC_PORT,
        &[&uac_args[..], &["-m", &calls, "-r", &call_rate, "-timeout", "60"]].concat(),
    );

    let sent = flooder.join().expect("flood thread").expect("raw socket flood (root in the namespace)");
    let flood_end = Instant::now();
    eprintln!("flood: {sent:?}, RSS before {before} KiB, now {} KiB", sampler.last());
    let reg_run = registrations.wait(Duration::from_secs(60));
    let uac_run = uac.wait(Duration::from_secs(60));
    drop(uas);
    eprintln!("registrations {:?}, calls {:?}", counts(&reg_run), counts(&uac_run));

    // Memory: wait for the flood's transactions to expire, then for RSS to come down.
    let peak = rss_kib(pid, "VmHWM:").unwrap_or(0);
    let added = peak.saturating_sub(before);
    let bound = before + (RETURN_SLACK_MIB * 1024).max(added / 4);
    let expired = flood_end + Duration::from_secs(EXPIRY_S);
    let deadline = expired + Duration::from_secs(RETURN_WITHIN_S);
    let back = wait_until(deadline.saturating_duration_since(Instant::now()), || {
        Instant::now() >= expired && sampler.last() <= bound
    });
    let after = sampler.last();
    let came_back = back.then(|| Instant::now().duration_since(expired).as_secs_f64());
    sampler.finish(&dir.join("rss.csv"));
    eprintln!(
        "RSS before {before} KiB, peak (VmHWM) {peak} KiB, after {after} KiB (bound {bound} KiB, reached \
         {came_back:?} s after the flood's transactions expired)"
    );
    assert!(sent.datagrams >= u64::from(rate) * FLOOD_S * 9 / 10, "the flood fell short: {sent:?}");

    assert_99(&reg_run, REGISTRATIONS, &herald);
    assert_99(&uac_run, CALLS, &herald);
    assert!(peak <= PEAK_RSS_MIB * 1024, "herald's peak RSS {peak} KiB exceeds {PEAK_RSS_MIB} MiB");
    assert!(
        added <= STATELESS_FLOOD_ADDS_MIB * 1024,
        "a flood answered with stateless challenges added {added} KiB at its peak (before {before} KiB, peak {peak} \
         KiB), over {STATELESS_FLOOD_ADDS_MIB} MiB: state allocated per forged source?"
    );
    assert!(
        back,
        "herald's RSS did not come back within {RETURN_WITHIN_S} s after the flood's transactions expired: {after} \
         KiB, bound {bound} KiB (before the flood {before} KiB, peak {peak} KiB); timeline in {}",
        dir.join("rss.csv").display()
    );
}
