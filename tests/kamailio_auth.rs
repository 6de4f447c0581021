//! Kamailio 5.6 as an authenticating next hop of herald (RFC 3261 §22.3): herald forwards an
//! INVITE for a domain it does not serve (Request-URI `sip:bob@127.0.0.1:KPORT`) to Kamailio
//! (tests/kamailio_auth/proxy.cfg: auth module, password in the file, no database), which
//! challenges with 407 for its own realm `kamailio.test`, then relays the authenticated call to
//! a SIPp callee (tests/sipp/uas.xml). A proxy consumes only the credentials of its own realm
//! (§22.3), so herald must pass Kamailio's 407 back and Kamailio's Proxy-Authorization forward
//! untouched, with its own `[auth]` off or on.
//!
//! a. herald's `[auth]` off; SIPp caller (tests/kamailio_auth/uac.xml, `-au`/`-ap`).
//! b. herald's `[auth]` on (realm `herald.test`) but not demanded of this call
//!    (`local_callers = false`): herald's code that strips its own realm's credentials runs and
//!    must leave Kamailio's alone. SIPp caller.
//! c. Both challenge: herald (local callers, realm `herald.test`) and Kamailio. SIPp 3.6 cannot
//!    do this: `[authentication]` answers only the last challenge received, so its retry carries
//!    Kamailio's credentials without herald's, herald challenges again, and so on. The caller is
//!    therefore a small UDP user agent in this file that keeps one answer per realm and sends
//!    both (§22.3 lets a UAC send one Proxy-Authorization value per realm it has credentials
//!    for), as phones do.
//! d. Without Kamailio: herald's `/metrics` shows the digest authentication outcomes and the
//!    registrar's refusals (`max_bindings_per_aor`), moved by real requests.
//! e. Challenge merging (§16.7 step 9): herald forks to two Kamailios with two realms and sends
//!    one 407 carrying both challenges; the caller (this file's user agent again: SIPp reads only
//!    the first challenge) answers both in one request.
//!
//! Every call is INVITE/407/ACK, INVITE with credentials, 100/180/200, ACK, BYE/200. The tests
//! check the callee's message log: the INVITE carries exactly the caller's Proxy-Authorization
//! values for Kamailio's realms (byte for byte), none for `herald.test`, and Kamailio's
//! `X-Kamailio-Auth` header (its proof that it checked them); and Kamailio's log, which names
//! each INVITE it challenged with the number of Proxy-Authorization headers it carried. Ports:
//! Kamailio, SIPp and the hand-made caller in 18100-18199 (a block of 20 per test), herald from
//! tests/common's `port_block()`. Logs: a temp directory, kept when a test fails.

mod common;
mod kamailio_support;

use common::{herald_users_add, Herald, HeraldConfig, HeraldExtras};
use herald_bench::scrape;
use herald_core::auth::Algorithm;
use herald_sip::headers::AuthValue;
use kamailio_support::{
    read_messages, run_sipp, sipp_ports, start_uas, wait_udp_bound, Logged, Proc, Scratch, KAMAILIO, KAMAILIO_MODULES,
};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const KAMAILIO_REALM: &str = "kamailio.test";
/// The password in tests/kamailio_auth/proxy.cfg (any user name; the cfg admits only alice).
const KAMAILIO_PASSWORD: &str = "kamailio-secret";
const HERALD_REALM: &str = "herald.test";
const HERALD_PASSWORD: &str = "alice-at-herald";

/// The ports of one test: block `i` of 20 in 18100-18199. Kamailio (and a second one), the
/// callee SIPp (SIP, control, media: +0, +1, +2 and +4), the calling SIPp (same), the hand-made
/// caller.
struct Ports {
    kamailio: u16,
    kamailio2: u16,
    uas: u16,
    uac: u16,
    ua: u16,
}

fn ports(block: u16) -> Ports {
    assert!(block < 5);
    let base = 18100 + 20 * block;
    Ports { kamailio: base, kamailio2: base + 1, uas: base + 2, uac: base + 8, ua: base + 14 }
}

fn require_tools() {
    kamailio_support::require_tools();
    for m in ["auth", "xlog"] {
        let so = Path::new(KAMAILIO_MODULES).join(format!("{m}.so"));
        assert!(so.exists(), "Kamailio module {} missing", so.display());
    }
}

/// Kamailio `name` (its log: `NAME.log`) with tests/kamailio_auth/proxy.cfg on UDP
/// 127.0.0.1:`port`, challenging for `realm`, relaying authenticated calls to the callee at
/// `uas` (or, `busy`, answering them 486).
fn start_kamailio(s: &Scratch, name: &'static str, port: u16, realm: &str, uas: u16, busy: bool) -> Proc {
    let cfg = kamailio_support::repo().join("tests/kamailio_auth/proxy.cfg");
    let run = s.path(&format!("{name}-run"));
    std::fs::create_dir_all(&run).unwrap();
    let mut cmd = Command::new(KAMAILIO);
    cmd.arg("-f").arg(&cfg).args(["-DD", "-E", "-m", "32", "-M", "8", "-w"]).arg(&run).arg("-Y").arg(&run);
    cmd.args(["-l", &format!("udp:127.0.0.1:{port}")]);
    cmd.args(["-A", &format!("UAS_URI=\"sip:127.0.0.1:{uas}\""), "-A", &format!("REALM=\"{realm}\"")]);
    if busy {
        cmd.args(["-A", "BUSY"]);
    }
    if let Ok(level) = std::env::var("KAMAILIO_DEBUG") {
        cmd.arg(format!("--debug={level}"));
    }
    let mut k = Proc::spawn(name, &mut cmd, &s.0);
    wait_udp_bound(&mut k, &s.0, port);
    k
}

/// `herald users add alice` for `herald.test` into `file`.
fn add_user(file: &Path) {
    herald_users_add("alice", HERALD_PASSWORD, &["--realm", HERALD_REALM, "--file", file.to_str().unwrap()]);
}

/// herald (tests/common) with `auth` as its `[auth]` body (`None`: `enabled = false`), loopback
/// trusted by `[flood]`, plus `more` TOML.
fn start_herald(s: &Scratch, auth: Option<&str>, more: &str, metrics: bool) -> Herald {
    let auth = match auth {
        Some(body) => {
            let users = s.path("users.txt");
            add_user(&users);
            format!("realm = \"{HERALD_REALM}\"\nusers_file = \"{}\"\nalgorithms = [\"MD5\"]\n{body}", users.display())
        }
        None => "enabled = false\n".into(),
    };
    let toml = format!("[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\n{auth}{more}");
    let cfg = HeraldConfig { drain_timeout_s: Some(1), ..Default::default() };
    Herald::start_with(&s.0, &cfg, &HeraldExtras { metrics, toml: Some(toml), ..Default::default() })
}

/// One call from SIPp (tests/kamailio_auth/uac.xml) as alice through herald to bob at Kamailio,
/// answering Kamailio's challenge with `-au alice -ap <Kamailio's password>`. Returns the
/// caller's and the callee's message logs.
fn sipp_call(s: &Scratch, p: &Ports, herald: &Herald) -> (Vec<Logged>, Vec<Logged>) {
    let scenario = kamailio_support::repo().join("tests/kamailio_auth/uac.xml");
    let mut args: Vec<String> = vec![herald.addr.to_string(), "-sf".into(), scenario.display().to_string()];
    for a in ["-s", "bob", "-key", "caller", "alice", "-au", "alice", "-ap", KAMAILIO_PASSWORD, "-key", "target"] {
        args.push(a.into());
    }
    args.push(format!("127.0.0.1:{}", p.kamailio));
    args.extend(sipp_ports(p.uac));
    args.extend(["-m", "1"].map(String::from));
    let status = run_sipp(s, "uac", &args, 20);
    let (ok, failed) = kamailio_support::call_counts(&s.path("uac.csv"));
    assert_eq!((ok, failed, status.success()), (1, 0, true), "call (successful, failed, exit 0); see uac.msg");
    // The callee's log is written as messages pass; the BYE's 200 is the last one.
    wait_for(|| read_messages(&s.path("uas.msg")).iter().any(|m| !m.received && m.is_response(200, "BYE")));
    (read_messages(&s.path("uac.msg")), read_messages(&s.path("uas.msg")))
}

fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every value of the header `name` (case-insensitive), one per line, not split at commas
/// (`Logged::header` splits lists; a digest challenge or answer is one value with commas inside,
/// and RFC 3261 §20.27/§20.28 lets these headers appear only once per value).
fn auth_lines(m: &Logged, name: &str) -> Vec<String> {
    m.text
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_owned())
        .collect()
}

/// The realm of a challenge or credentials value.
fn realm_of(value: &str) -> String {
    let v = AuthValue::parse(value.as_bytes()).unwrap_or_else(|e| panic!("{value}: {e:?}"));
    v.param("realm").unwrap_or_else(|| panic!("no realm in {value}")).into_owned()
}

/// The callee got one INVITE, authenticated by Kamailio, whose Proxy-Authorization values are
/// exactly `sent` (the caller's values for Kamailio's realm, in order, byte for byte).
fn assert_callee_got(uas: &[Logged], sent: &[String]) {
    let invites: Vec<&Logged> = uas.iter().filter(|m| m.received && m.is_request("INVITE")).collect();
    assert_eq!(invites.len(), 1, "INVITEs at the callee");
    let invite = invites[0];
    assert_eq!(invite.header("X-Kamailio-Auth"), ["alice"], "Kamailio authenticated the call:\n{}", invite.text);
    let got = auth_lines(invite, "Proxy-Authorization");
    assert_eq!(&got, sent, "Proxy-Authorization forwarded by herald (then Kamailio):\n{}", invite.text);
    for value in &got {
        assert_eq!(realm_of(value), KAMAILIO_REALM, "only Kamailio's realm reaches the callee");
    }
    assert!(uas.iter().any(|m| m.received && m.is_request("ACK")), "the 2xx ACK reached the callee");
    assert!(uas.iter().any(|m| m.received && m.is_request("BYE")), "the BYE reached the callee");
}

/// The SIPp caller's side of a call: one 407, from Kamailio (its realm only), then the
/// credentials it sent for that realm.
fn caller_side(uac: &[Logged]) -> Vec<String> {
    let challenges: Vec<&Logged> = uac.iter().filter(|m| m.received && m.is_response(407, "INVITE")).collect();
    assert_eq!(challenges.len(), 1, "one 407 reached the caller through herald");
    let realms: Vec<String> = auth_lines(challenges[0], "Proxy-Authenticate").iter().map(|v| realm_of(v)).collect();
    assert_eq!(realms, [KAMAILIO_REALM], "Kamailio's challenge, relayed by herald:\n{}", challenges[0].text);
    let answers: Vec<&Logged> = uac.iter().filter(|m| !m.received && m.is_request("INVITE")).collect();
    let sent = auth_lines(answers.last().expect("INVITE sent"), "Proxy-Authorization");
    assert_eq!(sent.len(), 1, "SIPp answered one realm: {sent:?}");
    assert_eq!(realm_of(&sent[0]), KAMAILIO_REALM);
    sent
}

/// The lines of Kamailio `name`'s log that contain `what`: "challenging INVITE" (with the
/// CSeq and how many Proxy-Authorization headers arrived: `cseq=N pa_count=N`) or
/// "authenticated INVITE".
fn kamailio_log(s: &Scratch, name: &str, what: &str) -> Vec<String> {
    let log = std::fs::read_to_string(s.path(&format!("{name}.log"))).unwrap_or_default();
    log.lines().filter(|l| l.contains(what)).map(|l| l.to_owned()).collect()
}

#[test]
fn a_herald_without_auth_relays_kamailios_challenge_and_credentials() {
    require_tools();
    let s = Scratch::new("auth-a");
    let p = ports(0);
    let _kamailio = start_kamailio(&s, "kamailio", p.kamailio, KAMAILIO_REALM, p.uas, false);
    let _uas = start_uas(&s, p.uas);
    let herald = start_herald(&s, None, "", false);
    let (uac, uas) = sipp_call(&s, &p, &herald);
    let sent = caller_side(&uac);
    assert_callee_got(&uas, &sent);
}

#[test]
fn b_herald_with_auth_leaves_another_realms_credentials_alone() {
    require_tools();
    let s = Scratch::new("auth-b");
    let p = ports(1);
    let _kamailio = start_kamailio(&s, "kamailio", p.kamailio, KAMAILIO_REALM, p.uas, false);
    let _uas = start_uas(&s, p.uas);
    // [auth] on with users, but herald demands no credentials of this call: the caller's
    // address is a trusted peer (issue 16: a request for a foreign target needs credentials or
    // a trusted source, whatever `local_callers` says).
    let herald = start_herald(&s, Some("local_callers = false\ntrusted_peers = [\"127.0.0.1\"]\n"), "", false);
    let (uac, uas) = sipp_call(&s, &p, &herald);
    let sent = caller_side(&uac);
    assert_callee_got(&uas, &sent);
    let challenged = kamailio_log(&s, "kamailio", "challenging INVITE");
    assert_eq!(challenged.len(), 1, "Kamailio challenged the first INVITE only: {challenged:?}");
}

/// A minimal UDP user agent (RFC 3261 §8.1) for one call: requests retransmitted every 500 ms
/// until answered (Timer A without the doubling), responses matched by Call-ID and CSeq.
struct Ua {
    socket: UdpSocket,
    local: SocketAddr,
    herald: SocketAddr,
    call_id: String,
    from: String,
    to: String,
    /// Everything sent and received, in order.
    log: Vec<Logged>,
    branches: u32,
}

impl Ua {
    fn new(port: u16, herald: SocketAddr, target: &str) -> Ua {
        let socket = UdpSocket::bind(("127.0.0.1", port)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let local = socket.local_addr().unwrap();
        Ua {
            socket,
            local,
            herald,
            call_id: format!("two-realms-{}@127.0.0.1", std::process::id()),
            from: format!("<sip:alice@{herald}>;tag=ua-{}", std::process::id()),
            to: format!("<sip:bob@{target}>"),
            log: Vec::new(),
            branches: 0,
        }
    }

    fn branch(&mut self) -> String {
        self.branches += 1;
        format!("z9hG4bK-ua-{}-{}", std::process::id(), self.branches)
    }

    /// A request; `to` is the To header (with a tag in a dialog), `extra` whole header lines.
    fn request(&self, method: &str, uri: &str, branch: &str, cseq: u32, to: &str, extra: &[String]) -> String {
        let mut m = format!(
            "{method} {uri} SIP/2.0\r\nVia: SIP/2.0/UDP {};branch={branch};rport\r\nMax-Forwards: 70\r\n\
             From: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {cseq} {method}\r\n",
            self.local, self.from, self.call_id
        );
        if method == "INVITE" {
            m += &format!("Contact: <sip:alice@{}>\r\n", self.local);
        }
        for line in extra {
            m += line;
            m += "\r\n";
        }
        m + "Content-Length: 0\r\n\r\n"
    }

    fn send(&mut self, text: &str) {
        self.socket.send_to(text.as_bytes(), self.herald).unwrap();
        self.log.push(Logged { received: false, text: text.replace("\r\n", "\n") });
    }

    /// Sends `text` and returns the final response to it (CSeq `cseq` of `method`).
    fn transaction(&mut self, text: &str, cseq: u32, method: &str) -> Logged {
        let want = format!("{cseq} {method}");
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut answered = false;
        let mut last_send = Instant::now();
        self.send(text);
        let mut buf = vec![0u8; 65536];
        loop {
            assert!(Instant::now() < deadline, "no final response to {want}; log:\n{}", self.dump());
            if !answered && last_send.elapsed() >= Duration::from_millis(500) {
                self.socket.send_to(text.as_bytes(), self.herald).unwrap();
                last_send = Instant::now();
            }
            let Ok((n, _)) = self.socket.recv_from(&mut buf) else { continue };
            let m = Logged { received: true, text: String::from_utf8_lossy(&buf[..n]).replace("\r\n", "\n") };
            let ours = m.header("Call-ID").first() == Some(&self.call_id) && m.header("CSeq").first() == Some(&want);
            let status = m.first_line().strip_prefix("SIP/2.0 ").and_then(|r| r.get(..3)?.parse::<u16>().ok());
            self.log.push(Logged { received: true, text: m.text.clone() });
            match status {
                Some(code) if ours => {
                    answered = true;
                    if code >= 200 {
                        return m;
                    }
                }
                _ => {} // a retransmitted 200 of an earlier request, ...
            }
        }
    }

    /// An INVITE to `uri` with these Proxy-Authorization values; returns its final response,
    /// which it ACKs when it is a failure (same branch and Request-URI, §17.1.1.3).
    fn invite(&mut self, uri: &str, cseq: u32, credentials: &[String]) -> Logged {
        let branch = self.branch();
        let lines: Vec<String> = credentials.iter().map(|c| format!("Proxy-Authorization: {c}")).collect();
        let req = self.request("INVITE", uri, &branch, cseq, &self.to.clone(), &lines);
        let resp = self.transaction(&req, cseq, "INVITE");
        if !resp.first_line().starts_with("SIP/2.0 2") {
            let to = resp.header("To").remove(0);
            let ack = self.request("ACK", uri, &branch, cseq, &to, &[]);
            self.send(&ack);
        }
        resp
    }

    /// ACK of the 2xx `ok` to INVITE `cseq`, then BYE, along the route set (§12.1.2: the
    /// Record-Route reversed) to the callee's Contact; returns the route set and the BYE's
    /// final response.
    fn ack_and_bye(&mut self, ok: &Logged, cseq: u32) -> (Vec<String>, Logged) {
        let route: Vec<String> = ok.header("Record-Route").into_iter().rev().collect();
        let contact = ok.header("Contact").remove(0);
        let remote = contact.trim_start_matches('<').split('>').next().unwrap().to_owned();
        let to = ok.header("To").remove(0);
        let routes: Vec<String> = route.iter().map(|r| format!("Route: {r}")).collect();
        let branch = self.branch();
        let ack = self.request("ACK", &remote, &branch, cseq, &to, &routes);
        self.send(&ack);
        let branch = self.branch();
        let bye = self.request("BYE", &remote, &branch, cseq + 1, &to, &routes);
        let resp = self.transaction(&bye, cseq + 1, "BYE");
        (route, resp)
    }

    fn dump(&self) -> String {
        self.log.iter().map(|m| format!("{} {}\n", if m.received { "<<" } else { ">>" }, m.text)).collect()
    }
}

/// A challenge's (realm, nonce).
fn challenge_of(response: &Logged) -> Vec<(String, String)> {
    auth_lines(response, "Proxy-Authenticate")
        .iter()
        .map(|v| {
            let a = AuthValue::parse(v.as_bytes()).unwrap();
            (a.param("realm").unwrap().into_owned(), a.param("nonce").unwrap().into_owned())
        })
        .collect()
}

/// A Proxy-Authorization value answering `realm`'s `nonce` with MD5 and qop=auth (RFC 7616
/// §3.4.1; what SIPp computes for one realm).
fn answer(realm: &str, password: &str, nonce: &str, method: &str, uri: &str, nc: u32) -> String {
    let h = |parts: &[&str]| Algorithm::Md5.hex_hash(&[parts.join(":").as_bytes()]);
    let (nc, cnonce) = (format!("{nc:08x}"), format!("c{realm}{nc}"));
    let response = h(&[&h(&["alice", realm, password]), nonce, &nc, &cnonce, "auth", &h(&[method, uri])]);
    format!(
        "Digest username=\"alice\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\", \
         algorithm=MD5, cnonce=\"{cnonce}\", qop=auth, nc={nc}"
    )
}

#[test]
fn c_herald_and_kamailio_both_challenge_one_answer_per_realm() {
    require_tools();
    let s = Scratch::new("auth-c");
    let p = ports(2);
    let _kamailio = start_kamailio(&s, "kamailio", p.kamailio, KAMAILIO_REALM, p.uas, false);
    let _uas = start_uas(&s, p.uas);
    // Default policy: calls from herald's own users (From in its domain, here its address) need
    // herald's credentials.
    let herald = start_herald(&s, Some(""), "", true);
    let target = format!("127.0.0.1:{}", p.kamailio);
    let uri = format!("sip:bob@{target}");
    let mut ua = Ua::new(p.ua, herald.addr, &target);
    let realms = |r: &Logged| challenge_of(r).into_iter().map(|(realm, _)| realm).collect::<Vec<_>>();

    // 1. No credentials: herald challenges for its realm.
    let r = ua.invite(&uri, 1, &[]);
    assert!(r.first_line().starts_with("SIP/2.0 407"), "{}", ua.dump());
    assert_eq!(realms(&r), [HERALD_REALM], "{}", ua.dump());
    // 2. A wrong password for herald: a fresh challenge from herald (a failure).
    let wrong = answer(HERALD_REALM, "guess", &challenge_of(&r)[0].1, "INVITE", &uri, 1);
    let r = ua.invite(&uri, 2, &[wrong]);
    assert_eq!(realms(&r), [HERALD_REALM], "{}", ua.dump());
    let herald_nonce = challenge_of(&r)[0].1.clone();
    // 3. Right for herald: herald consumes its credentials and forwards; Kamailio challenges for
    //    its realm and herald relays that 407 unchanged.
    let mine = answer(HERALD_REALM, HERALD_PASSWORD, &herald_nonce, "INVITE", &uri, 1);
    let r = ua.invite(&uri, 3, &[mine]);
    assert_eq!(realms(&r), [KAMAILIO_REALM], "{}", ua.dump());
    let kamailio_nonce = challenge_of(&r)[0].1.clone();
    // 4. What SIPp would send now: Kamailio's credentials only. herald challenges again (its
    //    realm has no answer), does not count a failure, and does not forward the request.
    let theirs = answer(KAMAILIO_REALM, KAMAILIO_PASSWORD, &kamailio_nonce, "INVITE", &uri, 1);
    let r = ua.invite(&uri, 4, &[theirs]);
    assert_eq!(realms(&r), [HERALD_REALM], "{}", ua.dump());
    let herald_nonce = challenge_of(&r)[0].1.clone();
    // 5. One answer per realm (§22.3), in one request: herald takes its own (and removes it),
    //    Kamailio gets its own untouched, authenticates, and the call goes to the callee.
    let mine = answer(HERALD_REALM, HERALD_PASSWORD, &herald_nonce, "INVITE", &uri, 1);
    let theirs = answer(KAMAILIO_REALM, KAMAILIO_PASSWORD, &kamailio_nonce, "INVITE", &uri, 2);
    let r = ua.invite(&uri, 5, &[theirs.clone(), mine]);
    assert!(r.first_line().starts_with("SIP/2.0 200"), "{}", ua.dump());
    let (route, bye) = ua.ack_and_bye(&r, 5);
    assert_eq!(route.len(), 2, "herald and Kamailio record-route: {route:?}");
    assert!(route[0].contains(&herald.addr.to_string()), "herald first: {route:?}");
    assert!(bye.first_line().starts_with("SIP/2.0 200"), "{}", ua.dump());

    wait_for(|| read_messages(&s.path("uas.msg")).iter().any(|m| !m.received && m.is_response(200, "BYE")));
    assert_callee_got(&read_messages(&s.path("uas.msg")), &[theirs]);
    // Kamailio challenged INVITE 3 (herald had removed its credentials: none left) and never saw
    // INVITEs 1, 2 and 4 (herald answered them).
    let challenged = kamailio_log(&s, "kamailio", "challenging INVITE");
    assert_eq!(challenged.len(), 1, "{challenged:?}");
    assert!(challenged[0].contains("cseq=3 ") && challenged[0].contains("pa_count=0 "), "{challenged:?}");
    // Failed authentications as the flood guard heard them ([flood] max_auth_failures): the
    // wrong password only, not the request that carried another realm's credentials alone.
    let url = herald.metrics_url.clone().unwrap();
    let m = scrape::fetch(&url).unwrap_or_else(|e| panic!("scrape {url}: {e}"));
    assert_eq!(m.get("herald_auth_failures_total", &[]), Some(1.0));
}

/// §16.7 step 9: herald forks a call to both contacts of bob, two Kamailios with two realms;
/// both challenge, and herald sends the caller one 407 carrying both challenges. The caller
/// answers both in one request, which herald forwards to both branches with both answers; each
/// Kamailio takes its own realm's. One answers busy (486), the other relays to the callee (200).
#[test]
fn e_forked_call_merges_two_challenges_and_carries_both_answers() {
    require_tools();
    const REALM_A: &str = "kamailio-a.test";
    const REALM_B: &str = "kamailio-b.test";
    let s = Scratch::new("auth-e");
    let p = ports(4);
    let _a = start_kamailio(&s, "kamailio", p.kamailio, REALM_A, p.uas, false);
    let _b = start_kamailio(&s, "kamailio-b", p.kamailio2, REALM_B, p.uas, true);
    let _uas = start_uas(&s, p.uas);
    let herald = start_herald(&s, None, "", false);
    let h = herald.addr;
    let mut ua = Ua::new(p.ua, h, &h.to_string());
    let contacts = format!("<sip:bob@127.0.0.1:{}>, <sip:bob@127.0.0.1:{}>", p.kamailio, p.kamailio2);
    let (status, _, m) = udp_exchange(&ua.socket, h, &register(h, ua.local, "bob", 1, &contacts, None));
    assert_eq!((status, m.header("Contact").len()), (200, 2), "{}", m.text);

    let uri = format!("sip:bob@{h}");
    let r = ua.invite(&uri, 1, &[]);
    assert!(r.first_line().starts_with("SIP/2.0 407"), "{}", ua.dump());
    let mut ch = challenge_of(&r);
    ch.sort();
    assert_eq!(ch.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), [REALM_A, REALM_B], "merged:\n{}", r.text);
    let a = answer(REALM_A, KAMAILIO_PASSWORD, &ch[0].1, "INVITE", &uri, 1);
    let b = answer(REALM_B, KAMAILIO_PASSWORD, &ch[1].1, "INVITE", &uri, 1);
    let r = ua.invite(&uri, 2, &[a.clone(), b.clone()]);
    assert!(r.first_line().starts_with("SIP/2.0 200"), "{}", ua.dump());
    let (_, bye) = ua.ack_and_bye(&r, 2);
    assert!(bye.first_line().starts_with("SIP/2.0 200"), "{}", ua.dump());

    wait_for(|| read_messages(&s.path("uas.msg")).iter().any(|m| !m.received && m.is_response(200, "BYE")));
    let uas = read_messages(&s.path("uas.msg"));
    let invite = uas.iter().find(|m| m.received && m.is_request("INVITE")).expect("INVITE at the callee");
    assert_eq!(invite.header("X-Kamailio-Auth"), ["alice"], "{}", invite.text);
    assert_eq!(auth_lines(invite, "Proxy-Authorization"), [a, b], "both answers, untouched:\n{}", invite.text);
    for (name, realm) in [("kamailio", REALM_A), ("kamailio-b", REALM_B)] {
        let challenged = kamailio_log(&s, name, "challenging INVITE");
        assert!(challenged.len() == 1 && challenged[0].contains("cseq=1 "), "{realm}: {challenged:?}");
        let ok = kamailio_log(&s, name, "authenticated INVITE");
        assert!(ok.len() == 1 && ok[0].contains("cseq=2 "), "{realm} accepted its answer: {ok:?}");
    }
}

/// A REGISTER for `user` at herald with these Contact values, optionally answering herald's 401.
fn register(
    herald: SocketAddr,
    local: SocketAddr,
    user: &str,
    cseq: u32,
    contacts: &str,
    auth: Option<&str>,
) -> String {
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    format!(
        "REGISTER sip:{herald} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-reg-{cseq};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:{user}@{herald}>;tag=reg\r\nTo: <sip:{user}@{herald}>\r\n\
         Call-ID: reg-{user}-{}\r\nCSeq: {cseq} REGISTER\r\nContact: {contacts}\r\n{auth}\
         Content-Length: 0\r\n\r\n",
        std::process::id()
    )
}

/// Sends a request over UDP (again every 500 ms) and returns its final response: status, the
/// nonce of its WWW-Authenticate, the message.
fn udp_exchange(socket: &UdpSocket, herald: SocketAddr, text: &str) -> (u16, Option<String>, Logged) {
    let cseq = common::header_of(text.as_bytes(), "CSeq", "CSeq").unwrap().to_owned();
    let mut buf = vec![0u8; 65536];
    for _ in 0..20 {
        socket.send_to(text.as_bytes(), herald).unwrap();
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            let Ok((n, _)) = socket.recv_from(&mut buf) else { continue };
            let m = Logged { received: true, text: String::from_utf8_lossy(&buf[..n]).replace("\r\n", "\n") };
            let Some(status) = common::status_of(&buf[..n]) else { continue };
            if status >= 200 && m.header("CSeq").first() == Some(&cseq) {
                let nonce = auth_lines(&m, "WWW-Authenticate")
                    .first()
                    .map(|v| AuthValue::parse(v.as_bytes()).unwrap().param("nonce").unwrap().into_owned());
                return (status, nonce, m);
            }
        }
    }
    panic!("no answer to\n{text}");
}

#[test]
fn d_auth_outcomes_and_registrar_refusals_are_on_the_metrics_endpoint() {
    let s = Scratch::new("auth-d");
    let herald = start_herald(&s, Some(""), "[registrar]\nmax_bindings_per_aor = 1\n", true);
    let url = herald.metrics_url.clone().unwrap();
    let socket = UdpSocket::bind(("127.0.0.1", ports(3).ua)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let local = socket.local_addr().unwrap();
    let h = herald.addr;
    let uri = format!("sip:{h}");
    // The same computation as for a 407; only the header's name differs.
    let digest = |password: &str, nonce: &str, nc: u32| answer(HERALD_REALM, password, nonce, "REGISTER", &uri, nc);

    // 401, a wrong password (401 again), right (200), right again for a second contact: 503,
    // alice already holds max_bindings_per_aor = 1 binding.
    let (status, nonce, _) = udp_exchange(&socket, h, &register(h, local, "alice", 1, "<sip:alice@127.0.0.1:1>", None));
    assert_eq!(status, 401);
    let nonce = nonce.expect("WWW-Authenticate");
    let (status, nonce2, _) = udp_exchange(
        &socket,
        h,
        &register(h, local, "alice", 2, "<sip:alice@127.0.0.1:1>", Some(&digest("guess", &nonce, 1))),
    );
    assert_eq!(status, 401);
    let nonce = nonce2.expect("a fresh challenge");
    let (status, _, m) = udp_exchange(
        &socket,
        h,
        &register(h, local, "alice", 3, "<sip:alice@127.0.0.1:1>", Some(&digest(HERALD_PASSWORD, &nonce, 1))),
    );
    assert_eq!(status, 200, "{}", m.text);
    let (status, _, m) = udp_exchange(
        &socket,
        h,
        &register(h, local, "alice", 4, "<sip:alice@127.0.0.1:2>", Some(&digest(HERALD_PASSWORD, &nonce, 2))),
    );
    assert_eq!(status, 503, "{}", m.text);
    assert!(!m.header("Retry-After").is_empty(), "{}", m.text);

    let m = scrape::fetch(&url).unwrap_or_else(|e| panic!("scrape {url}: {e}"));
    let get = |name: &str, labels: &[(&str, &str)]| {
        m.get(name, labels).unwrap_or_else(|| {
            panic!(
                "{name}{labels:?} missing from {url}: are the engines' counters registered with the server \
                 (Stats::export_auth / export_registrar in src/serve.rs)?"
            )
        })
    };
    assert_eq!(get("herald_auth_challenges_total", &[]), 2.0);
    assert_eq!(get("herald_auth_accepted_total", &[]), 2.0);
    assert_eq!(get("herald_auth_rejected_total", &[("reason", "wrong_response")]), 1.0);
    assert_eq!(get("herald_auth_rejected_total", &[("reason", "replayed")]), 0.0);
    assert_eq!(get("herald_registrar_accepted_total", &[]), 1.0);
    assert_eq!(get("herald_registrar_rejected_total", &[("reason", "too_many_bindings")]), 1.0);
    assert_eq!(get("herald_registrar_rejected_total", &[("reason", "out_of_order")]), 0.0);
}
