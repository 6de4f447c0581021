//! Real phones and herald on two sides of a link (issue 15): herald runs in one network
//! namespace with its **embedded default configuration** (`herald serve`, no --config, no
//! --listen: UDP and TCP on 0.0.0.0:5060 and [::]:5060, digest authentication on, the users
//! file `herald-users.txt` of its working directory, realm = the host name), the phones in
//! another, joined by a veth pair: herald at 10.98.N.1, the phones at 10.98.N.2. Loopback tests
//! cannot see what goes wrong there, e.g. a Record-Route naming the wildcard 0.0.0.0 a phone
//! then sends its ACK and BYE to, or a Request-URI without a port that is not recognised as
//! herald's own domain.
//!
//! * SIPp over UDP and over TCP: bob (tests/sipp/uas.xml) registers with digest, alice calls
//!   him 5 times through herald (tests/sipp/uac_auth.xml); every ACK and BYE follows the
//!   Record-Route, and no Record-Route carries 0.0.0.0.
//! * TLS: `herald bench calls --transport tls` (Debian's SIPp has no TLS) registers its
//!   callees and calls them through herald started with a `[tls]`-only config file and
//!   `--listen 0.0.0.0:5060 --listen-tls 0.0.0.0:5061`.
//! * baresip (Debian package `baresip`), driven headless through its stdin: alice registers
//!   with digest (MD5, herald's default), dials `sip:bob@10.98.N.1` as a phone user would,
//!   the SIPp callee answers, baresip hangs up.
//!
//! Needs root and iproute2: without them every test prints "skipped: network namespaces
//! unavailable: ..." and passes. Files (herald's log, SIPp traces, baresip's output and
//! config): `target/tmp/netns_phones_*/`.

mod common;
mod netns_support;

use common::{test_dir, SippRun};
use netns_support::*;
use std::fs;
use std::path::Path;
use std::time::Duration;

const ALICE: (&str, &str) = ("alice", "alice-secret");
const BOB: (&str, &str) = ("bob", "bob-secret");
/// Ports in the phones' namespace (nothing else runs there): SIPp's SIP port, control port
/// +1, media ports +2 and +4.
const UAS_PORT: u16 = 5100;
const REGISTER_PORT: u16 = 5110;
const UAC_PORT: u16 = 5120;
const BARESIP_PORT: u16 = 5130;
const CALLS: u64 = 5;

fn transport_args(tcp: bool) -> &'static [&'static str] {
    if tcp {
        &["-t", "t1"]
    } else {
        &[]
    }
}

/// A failed check: `what`, then herald's log and, for each SIPp run, its errors and the start
/// lines of what it sent and received.
fn failure(what: &str, herald: &Proc, sipps: &[(&str, &Path)]) -> String {
    let mut s = format!("{what}\n--- herald log (last 40 lines):\n{}\n", last_lines(herald, 40));
    for (name, messages) in sipps {
        let lines = start_lines(messages);
        let shown = &lines[lines.len().saturating_sub(30)..];
        s += &format!("--- sipp {name}: last {} of {} messages:\n{}\n", shown.len(), lines.len(), shown.join("\n"));
    }
    s
}

/// Exit status 0, `calls` successful calls, none failed; otherwise a panic with the details.
fn check_run(run: &SippRun, calls: u64, herald: &Proc, sipps: &[(&str, &Path)]) {
    let count = |f: &str| run.stats.get(&format!("{f}(C)")).and_then(|v| v.parse::<u64>().ok());
    let ok = run.status.success() && count("SuccessfulCall") == Some(calls) && count("FailedCall") == Some(0);
    assert!(
        ok,
        "{}",
        failure(
            &format!(
                "sipp {}: exit {:?}, SuccessfulCall {:?} (want {calls}), FailedCall {:?}\nerrors:\n{}",
                run.name,
                run.status.code(),
                count("SuccessfulCall"),
                count("FailedCall"),
                run.errors
            ),
            herald,
            sipps
        )
    );
}

/// Record-Routes a phone saw must name herald's address on the link, never the wildcard it
/// listens on: a phone cannot send its ACK and BYE to 0.0.0.0.
fn check_record_routes(ns: &Netns, herald: &Proc, sipps: &[(&str, &Path)]) {
    let mut all = Vec::new();
    for (name, messages) in sipps {
        all.extend(record_routes(messages).into_iter().map(|rr| format!("{name}: Record-Route: {rr}")));
    }
    let wildcard: Vec<&String> = all.iter().filter(|rr| rr.contains("0.0.0.0") || rr.contains("[::]")).collect();
    assert!(
        wildcard.is_empty(),
        "{}",
        failure(&format!("a Record-Route names the wildcard address herald listens on:\n{wildcard:#?}"), herald, sipps)
    );
    assert!(
        all.iter().any(|rr| rr.contains(&ns.herald_ip)),
        "{}",
        failure(&format!("no Record-Route names herald's address {}: {all:#?}", ns.herald_ip), herald, sipps)
    );
}

/// bob registers (digest) with contact `<phone ip>:contact_port`.
fn register_bob(ns: &Netns, dir: &Path, herald: &Proc, contact_port: u16, tcp: bool) {
    let target = format!("{}:5060", ns.herald_ip);
    let port = contact_port.to_string();
    let args = [
        &[target.as_str(), "-s", BOB.0, "-au", BOB.0, "-ap", BOB.1, "-key", "contact_host", &ns.phone_ip][..],
        &["-key", "contact_port", &port, "-m", "1", "-timeout", "20"],
        transport_args(tcp),
    ]
    .concat();
    let reg = Sipp::start(ns, dir, "register", "register_auth.xml", REGISTER_PORT, &args);
    let messages = reg.messages.clone();
    let run = reg.wait(Duration::from_secs(30));
    check_run(&run, 1, herald, &[("register", &messages)]);
}

/// herald with the embedded default configuration in its namespace, users alice and bob.
fn default_herald(ns: &Netns, dir: &Path) -> Proc {
    add_user(dir, ALICE.0, ALICE.1);
    add_user(dir, BOB.0, BOB.1);
    start_herald(ns, dir, &[])
}

fn sipp_calls(test: &str, tcp: bool) {
    let Some(ns) = netns_or_skip(test) else { return };
    require("sipp", "sip-tester");
    let dir = test_dir(test);
    let herald = default_herald(&ns, &dir);
    let t = transport_args(tcp);
    let calls = CALLS.to_string();
    let mut uas =
        Sipp::start(&ns, &dir, "uas", "uas.xml", UAS_PORT, &[&["-m", &calls, "-timeout", "60"][..], t].concat());
    uas.wait_bound(tcp);
    register_bob(&ns, &dir, &herald, uas.port, tcp);
    let target = format!("{}:5060", ns.herald_ip);
    let uac_args = [
        &[target.as_str(), "-s", BOB.0, "-key", "caller", ALICE.0, "-au", ALICE.0, "-ap", ALICE.1][..],
        &["-m", &calls, "-r", "5", "-timeout", "40"],
        t,
    ]
    .concat();
    let uac = Sipp::start(&ns, &dir, "uac", "uac_auth.xml", UAC_PORT, &uac_args);
    let (uac_msgs, uas_msgs) = (uac.messages.clone(), uas.messages.clone());
    let sipps: [(&str, &Path); 2] = [("uac", &uac_msgs), ("uas", &uas_msgs)];
    let uac_run = uac.wait(Duration::from_secs(60));
    // First what the phones were told to route along: a wildcard there explains any failure.
    check_record_routes(&ns, &herald, &sipps);
    check_run(&uac_run, CALLS, &herald, &sipps);
    let uas_run = uas.wait(Duration::from_secs(30));
    check_run(&uas_run, CALLS, &herald, &sipps);
}

#[test]
fn udp_sipp_calls_through_herald_on_wildcard_listeners() {
    sipp_calls("netns_phones_udp", false);
}

#[test]
fn tcp_sipp_calls_through_herald_on_wildcard_listeners() {
    sipp_calls("netns_phones_tcp", true);
}

/// The results file of a `herald bench calls` run.
fn read_calls(json: &Path) -> herald_bench::results::RunResult {
    match herald_bench::results::ResultsFile::read(json).unwrap() {
        herald_bench::results::ResultsFile::Calls(r) => r,
        _ => panic!("{}: not a calls result", json.display()),
    }
}

#[test]
fn tls_bench_calls_through_herald_on_wildcard_listeners() {
    let test = "netns_phones_tls";
    let Some(ns) = netns_or_skip(test) else { return };
    require("openssl", "openssl");
    let dir = test_dir(test);
    let (ca, cert, key) = tls_cert(&dir, &ns.herald_ip);
    // Only [tls]: everything else (auth on, users file, realm) is the embedded default.
    fs::write(
        dir.join("tls.toml"),
        format!("[tls]\ncertificate = \"{}\"\nprivate_key = \"{}\"\n", cert.display(), key.display()),
    )
    .unwrap();
    let mut credentials = String::new();
    for i in 0..4 {
        let (name, password) = (format!("user{i}"), format!("secret-{i}"));
        add_user(&dir, &name, &password);
        credentials += &format!("{name} {password}\n");
    }
    let creds = dir.join("credentials.txt");
    fs::write(&creds, credentials).unwrap();
    let herald =
        start_herald(&ns, &dir, &["--config", "tls.toml", "--listen", "0.0.0.0:5060", "--listen-tls", "0.0.0.0:5061"]);
    let json = dir.join("calls.json");
    let mut bench = ns.command(Side::Phones, env!("CARGO_BIN_EXE_herald"));
    bench
        .args(["bench", "calls", "--proxy", &format!("{}:5061", ns.herald_ip), "--transport", "tls"])
        .arg("--tls-ca")
        .arg(&ca)
        .arg("--credentials")
        .arg(&creds)
        .args(["--local-ip", &ns.phone_ip, "--rate", "3", "--arrivals", "uniform", "--duration", "4", "--hold", "50"])
        .args(["--max-failure", "0", "--json"])
        .arg(&json)
        .current_dir(&dir);
    let (status, output) = output_within(bench, &dir, "bench", Duration::from_secs(60));
    let fail = |what: String| failure(&format!("{what}\n--- herald bench output:\n{output}"), &herald, &[]);
    assert!(status.is_some_and(|s| s.success()), "{}", fail(format!("herald bench calls over TLS: {status:?}")));
    let r = read_calls(&json);
    assert_eq!(r.transport, "tls");
    assert!(r.attempted >= 8, "{}", fail(format!("only {} calls attempted", r.attempted)));
    assert!(
        r.failed == 0 && r.succeeded == r.attempted,
        "{}",
        fail(format!("{} of {} calls failed: {:?}", r.failed, r.attempted, r.failures))
    );
}

/// baresip's configuration for alice in `dir`: SIP on <phone ip>:BARESIP_PORT, herald as
/// registrar and outbound proxy, no sound card (a sine as source, a null bridge as player),
/// commands on stdin (stdio module), PCMU only.
fn baresip_config(ns: &Netns, dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let modules =
        ["/usr/lib/baresip/modules", "/usr/lib/x86_64-linux-gnu/baresip/modules", "/usr/local/lib/baresip/modules"]
            .into_iter()
            .find(|d| Path::new(d).join("g711.so").exists())
            .unwrap_or("/usr/lib/baresip/modules");
    let config = format!(
        "poll_method epoll\n\
         sip_listen {ip}:{BARESIP_PORT}\n\
         call_local_timeout 20\n\
         call_max_calls 1\n\
         audio_player aubridge,nil\n\
         audio_alert aubridge,nil\n\
         audio_source ausine,440\n\
         ausrc_srate 48000\n\
         ausrc_channels 2\n\
         module_path {modules}\n\
         module stdio.so\n\
         module g711.so\n\
         module ausine.so\n\
         module aubridge.so\n\
         module_tmp account.so\n\
         module_app menu.so\n",
        ip = ns.phone_ip
    );
    fs::write(dir.join("config"), config).unwrap();
    let h = &ns.herald_ip;
    let account = format!(
        "<sip:{user}@{h};transport=udp>;auth_pass={pw};outbound=\"sip:{h};transport=udp\";regint=600;\
         answermode=manual;audio_codecs=pcmu;mwi=no\n",
        user = ALICE.0,
        pw = ALICE.1
    );
    fs::write(dir.join("accounts"), account).unwrap();
    fs::write(dir.join("contacts"), "").unwrap();
}

/// Waits until baresip's output contains `want`; fails at once on any of `fatal` or if baresip
/// exits, and after `timeout`, with baresip's output, herald's log and what SIPp saw.
fn baresip_wait(
    phone: &mut Proc,
    want: &str,
    fatal: &[&str],
    timeout: Duration,
    herald: &Proc,
    sipps: &[(&str, &Path)],
) {
    let mut why = None;
    let seen = wait_until(timeout, || {
        let text = phone.text();
        if text.contains(want) {
            return true;
        }
        if let Some(f) = fatal.iter().find(|f| text.contains(**f)) {
            why = Some(format!("baresip said {f:?}"));
            return true;
        }
        if let Some(st) = phone.exited() {
            why = Some(format!("baresip exited ({st})"));
            return true;
        }
        false
    });
    let why = why.or_else(|| (!seen).then(|| format!("not within {timeout:?}")));
    if let Some(why) = why {
        panic!(
            "{}",
            failure(
                &format!("waiting for baresip to say {want:?}: {why}\n--- baresip output:\n{}", last_lines(phone, 80)),
                herald,
                sipps
            )
        );
    }
}

#[test]
fn baresip_registers_and_calls_a_sipp_callee_through_herald() {
    let test = "netns_phones_baresip";
    let Some(ns) = netns_or_skip(test) else { return };
    require("sipp", "sip-tester");
    require("baresip", "baresip");
    let dir = test_dir(test);
    let herald = default_herald(&ns, &dir);
    let mut uas = Sipp::start(&ns, &dir, "uas", "uas.xml", UAS_PORT, &["-m", "1", "-timeout", "60"]);
    uas.wait_bound(false);
    register_bob(&ns, &dir, &herald, uas.port, false);
    let uas_msgs = uas.messages.clone();
    let sipps: [(&str, &Path); 1] = [("uas (bob)", &uas_msgs)];

    let conf = dir.join("baresip");
    baresip_config(&ns, &conf);
    let mut cmd = ns.command(Side::Phones, "baresip");
    // -s: SIP trace in its output; -t: baresip quits by itself after 60 s whatever happens.
    cmd.arg("-f").arg(&conf).args(["-s", "-t", "60"]).current_dir(&conf);
    let mut phone = Proc::spawn(cmd, &dir, "baresip", true);
    // Registration with digest: 401, REGISTER with credentials, 200 (a refusal makes baresip
    // retry later: the timeout catches it, with the SIP trace in the output).
    baresip_wait(&mut phone, "registered successfully", &[], Duration::from_secs(20), &herald, &sipps);
    // A phone user dials bob at the domain, no port.
    phone.send_line(&format!("/dial sip:{}@{}", BOB.0, ns.herald_ip));
    baresip_wait(
        &mut phone,
        "Call established",
        &["session closed", "terminated (duration"],
        Duration::from_secs(20),
        &herald,
        &sipps,
    );
    std::thread::sleep(Duration::from_secs(1));
    phone.send_line("/hangup");
    baresip_wait(&mut phone, "terminated (duration", &["session closed"], Duration::from_secs(10), &herald, &sipps);
    phone.send_line("/quit");
    if phone.wait(Duration::from_secs(15)).is_none() {
        panic!("baresip did not quit within 15 s after /quit; output:\n{}", last_lines(&phone, 40));
    }
    let run = uas.wait(Duration::from_secs(30));
    check_record_routes(&ns, &herald, &sipps);
    check_run(&run, 1, &herald, &sipps);
    // bob's phone saw the INVITE, the ACK of its 200 and baresip's BYE, all through herald.
    let lines = start_lines(&uas_msgs);
    for method in ["INVITE", "ACK", "BYE"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{method} "))),
            "{}",
            failure(&format!("bob's phone never received a {method}"), &herald, &sipps)
        );
    }
}
