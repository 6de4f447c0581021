//! Issue 16, item 1, against the real binary: herald with the default `[auth]` policy must not
//! be an open relay. Every method × (no To tag / invented To tag / herald's own Route without
//! a signature / a foreign Route) × (unauthenticated / authenticated / trusted peer) is sent
//! from raw UDP sockets, and a foreign "sink" socket (127.0.0.2, an address herald does not
//! serve) records what reaches it: only what authenticated or came from a trusted peer. A real
//! dialog then shows that a Record-Route herald signed carries in-dialog requests both ways
//! without credentials. Item 2 at the same time: every answer to a request that did not
//! authenticate arrives exactly once (stateless, never retransmitted).

mod common;

use common::{header_of, port_block, status_of, test_dir, udp_options_ok};
use herald_core::auth::Algorithm;
use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const METHODS: [&str; 13] = [
    "INVITE",
    "MESSAGE",
    "OPTIONS",
    "NOTIFY",
    "INFO",
    "BYE",
    "SUBSCRIBE",
    "REFER",
    "PUBLISH",
    "UPDATE",
    "PRACK",
    "ACK",
    "CANCEL",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Situation {
    NoToTag,
    InventedToTag,
    OwnRouteUnsigned,
    ForeignRoute,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sender {
    Unauthenticated,
    /// A real user of herald's (alice) answering the 407 with her credentials.
    Authenticated,
    /// Carol of another domain answering with alice's credentials: 403, nothing relayed.
    AsAnotherUser,
    Trusted,
}

/// `herald serve` with the default `[auth]` policy, killed on drop.
struct Herald {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Herald {
    fn drop(&mut self) {
        common::stop_child(&mut self.child);
    }
}

fn start(dir: &Path, base: u16) -> Herald {
    let addr: SocketAddr = format!("127.0.0.1:{base}").parse().unwrap();
    let config = dir.join("herald.toml");
    // [auth] as shipped, plus the users file and one trusted peer. [flood] is off: the matrix
    // is one address sending ~250 requests in a few seconds, some with another user's
    // credentials, and the flood guard is not what is tested here (tests/flood_policy.rs is).
    std::fs::write(
        &config,
        format!(
            "[server]\nworkers = 2\ndrain_timeout_s = 1\n[[listen]]\naddress = \"{addr}\"\n\
             [flood]\nenabled = false\n\
             [auth]\nusers_file = \"{}\"\ntrusted_peers = [\"127.0.0.3\"]\n",
            dir.join("users.txt").display()
        ),
    )
    .unwrap();
    common::herald_users_add("alice", "alice-secret", &["--config", config.to_str().unwrap()]);
    let child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("RUST_LOG", std::env::var("HERALD_TEST_LOG").unwrap_or_else(|_| "info".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("herald.log")).unwrap())
        .spawn()
        .unwrap();
    let h = Herald { child, addr };
    let probe = UdpSocket::bind(("127.0.0.1", base + 1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = udp_options_ok(&probe, addr, "relay-probe", Duration::from_millis(500)) {
        assert!(Instant::now() < deadline, "herald did not start: {e}");
    }
    h
}

/// Every datagram a socket receives, collected by a thread of its own.
#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<Datagram>>>);

/// Where a datagram came from, and its bytes.
type Datagram = (SocketAddr, Vec<u8>);

impl Inbox {
    fn listen(socket: &UdpSocket) -> Inbox {
        let inbox = Inbox::default();
        let (s, i) = (socket.try_clone().unwrap(), inbox.clone());
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            // Ends with the test process; bounded by it (< 30 s).
            loop {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    i.0.lock().unwrap().push((from, buf[..n].to_vec()));
                }
            }
        });
        inbox
    }

    fn with_call_id(&self, call_id: &str) -> Vec<Vec<u8>> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|(_, m)| header_of(m, "Call-ID", "i") == Some(call_id)).map(|(_, m)| m.clone()).collect()
    }

    /// Waits up to `timeout` for a message with `call_id` that satisfies `pred`.
    fn wait_for(&self, call_id: &str, timeout: Duration, pred: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.with_call_id(call_id).into_iter().find(|m| pred(m)) {
                return Some(m);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn call_ids(&self) -> HashSet<String> {
        let all = self.0.lock().unwrap();
        all.iter().filter_map(|(_, m)| header_of(m, "Call-ID", "i").map(str::to_owned)).collect()
    }
}

fn is_final(m: &[u8]) -> bool {
    status_of(m).is_some_and(|s| s >= 200)
}

/// One request of the matrix. `sink`: the foreign target.
fn request(
    method: &str,
    situation: Situation,
    from_uri: &str,
    call: &str,
    herald: SocketAddr,
    sink: SocketAddr,
) -> (String, String) {
    let ruri = match situation {
        // To a user of a served domain (herald's address), routed away by a Route.
        Situation::ForeignRoute => format!("sip:bob@{}", herald.ip()),
        _ => format!("sip:victim@{sink}"),
    };
    let mut extra = String::new();
    match situation {
        Situation::OwnRouteUnsigned => extra += &format!("Route: <sip:{herald};lr>\r\n"),
        Situation::ForeignRoute => extra += &format!("Route: <sip:{sink};lr>\r\n"),
        _ => {}
    }
    let to_tag =
        if matches!(situation, Situation::InventedToTag | Situation::OwnRouteUnsigned) { ";tag=x9" } else { "" };
    if matches!(method, "SUBSCRIBE" | "NOTIFY" | "PUBLISH") {
        extra += "Event: presence\r\n";
    }
    if method == "NOTIFY" {
        extra += "Subscription-State: active\r\n";
    }
    if method == "PRACK" {
        extra += "RAck: 1 1 INVITE\r\n";
    }
    if method == "REFER" {
        extra += &format!("Refer-To: <sip:x@{sink}>\r\n");
    }
    let head = format!(
        "Max-Forwards: 70\r\nFrom: <{from_uri}>;tag=f1\r\nTo: <{ruri}>{to_tag}\r\nCall-ID: {call}\r\nContact: <sip:caller@127.0.0.1>\r\n{extra}"
    );
    (ruri, head)
}

fn render(method: &str, ruri: &str, via: SocketAddr, branch: &str, cseq: u32, head: &str, auth: &str) -> String {
    format!("{method} {ruri} SIP/2.0\r\nVia: SIP/2.0/UDP {via};branch=z9hG4bK{branch};rport\r\n{head}CSeq: {cseq} {method}\r\n{auth}Content-Length: 0\r\n\r\n")
}

/// The Proxy-Authorization answering a 407 as alice (RFC 7616 §3.4.1, MD5, qop=auth).
fn digest(challenge: &str, method: &str, uri: &str) -> String {
    let param = |name: &str| {
        let start = challenge.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        challenge[start..].split('"').next().unwrap().to_owned()
    };
    let (realm, nonce) = (param("realm"), param("nonce"));
    let md5 = |parts: &[&str]| Algorithm::Md5.hex_hash(&parts.iter().map(|p| p.as_bytes()).collect::<Vec<_>>());
    let ha1 = md5(&["alice", ":", &realm, ":", "alice-secret"]);
    let ha2 = md5(&[method, ":", uri]);
    let response = md5(&[&ha1, ":", &nonce, ":00000001:c0ffee:auth:", &ha2]);
    format!("Proxy-Authorization: Digest username=\"alice\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\", algorithm=MD5, qop=auth, nc=00000001, cnonce=\"c0ffee\"\r\n")
}

/// Sends a request; as `Authenticated`/`AsAnotherUser`, answers a 407 once. Returns after a
/// final answer, or after a short wait for requests that get none (ACK, or relayed ones).
#[allow(clippy::too_many_arguments)] // the matrix's coordinates
fn send(
    socket: &UdpSocket,
    inbox: &Inbox,
    sunk: &Inbox,
    herald: SocketAddr,
    method: &str,
    ruri: &str,
    head: &str,
    call: &str,
    sender: Sender,
) {
    let via = socket.local_addr().unwrap();
    socket.send_to(render(method, ruri, via, call, 1, head, "").as_bytes(), herald).unwrap();
    // Until a final answer, or until the request reached the sink (a relayed request gets no
    // final answer from the silent sink for 32 s).
    let answered = |want: &str, timeout: Duration| {
        let deadline = Instant::now() + timeout;
        loop {
            let finals: Vec<Vec<u8>> = inbox.with_call_id(call).into_iter().filter(|m| is_final(m)).collect();
            let fin = finals.into_iter().find(|m| header_of(m, "CSeq", "CSeq").is_some_and(|c| c.starts_with(want)));
            if fin.is_some() || !sunk.with_call_id(call).is_empty() || Instant::now() > deadline {
                return fin;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let wait = if method == "ACK" { Duration::from_millis(150) } else { Duration::from_secs(2) };
    let Some(answer) = answered("1 ", wait) else { return };
    if status_of(&answer) != Some(407) || !matches!(sender, Sender::Authenticated | Sender::AsAnotherUser) {
        return;
    }
    let challenge = header_of(&answer, "Proxy-Authenticate", "Proxy-Authenticate").unwrap().to_owned();
    // The ACK for the 407 (RFC 3261 §17.1.1.3) for an INVITE, with the 407's To tag.
    if method == "INVITE" {
        let to = header_of(&answer, "To", "t").unwrap();
        let ack_head = head.lines().map(|l| if l.starts_with("To:") { format!("To: {to}") } else { l.to_owned() });
        let ack_head: String = ack_head.filter(|l| !l.is_empty()).map(|l| l + "\r\n").collect();
        socket.send_to(render("ACK", ruri, via, call, 1, &ack_head, "").as_bytes(), herald).unwrap();
    }
    let auth = digest(&challenge, method, ruri);
    let second = format!("{call}-2");
    socket.send_to(render(method, ruri, via, &second, 2, head, &auth).as_bytes(), herald).unwrap();
    answered("2 ", Duration::from_secs(2));
}

#[test]
fn nothing_reaches_a_foreign_host_unless_authenticated_trusted_or_in_a_signed_dialog() {
    let started = Instant::now();
    let dir = test_dir("relay_matrix");
    let base = port_block();
    let herald = start(&dir, base);
    let sink = UdpSocket::bind(("127.0.0.2", base + 2)).expect("127.0.0.2 (loopback) must be bindable");
    let sink_addr = sink.local_addr().unwrap();
    let sunk = Inbox::listen(&sink);
    let plain = UdpSocket::bind(("127.0.0.1", base + 3)).unwrap();
    let trunk = UdpSocket::bind(("127.0.0.3", base + 4)).unwrap();
    let (plain_in, trunk_in) = (Inbox::listen(&plain), Inbox::listen(&trunk));
    let situations =
        [Situation::NoToTag, Situation::InventedToTag, Situation::OwnRouteUnsigned, Situation::ForeignRoute];
    let senders = [Sender::Unauthenticated, Sender::Authenticated, Sender::AsAnotherUser, Sender::Trusted];
    // Call-IDs that may (must) reach the sink, and those that must not.
    let mut expected = HashSet::new();
    let mut unauthenticated = Vec::new();
    for sender in senders {
        for method in METHODS {
            for situation in situations {
                let call = format!("{method}-{situation:?}-{sender:?}").to_lowercase();
                let from_uri = match sender {
                    Sender::Authenticated => format!("sip:alice@{}", herald.addr.ip()),
                    _ => "sip:carol@other.example".to_owned(),
                };
                let (ruri, head) = request(method, situation, &from_uri, &call, herald.addr, sink_addr);
                let (socket, inbox) = if sender == Sender::Trusted { (&trunk, &trunk_in) } else { (&plain, &plain_in) };
                send(socket, inbox, &sunk, herald.addr, method, &ruri, &head, &call, sender);
                // ACK and CANCEL cannot be challenged: only a trusted peer relays them.
                let relays = match sender {
                    Sender::Trusted => true,
                    Sender::Authenticated => !matches!(method, "ACK" | "CANCEL"),
                    Sender::Unauthenticated | Sender::AsAnotherUser => false,
                };
                if relays {
                    expected.insert(call.clone());
                } else if sender == Sender::Unauthenticated {
                    unauthenticated.push((method, call.clone()));
                }
            }
        }
    }
    // Past Timer G's first retransmission interval (T1 = 500 ms) twice over: a stateless
    // answer is never resent.
    std::thread::sleep(Duration::from_millis(1200));
    let reached = sunk.call_ids();
    let relayed: Vec<_> = reached.difference(&expected).collect();
    assert!(relayed.is_empty(), "relayed without credentials: {relayed:?}");
    let missing: Vec<_> = expected.difference(&reached).collect();
    assert!(missing.is_empty(), "authenticated or trusted, yet not forwarded: {missing:?}");
    for (method, call) in &unauthenticated {
        let answers: Vec<u16> = plain_in.with_call_id(call).iter().filter_map(|m| status_of(m)).collect();
        let want: &[u16] = match *method {
            "ACK" => &[],
            "CANCEL" => &[481],
            _ => &[407],
        };
        assert_eq!(answers, want, "{call}: answered once, statelessly");
    }
    // Carol with alice's credentials: 403 (RFC 3261 §22.1 leaves identities to policy).
    for method in METHODS.iter().filter(|m| !matches!(**m, "ACK" | "CANCEL")) {
        let call = format!("{method}-nototag-asanotheruser").to_lowercase();
        let answers: Vec<u16> = plain_in.with_call_id(&call).iter().filter_map(|m| status_of(m)).collect();
        assert!(answers.contains(&403), "{call}: another user's credentials: {answers:?}");
    }

    signed_dialog(&herald, &plain, &plain_in, &sink, &sunk);
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
}

/// Alice calls the foreign sink; the sink answers and learns herald's signed Record-Route; the
/// ACK and the callee's BYE along it pass without credentials, and the BYE reaches alice.
fn signed_dialog(herald: &Herald, alice: &UdpSocket, alice_in: &Inbox, sink: &UdpSocket, sunk: &Inbox) {
    let call = "real-dialog";
    let sink_addr = sink.local_addr().unwrap();
    let alice_addr = alice.local_addr().unwrap();
    let ruri = format!("sip:far@{sink_addr}");
    let head = format!("Max-Forwards: 70\r\nFrom: <sip:alice@{}>;tag=a1\r\nTo: <{ruri}>\r\nCall-ID: {call}\r\nContact: <sip:alice@{alice_addr}>\r\n", herald.addr.ip());
    send(alice, alice_in, sunk, herald.addr, "INVITE", &ruri, &head, call, Sender::Authenticated);
    let invite = sunk
        .wait_for(call, Duration::from_secs(2), |m| m.starts_with(b"INVITE "))
        .expect("the authenticated INVITE reaches the far end");
    let rr = header_of(&invite, "Record-Route", "Record-Route").expect("record-routed").to_owned();
    assert!(rr.contains(";hs="), "herald signs its Record-Route: {rr}");
    // The far end answers 200 (RFC 3261 §12.1.1: Record-Route copied, its own Contact).
    let text = String::from_utf8_lossy(&invite).into_owned();
    let mut ok = String::from("SIP/2.0 200 OK\r\n");
    for line in text.split("\r\n").skip(1).take_while(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        if matches!(name.as_str(), "via" | "v" | "from" | "f" | "call-id" | "i" | "cseq" | "record-route") {
            ok += line;
            ok += "\r\n";
        } else if matches!(name.as_str(), "to" | "t") {
            ok += &format!("{line};tag=s1\r\n");
        }
    }
    ok += &format!("Contact: <sip:far@{sink_addr}>\r\nContent-Length: 0\r\n\r\n");
    sink.send_to(ok.as_bytes(), herald.addr).unwrap();
    alice_in.wait_for(call, Duration::from_secs(2), |m| status_of(m) == Some(200)).expect("200 reaches alice");
    // Alice's ACK along the route set [rr]: reaches the far end without credentials.
    let dialog = |from: &str, to: &str| {
        format!("Max-Forwards: 70\r\nRoute: {rr}\r\nFrom: {from}\r\nTo: {to}\r\nCall-ID: {call}\r\n")
    };
    let alice_side = format!("<sip:alice@{}>;tag=a1", herald.addr.ip());
    let far_side = format!("<{ruri}>;tag=s1");
    let ack = render("ACK", &ruri, alice_addr, "real-ack", 2, &dialog(&alice_side, &far_side), "");
    alice.send_to(ack.as_bytes(), herald.addr).unwrap();
    sunk.wait_for(call, Duration::from_secs(2), |m| m.starts_with(b"ACK ")).expect("the ACK follows the signed route");
    // The far end hangs up: From and To swapped (§12.2.1.1), to alice's Contact.
    let bye = render(
        "BYE",
        &format!("sip:alice@{alice_addr}"),
        sink_addr,
        "real-bye",
        1,
        &dialog(&far_side, &alice_side),
        "",
    );
    sink.send_to(bye.as_bytes(), herald.addr).unwrap();
    alice_in
        .wait_for(call, Duration::from_secs(2), |m| m.starts_with(b"BYE "))
        .expect("the callee's BYE reaches alice");
    // The same BYE with the signature stripped proves nothing.
    let unsigned = rr.split(";hs=").next().unwrap().to_owned() + ">";
    let forged = bye.replace(&rr, &unsigned).replace("real-bye", "forged-bye").replace(call, "forged-dialog");
    sink.send_to(forged.as_bytes(), herald.addr).unwrap();
    let answer = sunk.wait_for("forged-dialog", Duration::from_secs(2), is_final).expect("answered");
    assert_eq!(status_of(&answer), Some(407));
    assert!(alice_in.with_call_id("forged-dialog").is_empty(), "nothing reached alice");
}
