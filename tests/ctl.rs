//! `herald ctl` against a running `herald serve` (issue 19 item 3): registrations made by a real
//! UDP client, then every command in human and `--json` output (users added through ctl
//! authenticate at once, removed ones no longer; a forced gateway state survives a reload); bad input (unknown AoR, bad
//! token, malformed JSON-RPC, oversized body, a configuration that does not validate or needs a
//! restart) gets a clear error and changes nothing (state compared before and after); SIGHUP
//! and `herald ctl reload` apply a changed value while OPTIONS keep being answered; a
//! non-loopback `[admin] listen` without a token is refused at start.
//!
//! Files: `target/tmp/ctl_*/`. Each test takes a few seconds.

mod common;

use common::*;
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "ctl-test-token-0123456789";

/// A herald with `[admin]` on loopback, a users file, `domains = ["example.com"]`, and
/// REGISTERs not challenged (these tests register with a bare UDP client).
struct Admin {
    herald: Herald,
    url: String,
    config: PathBuf,
    users: PathBuf,
}

/// The sections after `[server]` (which `Herald::start_with` writes). The realm is fixed, so
/// that adding a domain does not move it (the realms are read only at start).
fn config_text(admin_port: u16, users: &Path, tokens: bool, register: bool) -> String {
    let token = if tokens { format!("[[admin.token]]\nname = \"ops\"\ntoken = \"{TOKEN}\"\n") } else { String::new() };
    format!(
        "[flood]\ntrusted = [\"127.0.0.0/8\"]\n\
         [auth]\nenabled = true\nrealm = \"example.com\"\nregister = {register}\nlocal_callers = false\nusers_file = \"{}\"\n\
         [admin]\nlisten = \"127.0.0.1:{admin_port}\"\n{token}\
         [[gateway_set]]\nname = \"carriers\"\n\
         destinations = [{{ uri = \"sip:192.0.2.10:5060\" }}, {{ uri = \"sip:192.0.2.11:5060\" }}]\n\
         [gateway_set.probing]\nenabled = false\n",
        users.display()
    )
}

impl Admin {
    fn start(name: &str, tokens: bool) -> Admin {
        Admin::start_with(name, tokens, false)
    }

    /// With `register`, REGISTERs are challenged (digest, realm example.com).
    fn start_with(name: &str, tokens: bool, register: bool) -> Admin {
        Admin::start_in(&test_dir(name), tokens, register)
    }

    /// In `dir` as it is (a restart keeps its users file and location database).
    fn start_in(dir: &Path, tokens: bool, register: bool) -> Admin {
        let dir = dir.to_path_buf();
        let admin_port = port_block();
        let users = dir.join("users.txt");
        let extras = HeraldExtras {
            workers: Some(2),
            metrics: true,
            toml: Some(config_text(admin_port, &users, tokens, register)),
            domains: vec!["example.com".into()],
            ..Default::default()
        };
        let herald =
            Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
        wait_bound(admin_port, true);
        Admin { url: format!("http://127.0.0.1:{admin_port}/"), config: dir.join("herald.toml"), users, herald }
    }

    fn ctl(&self, args: &[&str]) -> Output {
        self.ctl_with(args, Some(TOKEN), None)
    }

    fn ctl_with(&self, args: &[&str], token: Option<&str>, stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.arg("ctl").args(["--url", &self.url]).args(args).env_remove("HERALD_ADMIN_TOKEN");
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("herald ctl");
        if let Some(text) = stdin {
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// `herald ctl ARGS` that must succeed: its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(out.status.success(), "herald ctl {args:?}: {}\n{}", stderr(&out), self.herald.log_text());
        String::from_utf8(out.stdout).unwrap()
    }

    /// `herald ctl --json ARGS` that must succeed: each line of its output as JSON.
    fn json(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        self.ok(&all).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// `herald ctl ARGS` that must fail with `code`: its stderr.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.ctl(args);
        assert_eq!(out.status.code(), Some(code), "herald ctl {args:?}: {}", stderr(&out));
        stderr(&out)
    }

    /// Every binding as (aor, contact), sorted: the state compared before and after bad input.
    fn bindings(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .json(&["registrations", "list", "--page", "2"])
            .iter()
            .flat_map(|page| page["registrations"].as_array().unwrap().clone())
            .map(|b| (b["aor"].as_str().unwrap().to_string(), b["contact"].as_str().unwrap().to_string()))
            .collect();
        v.sort();
        v
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A REGISTER from `socket` for `user@domain` with `contacts` (none: a query), answered with
/// this status.
fn register(socket: &UdpSocket, herald: SocketAddr, user: &str, domain: &str, contacts: &[&str], cseq: u32) -> u16 {
    let local = socket.local_addr().unwrap();
    let call_id = format!("ctl-reg-{user}-{domain}-{}", local.port());
    let contact: String = contacts.iter().map(|c| format!("Contact: <{c}>\r\n")).collect();
    let req = format!(
        "REGISTER sip:{domain} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id}-{cseq};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:{user}@{domain}>;tag=ctl\r\nTo: <sip:{user}@{domain}>\r\n\
         Call-ID: {call_id}\r\nCSeq: {cseq} REGISTER\r\n{contact}Expires: 600\r\nContent-Length: 0\r\n\r\n"
    );
    udp_final_status(socket, herald, &req, &call_id, &format!("REGISTER for {user}@{domain}"))
}

/// An OPTIONS for `uri` (a user of a served domain: routed, not answered by herald for itself)
/// from `socket`: its final status.
fn options_to(socket: &UdpSocket, herald: SocketAddr, uri: &str) -> u16 {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let local = socket.local_addr().unwrap();
    let call_id = format!("ctl-options-{n}-{}", local.port());
    let req = format!(
        "OPTIONS {uri} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\r\nMax-Forwards: 70\r\n\
         From: <sip:probe@example.com>;tag=o\r\nTo: <{uri}>\r\nCall-ID: {call_id}\r\nCSeq: 1 OPTIONS\r\n\
         Content-Length: 0\r\n\r\n"
    );
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut buf = vec![0u8; 65536];
    for _ in 0..10 {
        socket.send_to(req.as_bytes(), herald).unwrap();
        while let Ok((len, _)) = socket.recv_from(&mut buf) {
            let msg = &buf[..len];
            if header_of(msg, "Call-ID", "i") == Some(call_id.as_str()) {
                if let Some(st) = status_of(msg).filter(|st| *st >= 200) {
                    return st;
                }
            }
        }
    }
    panic!("OPTIONS {uri} not answered");
}

fn udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

#[test]
fn ctl_registrations_stats_bans_users_and_gateways() {
    let a = Admin::start("ctl_commands", true);
    let phone = udp();
    let alice1 = format!("sip:alice@{}", phone.local_addr().unwrap());
    let alice2 = "sip:alice@192.0.2.77:5070".to_string();
    assert_eq!(register(&phone, a.herald.addr, "alice", "example.com", &[&alice1, &alice2], 1), 200);
    assert_eq!(register(&phone, a.herald.addr, "bob", "example.com", &["sip:bob@192.0.2.78:5060"], 1), 200);
    assert_eq!(register(&phone, a.herald.addr, "carol", "example.com", &["sip:carol@192.0.2.79:5060"], 1), 200);

    // registrations list: human lines, and --json pages that hold every binding once.
    let human = a.ok(&["registrations", "list"]);
    for c in [&alice1, &alice2, "sip:bob@192.0.2.78:5060", "sip:carol@192.0.2.79:5060"] {
        assert!(human.contains(c), "{c} in:\n{human}");
    }
    let before = a.bindings();
    assert_eq!(before.len(), 4, "{before:?}");
    let pages = a.json(&["registrations", "list", "--page", "1"]);
    assert!(pages.len() >= 3, "one binding per page asked: {} pages", pages.len());
    let only_bob = a.json(&["registrations", "list", "--prefix", "bo"]);
    let bobs: Vec<&Value> = only_bob.iter().flat_map(|p| p["registrations"].as_array().unwrap()).collect();
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0]["aor"], "bob@example.com");
    let by_user = a.json(&["registrations", "list", "--user", "carol"]);
    assert_eq!(by_user.iter().map(|p| p["registrations"].as_array().unwrap().len()).sum::<usize>(), 1);

    // show: both forms.
    let shown = a.ok(&["registrations", "show", "sip:alice@example.com"]);
    assert!(shown.contains(&alice1) && shown.contains(&alice2), "{shown}");
    let shown = &a.json(&["registrations", "show", "alice@example.com"])[0];
    assert_eq!(shown["bindings"].as_array().unwrap().len(), 2);
    assert!(shown["bindings"][0]["expires_in"].as_u64().unwrap() > 500);

    // Bad input changes nothing.
    let e = a.fails(&["registrations", "show", "nobody@example.com"], 1);
    assert!(e.contains("no bindings for 'nobody@example.com'"), "{e}");
    let e = a.fails(&["registrations", "remove", "nobody@example.com"], 1);
    assert!(e.contains("no bindings"), "{e}");
    let e = a.fails(&["registrations", "remove", "alice@example.com", "--contact", "sip:alice@198.51.100.1"], 1);
    assert!(e.contains("no binding with contact"), "{e}");
    let e = a.fails(&["registrations", "show", "example.com"], 1);
    assert!(e.contains("no user part"), "{e}");
    let e = a.fails(&["call", "registrations.remove", r#"{"aor": 5}"#], 1);
    assert!(e.contains("-32602"), "invalid params: {e}");
    let e = a.fails(&["call", "no.such.method"], 1);
    assert!(e.contains("-32601"), "{e}");
    assert_eq!(a.bindings(), before, "nothing changed by bad input");

    // remove one binding, then a whole AoR; the registrar (asked by a REGISTER without
    // Contact, as a phone would) no longer has them.
    let out = a.ok(&["registrations", "remove", "alice@example.com", "--contact", &alice2]);
    assert!(out.contains("1 binding(s) removed"), "{out}");
    let removed = &a.json(&["registrations", "remove", "bob@example.com"])[0];
    assert_eq!(removed["removed"], 1);
    let after = a.bindings();
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.iter().all(|(aor, c)| aor != "bob@example.com" && c != &alice2));
    assert_eq!(register(&phone, a.herald.addr, "alice", "example.com", &[], 2), 200);
    a.fails(&["registrations", "show", "bob@example.com"], 1);

    // stats.
    let human = a.ok(&["stats"]);
    assert!(human.contains("transactions") && human.contains("location: 2 binding(s)"), "{human}");
    let stats = &a.json(&["stats"])[0];
    assert!(stats["registrar"]["accepted"].as_u64().unwrap() >= 4, "{stats}");
    assert!(stats["counters"]["udp_received"].as_u64().unwrap() >= 4);
    assert_eq!(stats["overload"]["shedding_workers"], 0);

    // bans: none in force; unbanning an innocent source is an error.
    assert!(a.ok(&["bans", "list"]).contains("0 in force"));
    assert_eq!(a.json(&["bans", "list"])[0]["total"], 0);
    let e = a.fails(&["bans", "unban", "192.0.2.1"], 1);
    assert!(e.contains("no ban"), "{e}");
    a.fails(&["bans", "unban", "not-an-ip"], 1);

    // users: added, in the file, listed, removed; removing again is an error.
    let out = a.ctl_with(&["users", "add", "dave@example.com", "--password-stdin"], Some(TOKEN), Some("s3cret\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("dave: added (realm example.com)"));
    let file = std::fs::read_to_string(&a.users).unwrap();
    assert!(file.contains("dave"), "{file}");
    assert!(a.ok(&["users", "list"]).contains("  dave"));
    let listed = &a.json(&["users", "list", "--realm", "example.com"])[0];
    assert_eq!(listed["realms"][0]["users"], serde_json::json!(["dave"]));
    let out = a.ctl_with(&["users", "add", "bad name", "--password-stdin"], Some(TOKEN), Some("pw\n"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    a.ok(&["users", "remove", "dave"]);
    assert!(!std::fs::read_to_string(&a.users).unwrap().contains("dave"));
    let e = a.fails(&["users", "remove", "dave"], 1);
    assert!(e.contains("no user 'dave'"), "{e}");

    // gateways: the set's destinations and their health; a forced state; unknown names change
    // nothing.
    let sets = &a.json(&["gateways", "list"])[0]["sets"];
    assert_eq!(sets[0]["name"], "carriers");
    assert_eq!(sets[0]["destinations"].as_array().unwrap().len(), 2);
    assert_eq!(sets[0]["destinations"][0]["effective"], "up");
    let e = a.fails(&["gateways", "set", "pstn", "sip:192.0.2.10:5060", "down"], 1);
    assert!(e.contains("no gateway set 'pstn'"), "{e}");
    let e = a.fails(&["gateways", "set", "carriers", "sip:192.0.2.99:5060", "down"], 1);
    assert!(e.contains("has no destination"), "{e}");
    let out = a.ok(&["gateways", "set", "carriers", "sip:192.0.2.10:5060", "down"]);
    assert!(out.contains("down (forced down)"), "{out}");
    let human = a.ok(&["gateways", "list"]);
    assert!(
        human.contains("sip:192.0.2.10:5060  down (forced down)") && human.contains("sip:192.0.2.11:5060  up"),
        "{human}"
    );
    let back = &a.json(&["gateways", "set", "carriers", "sip:192.0.2.10:5060", "auto"])[0];
    assert_eq!((back["effective"].as_str(), back["forced"].is_null()), (Some("up"), true));

    // The changes are counted on the metrics endpoint.
    let url = a.herald.metrics_url.clone().unwrap();
    let text = herald_bench::scrape::fetch(&url).unwrap_or_else(|e| panic!("scrape: {e}"));
    assert!(text.sum("herald_admin_changes_total", &[("method", "registrations.remove"), ("outcome", "done")]) >= 2.0);
    assert!(text.sum("herald_admin_changes_total", &[("method", "gateways.set_state"), ("outcome", "refused")]) >= 2.0);

    // Every change is logged with who made it.
    let log = a.herald.log_text();
    assert!(log.contains("admin: change made") && log.contains("token:ops"), "{log}");
    assert!(log.contains("admin: change refused"));
}

#[test]
fn ctl_refuses_bad_tokens_malformed_requests_and_oversized_bodies() {
    let a = Admin::start("ctl_bad_input", true);
    let phone = udp();
    assert_eq!(register(&phone, a.herald.addr, "erin", "example.com", &["sip:erin@192.0.2.80:5060"], 1), 200);
    let before = a.bindings();

    for token in [None, Some("wrong-token-0123456789")] {
        let out = a.ctl_with(&["registrations", "remove", "erin@example.com"], token, None);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert!(stderr(&out).contains("401"), "{}", stderr(&out));
    }
    // The endpoint and the token found in the configuration herald runs with.
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["ctl", "--config", a.config.to_str().unwrap(), "--json", "stats"])
        .env_remove("HERALD_ADMIN_URL")
        .env_remove("HERALD_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["workers"].is_u64());
    assert!(a.herald.log_text().contains("admin: request refused (401"));
    let scrape = herald_bench::scrape::fetch(a.herald.metrics_url.as_deref().unwrap()).unwrap();
    assert_eq!(scrape.sum("herald_admin_unauthorized_total", &[]), 2.0, "both refusals counted");
    assert_eq!(a.bindings(), before);

    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |body: &str| {
        let mut r = agent
            .post(&a.url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap())
    };
    let code = |body: &str| -> i64 {
        let (status, text) = post(body);
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["error"]["code"].as_i64().unwrap()
    };
    assert_eq!(code("{\"jsonrpc\": \"2.0\", \"method\": "), -32700);
    assert_eq!(code(r#"{"method": "registrations.remove", "params": {"aor": "erin@example.com"}, "id": 1}"#), -32600);
    assert_eq!(code(r#"{"jsonrpc": "2.0", "method": "registrations.remove", "params": ["erin"], "id": 1}"#), -32602);
    assert_eq!(code(r#"{"jsonrpc": "2.0", "method": "registrations.remove", "params": {"who": 1}, "id": 1}"#), -32602);
    let big = format!(
        r#"{{"jsonrpc": "2.0", "method": "registrations.remove", "params": {{"aor": "erin@example.com", "pad": "{}"}}, "id": 1}}"#,
        "x".repeat(70_000)
    );
    assert_eq!(post(&big).0, 413, "over [admin] max_body_bytes");
    let (status, _) = agent.get(&a.url).call().map(|r| (r.status().as_u16(), ())).unwrap();
    assert_eq!(status, 405);
    assert_eq!(a.bindings(), before, "nothing changed");
}

#[test]
fn reload_by_ctl_and_sighup_applies_or_refuses_while_serving() {
    let a = Admin::start("ctl_reload", false);
    let phone = udp();
    // other.example is not served yet: its REGISTER is proxied towards that (unresolvable)
    // domain and fails.
    assert_ne!(register(&phone, a.herald.addr, "frank", "other.example", &["sip:frank@192.0.2.81:5060"], 1), 200);

    // A prober keeps asking herald for OPTIONS during the reloads: none may go unanswered.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let (stop, herald) = (stop.clone(), a.herald.addr);
        std::thread::spawn(move || {
            let s = udp();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                udp_options_ok(&s, herald, &format!("ctl-probe-{n}"), Duration::from_secs(2)).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            n
        })
    };

    let text = std::fs::read_to_string(&a.config).unwrap();
    let served = text.replace("domains = [\"example.com\"]", "domains = [\"example.com\", \"other.example\"]").replace(
        "{ uri = \"sip:192.0.2.11:5060\" }]",
        "{ uri = \"sip:192.0.2.11:5060\" }, { uri = \"sip:192.0.2.12:5060\" }]",
    );
    // And a routing rule: requests for blocked* users are refused.
    let served = format!("{served}[[route]]\nname = \"blocked\"\nuser_prefix = [\"blocked\"]\nreject = 403\n");
    assert_ne!(served, text);
    assert!(served.contains("192.0.2.12"));
    let blocked = |a: &Admin| options_to(&phone, a.herald.addr, "sip:blocked7@example.com");
    assert_ne!(blocked(&a), 403, "no rule yet");
    a.ok(&["gateways", "set", "carriers", "sip:192.0.2.10:5060", "down"]);
    let original = text.clone();
    let out = a.json(&["reload"]);
    assert_eq!(out[0]["changed"], serde_json::json!([]), "same values: nothing to apply");

    std::fs::write(&a.config, &served).unwrap();
    let out = a.ok(&["reload"]);
    assert!(out.contains("reloaded: domains, route, gateway_set changed"), "{out}");
    assert_eq!(blocked(&a), 403, "the new routing table is in force");
    // The kept destination keeps its (forced) health; the new one is up.
    let dests = a.json(&["gateways", "list"])[0]["sets"][0]["destinations"].clone();
    assert_eq!(dests.as_array().unwrap().len(), 3);
    assert_eq!((dests[0]["uri"].as_str(), dests[0]["forced"].as_str()), (Some("sip:192.0.2.10:5060"), Some("down")));
    assert_eq!((dests[2]["uri"].as_str(), dests[2]["effective"].as_str()), (Some("sip:192.0.2.12:5060"), Some("up")));
    assert_eq!(register(&phone, a.herald.addr, "frank", "other.example", &["sip:frank@192.0.2.81:5060"], 2), 200);
    assert_eq!(a.json(&["registrations", "show", "frank@other.example"])[0]["bindings"].as_array().unwrap().len(), 1);

    // An invalid file: refused with FILE:LINE: key, and the running configuration stays.
    std::fs::write(&a.config, served.replace("[server]\n", "[server]\nworkrs = 3\n")).unwrap();
    let e = a.fails(&["reload"], 1);
    assert!(e.contains("herald.toml:") && e.contains("server.workrs"), "{e}");
    // A value that needs a restart: refused, naming the section.
    std::fs::write(&a.config, served.replace("workers = 2", "workers = 3")).unwrap();
    let e = a.fails(&["reload"], 1);
    assert!(e.contains("server cannot change while herald runs"), "{e}");
    assert_eq!(register(&phone, a.herald.addr, "frank", "other.example", &["sip:frank@192.0.2.81:5060"], 3), 200);

    // SIGHUP: an invalid file is refused (logged), then a valid change applies.
    std::fs::write(&a.config, served.replace("[server]\n", "[server]\nworkrs = 3\n")).unwrap();
    let hup = |pid| signal(pid, SIGHUP);
    let count = |needle: &str| a.herald.log_text().matches(needle).count();
    let (refused, reloaded) = (count("configuration not reloaded"), count("configuration reloaded"));
    hup(a.herald.pid());
    wait_for_log(&a, "configuration not reloaded; nothing changed", refused + 1);
    std::fs::write(&a.config, &original).unwrap();
    hup(a.herald.pid());
    wait_for_log(&a, "configuration reloaded", reloaded + 1);
    assert_ne!(register(&phone, a.herald.addr, "grace", "other.example", &["sip:grace@192.0.2.82:5060"], 1), 200);
    assert!(a.herald.log_text().contains("who=signal SIGHUP"), "{}", a.herald.log_text());

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let probes = prober.join().expect("every OPTIONS answered during the reloads");
    assert!(probes > 0);
    assert!(a.herald.log_text().contains("who=signal SIGHUP changed=[\"domains\",\"route\",\"gateway_set\"]"));
    assert_ne!(blocked(&a), 403, "the rule is gone again");
}

/// Waits until `needle` appears `times` times in herald's log.
fn wait_for_log(a: &Admin, needle: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.herald.log_text().matches(needle).count() < times {
        assert!(Instant::now() < deadline, "'{needle}' not logged {times}x:\n{}", a.herald.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_public_admin_listen_without_token_is_refused_at_start() {
    let dir = test_dir("ctl_public_listen");
    let config = dir.join("herald.toml");
    let base = port_block();
    std::fs::write(&config, format!("[auth]\nenabled = false\n[admin]\nlisten = \"0.0.0.0:{}\"\n", base + 1)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--listen", &format!("127.0.0.1:{base}"), "--config", config.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("herald.toml:4: key 'admin.listen'") && e.contains("bearer token"), "{e}");
    // herald ctl reading the same file refuses it the same way.
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["ctl", "--config", config.to_str().unwrap(), "stats"])
        .env_remove("HERALD_ADMIN_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A newcomer's path: `herald serve` without `--config` answers `herald ctl` without flags
/// (the built-in configuration's endpoint on 127.0.0.1:5090). In a network namespace of its
/// own (`unshare --net`, root), so that ports 5060 and 5090 meet nothing else on the machine.
#[test]
fn the_builtin_configuration_answers_herald_ctl_without_flags() {
    let dir = test_dir("ctl_builtin");
    let herald = env!("CARGO_BIN_EXE_herald");
    let script = r#"
        ip link set lo up || exit 90
        "$0" serve --listen 127.0.0.1:5060 2>herald.log &
        pid=$!
        trap 'kill $pid 2>/dev/null; wait $pid' EXIT
        for i in $(seq 1 200); do
            "$0" ctl stats >stats.txt 2>ctl.err && break
            sleep 0.05
        done
        "$0" ctl --json stats >stats.json || exit 91
        "$0" ctl reload 2>reload.err; echo "reload exit $?" >>reload.err
    "#;
    let out = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", script, herald])
        .current_dir(&dir)
        .env_remove("HERALD_ADMIN_URL")
        .env_remove("HERALD_ADMIN_TOKEN")
        .env_remove("HERALD_CONFIG")
        .output()
        .expect("unshare (util-linux)");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\nctl: {}\nherald: {}",
        String::from_utf8_lossy(&out.stderr),
        read("ctl.err"),
        read("herald.log")
    );
    assert!(read("stats.txt").contains("transactions"), "{}", read("stats.txt"));
    let stats: Value = serde_json::from_str(read("stats.json").trim()).unwrap();
    assert!(stats["workers"].as_u64().unwrap() >= 1);
    // Nothing to reload on the built-in configuration: refused, herald keeps serving.
    let reload = read("reload.err");
    assert!(reload.contains("built-in configuration") && reload.contains("reload exit 1"), "{reload}");
    assert!(read("herald.log").contains("admin endpoint: JSON-RPC 2.0"), "{}", read("herald.log"));
}

/// A REGISTER for `user@example.com` answered with `password` when challenged: the final status.
fn register_with_password(socket: &UdpSocket, herald: SocketAddr, user: &str, password: &str) -> u16 {
    // Each REGISTER is a new transaction of one registration (Call-ID), CSeq rising.
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let local = socket.local_addr().unwrap();
    let request = |auth: &str| {
        let cseq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!(
            "REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-auth-{user}-{cseq}-{};rport\r\n\
             Max-Forwards: 70\r\nFrom: <sip:{user}@example.com>;tag=a\r\nTo: <sip:{user}@example.com>\r\n\
             Call-ID: ctl-auth-{user}-{}\r\nCSeq: {cseq} REGISTER\r\nContact: <sip:{user}@{local}>\r\n{auth}\
             Expires: 600\r\nContent-Length: 0\r\n\r\n",
            local.port(),
            local.port()
        )
    };
    let exchange = |req: String| -> Vec<u8> {
        socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut buf = vec![0u8; 65536];
        for _ in 0..10 {
            socket.send_to(req.as_bytes(), herald).unwrap();
            if let Ok((n, _)) = socket.recv_from(&mut buf) {
                if status_of(&buf[..n]).is_some_and(|s| s >= 200) {
                    return buf[..n].to_vec();
                }
            }
        }
        panic!("REGISTER not answered");
    };
    let challenge = exchange(request(""));
    assert_eq!(status_of(&challenge), Some(401));
    let value = header_of(&challenge, "WWW-Authenticate", "WWW-Authenticate").unwrap().to_string();
    let param = |name: &str| {
        let at = value.find(&format!("{name}=\"")).map(|i| i + name.len() + 2)?;
        Some(value[at..at + value[at..].find('"')?].to_string())
    };
    let (realm, nonce, opaque) = (param("realm").unwrap(), param("nonce").unwrap(), param("opaque"));
    let answer = herald_credentials::Answer {
        algorithm: herald_credentials::Algorithm::Md5,
        sess: false,
        user,
        realm: &realm,
        nonce: &nonce,
        uri: "sip:example.com",
        nc: value.contains("qop").then_some(1),
        cnonce: "ctl0123",
        opaque: opaque.as_deref(),
    };
    let auth = format!("Authorization: {}\r\n", answer.header_value("REGISTER", password));
    status_of(&exchange(request(&auth))).unwrap()
}

#[test]
fn users_added_through_ctl_authenticate_and_removed_ones_do_not() {
    let a = Admin::start_with("ctl_users_auth", false, true);
    let phone = udp();
    assert_eq!(register_with_password(&phone, a.herald.addr, "eve", "pw-eve-1"), 401, "no such user yet");
    let out = a.ctl_with(&["users", "add", "eve", "--password-stdin"], None, Some("pw-eve-1\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(register_with_password(&phone, a.herald.addr, "eve", "pw-eve-1"), 200, "in use at once");
    assert_eq!(register_with_password(&phone, a.herald.addr, "eve", "wrong"), 401);
    let out = a.ctl_with(&["users", "remove", "eve"], None, None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(register_with_password(&phone, a.herald.addr, "eve", "pw-eve-1"), 401, "removed");
}

#[test]
fn a_removal_through_ctl_is_kept_by_the_durable_store_over_a_restart() {
    let a = Admin::start("ctl_durable_removal", true);
    let phone = udp();
    for user in ["henry", "iris"] {
        let contact = format!("sip:{user}@192.0.2.90:5060");
        assert_eq!(register(&phone, a.herald.addr, user, "example.com", &[&contact], 1), 200);
    }
    a.ok(&["registrations", "remove", "iris@example.com"]);
    let before = a.bindings();
    assert_eq!(before.len(), 1, "{before:?}");
    // [location] is write-back (the default): the removal is in the database within
    // write_back_interval_ms (1 s), and a clean stop writes what is pending.
    std::thread::sleep(Duration::from_millis(1500));
    let dir = a.herald.dir.clone();
    assert!(a.herald.stop().is_some_and(|st| st.success()));
    let b = Admin::start_in(&dir, true, false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.bindings() != before {
        assert!(Instant::now() < deadline, "after the restart: {:?}, wanted {before:?}", b.bindings());
        std::thread::sleep(Duration::from_millis(100));
    }
    b.fails(&["registrations", "show", "iris@example.com"], 1);
}

/// Calls keep going through reloads: a SIPp caller places calls through herald to a SIPp
/// callee registered as bob while the configuration is reloaded (a change applied, a file that
/// does not load, a change that needs a restart, SIGHUP): every call completes.
#[test]
fn calls_complete_while_the_configuration_is_reloaded() {
    let dir = test_dir("ctl_reload_calls");
    let admin_port = port_block();
    let extras = HeraldExtras {
        workers: Some(2),
        toml: Some(format!(
            "[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n"
        )),
        ..Default::default()
    };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    wait_bound(admin_port, true);
    let url = format!("http://127.0.0.1:{admin_port}/");
    let mut a = Admin { url, config: dir.join("herald.toml"), users: dir.join("users.txt"), herald };
    let h = a.herald.addr.to_string();
    let uas = Sipp::start(
        &dir,
        "uas",
        "uas_routed.xml",
        &["-m", "100", "-timeout", "60", "-key", "proxy_hostport", &h, "-key", "expected_rr", &format!("sip:{h};lr ")],
    );
    wait_bound(uas.port, false);
    let port = uas.port.to_string();
    let reg = ["-s", "bob", "-key", "contact_host", "127.0.0.1", "-key", "contact_port", &port, "-m", "1"];
    Sipp::start(&dir, "register", "register.xml", &[&[h.as_str()][..], &reg[..], &["-timeout", "30"]].concat())
        .wait_watching(&mut a.herald, Duration::from_secs(60))
        .assert_all_successful(1);
    let uac =
        Sipp::start(&dir, "uac", "uac.xml", &[&h, "-s", "bob", "-r", "25", "-m", "100", "-d", "500", "-timeout", "60"]);

    let text = std::fs::read_to_string(&a.config).unwrap();
    let aliased = format!("aliases = [\"pbx.example.net\"]\n{text}");
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(400));
        std::fs::write(&a.config, if round % 2 == 0 { &aliased } else { &text }).unwrap();
        assert!(a.ok(&["reload"]).contains("aliases changed"));
        std::fs::write(&a.config, text.replace("[server]\n", "[server]\nworkrs = 1\n")).unwrap();
        a.fails(&["reload"], 1);
        std::fs::write(&a.config, text.replace("workers = 2", "workers = 1")).unwrap();
        a.fails(&["reload"], 1);
    }
    std::fs::write(&a.config, &text).unwrap();
    signal(a.herald.pid(), SIGHUP);

    let uac = uac.wait_watching(&mut a.herald, Duration::from_secs(90));
    let uas = uas.wait_watching(&mut a.herald, Duration::from_secs(30));
    uac.assert_all_successful(100);
    uas.assert_all_successful(100);
    let log = a.herald.log_text();
    assert!(log.matches("configuration reloaded").count() >= 4, "three by ctl, one by SIGHUP:\n{log}");
}
