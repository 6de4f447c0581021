//! Two herald nodes sharing their location on one real `redis-server` (issue 19 item 2; the
//! WebSocket case of issue 20): node A on 127.0.0.1, node B on 127.0.0.2, each with its own
//! configuration, digest authentication for callers on. Phones register at A over UDP (behind
//! a "NAT": a private Contact only A's view of the source reaches), TCP and WebSocket (contacts
//! only A's connections reach) and are called through B, which authenticates the caller and
//! routes through A; an unregistration at B is seen at A; Redis stops answering for 10 s
//! (SIGSTOP) and later loses everything (SIGKILL and a restart on the same port): the nodes keep
//! serving their cached users and converge after; node B restarts and serves A's users at once
//! after its load. Runs in about 15 s.

mod cluster_support;
mod common;

use cluster_support::phone::{contact_uri, digest_answer, header, headers, method, response, status, Conn};
use cluster_support::{eventually, Node, NodeSpec, Redis, DOMAIN};
use common::{herald_users_add, metric, port_block, sigstop, test_dir};
use std::net::SocketAddr;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(3);
/// How long a change may take to reach the other node, and the nodes to converge after Redis
/// comes back (reconnection backoff at most 500 ms in these configurations).
const CONVERGE: Duration = Duration::from_secs(10);

/// A phone: a connection and who it registers as.
struct Phone {
    conn: Conn,
    user: &'static str,
    contact: String,
    cseq: u32,
}

impl Phone {
    fn new(conn: Conn, user: &'static str, contact: String) -> Phone {
        Phone { conn, user, contact, cseq: 0 }
    }

    /// REGISTER at `node` for `expires` seconds; the final status.
    fn register(&mut self, node: SocketAddr, expires: u32) -> u16 {
        self.cseq += 1;
        let (transport, sent_by) = self.conn.via();
        let (user, contact, cseq) = (self.user, &self.contact, self.cseq);
        let req = format!(
            "REGISTER sip:{DOMAIN} SIP/2.0\r\nVia: SIP/2.0/{transport} {sent_by};branch=z9hG4bK-reg-{user}-{cseq};rport\r\n\
             Max-Forwards: 70\r\nFrom: <sip:{user}@{DOMAIN}>;tag=r{user}\r\nTo: <sip:{user}@{DOMAIN}>\r\n\
             Call-ID: reg-{user}-{node}\r\nCSeq: {cseq} REGISTER\r\nContact: <{contact}>;expires={expires}\r\n\
             Content-Length: 0\r\n\r\n"
        );
        self.conn.send(&req);
        final_status(&mut self.conn, &format!("{cseq} REGISTER"))
    }

    /// Answers one INVITE with 200; returns it as received.
    fn answer(&mut self) -> Result<String, String> {
        let invite = self.next_request("INVITE")?;
        let ok = response(&invite, 200, "OK", &format!("t-{}", self.user), &self.contact);
        self.conn.send(&ok);
        Ok(invite)
    }

    /// Takes the ACK of the call it answered and answers the BYE that follows.
    fn hang_up(&mut self) -> Result<(), String> {
        self.next_request("ACK")?;
        let bye = self.next_request("BYE")?;
        self.conn.send(&response(&bye, 200, "OK", "", &self.contact));
        Ok(())
    }

    fn next_request(&mut self, wanted: &str) -> Result<String, String> {
        loop {
            let m = self.conn.recv(WAIT).ok_or_else(|| format!("{}: no {wanted} arrived", self.user))?;
            if method(&m) == Some(wanted) {
                return Ok(m);
            }
        }
    }
}

/// The final answer to the request with this CSeq value (provisional answers skipped).
fn final_status(conn: &mut Conn, cseq: &str) -> u16 {
    final_response(conn, cseq).and_then(|r| status(&r)).unwrap_or(0)
}

fn final_response(conn: &mut Conn, cseq: &str) -> Option<String> {
    loop {
        let m = conn.recv(WAIT)?;
        if status(&m).is_some_and(|s| s >= 200) && header(&m, "CSeq") == Some(cseq) {
            return Some(m);
        }
    }
}

/// How many contacts `node` holds for `user`: a REGISTER without Contact (RFC 3261 §10.2.3)
/// lists them.
fn contacts_at(node: SocketAddr, ip: &str, user: &str) -> usize {
    let mut c = Conn::udp(ip, node);
    let (_, sent_by) = c.via();
    c.send(&format!(
        "REGISTER sip:{DOMAIN} SIP/2.0\r\nVia: SIP/2.0/UDP {sent_by};branch=z9hG4bK-q-{user};rport\r\n\
         Max-Forwards: 70\r\nFrom: <sip:{user}@{DOMAIN}>;tag=q\r\nTo: <sip:{user}@{DOMAIN}>\r\n\
         Call-ID: query-{user}-{sent_by}\r\nCSeq: 1 REGISTER\r\nContent-Length: 0\r\n\r\n"
    ));
    match final_response(&mut c, "1 REGISTER") {
        Some(r) if status(&r) == Some(200) => headers(&r, "Contact").count(),
        _ => usize::MAX,
    }
}

/// A caller at `ip` calls `callee` through `node`: INVITE, 407, INVITE with the digest answer,
/// 200 (answered by `phone`), ACK and BYE along the route set. Returns the INVITE the phone got.
fn call(node: SocketAddr, ip: &str, callee: &mut Phone, tag: &str) -> Result<String, String> {
    let mut caller = Conn::udp(ip, node);
    let (_, me) = caller.via();
    let target = format!("sip:{}@{DOMAIN}", callee.user);
    let call_id = format!("call-{tag}-{me}");
    let invite = |cseq: u32, auth: &str| {
        format!(
            "INVITE {target} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bK-{tag}-{cseq};rport\r\nMax-Forwards: 70\r\n\
             From: <sip:dave@{DOMAIN}>;tag=c-{tag}\r\nTo: <{target}>\r\nCall-ID: {call_id}\r\nCSeq: {cseq} INVITE\r\n\
             Contact: <sip:dave@{me}>\r\n{auth}Content-Length: 0\r\n\r\n"
        )
    };
    caller.send(&invite(1, ""));
    let challenge = final_response(&mut caller, "1 INVITE").ok_or("no answer to the INVITE")?;
    if status(&challenge) != Some(407) {
        return Err(format!("the first INVITE got {:?}, not 407", status(&challenge)));
    }
    // The ACK of a non-2xx answer is part of its transaction (RFC 3261 §17.1.1.3).
    caller.send(&format!(
        "ACK {target} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bK-{tag}-1;rport\r\nMax-Forwards: 70\r\n\
         From: <sip:dave@{DOMAIN}>;tag=c-{tag}\r\nTo: {}\r\nCall-ID: {call_id}\r\nCSeq: 1 ACK\r\nContent-Length: 0\r\n\r\n",
        header(&challenge, "To").unwrap()
    ));
    let auth = digest_answer(&challenge, "INVITE", &target, "dave", "dave-secret");
    caller.send(&invite(2, &format!("Proxy-Authorization: {auth}\r\n")));
    let got = callee.answer()?;
    let ok = final_response(&mut caller, "2 INVITE").ok_or("no final answer to the authenticated INVITE")?;
    if status(&ok) != Some(200) {
        return Err(format!("the call was answered {:?}", status(&ok)));
    }
    // RFC 3261 §12.1.2: the route set is the Record-Route of the 2xx, reversed.
    let mut routes: Vec<&str> = headers(&ok, "Record-Route").flat_map(|v| v.split(", ")).collect();
    routes.reverse();
    let route_lines: String = routes.iter().map(|r| format!("Route: {r}\r\n")).collect();
    let remote = contact_uri(&ok).ok_or("the 200 has no Contact")?;
    let to = header(&ok, "To").unwrap();
    let in_dialog = |m: &str, cseq: u32| {
        format!(
            "{m} {remote} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bK-{tag}-{m}{cseq};rport\r\nMax-Forwards: 70\r\n\
             {route_lines}From: <sip:dave@{DOMAIN}>;tag=c-{tag}\r\nTo: {to}\r\nCall-ID: {call_id}\r\nCSeq: {cseq} {m}\r\n\
             Content-Length: 0\r\n\r\n"
        )
    };
    caller.send(&in_dialog("ACK", 2));
    caller.send(&in_dialog("BYE", 3));
    callee.hang_up()?;
    match final_response(&mut caller, "3 BYE").and_then(|r| status(&r)) {
        Some(200) => Ok(got),
        other => Err(format!("BYE answered {other:?}")),
    }
}

/// The phone got the INVITE from node A (the top Via is A's): B routed through A.
fn assert_via_a(invite: &str, a: &Node) {
    let top = header(invite, "Via").unwrap();
    assert!(top.contains(&a.sip.ip().to_string()) || top.contains(&a.ws.ip().to_string()), "top Via {top}");
    assert_eq!(headers(invite, "Via").flat_map(|v| v.split(',')).count(), 3, "caller, B and A:\n{invite}");
}

#[test]
fn two_nodes_share_their_phones_through_redis() {
    let dir = test_dir("cluster");
    let base = port_block();
    let redis_port = base + 9;
    let mut redis = Redis::start(&dir, redis_port);
    let users = dir.join("users.txt");
    for (user, pw) in [("dave", "dave-secret"), ("alice", "a"), ("bob", "b"), ("carol", "c"), ("erin", "e")] {
        herald_users_add(user, pw, &["--realm", DOMAIN, "--file", users.to_str().unwrap()]);
    }
    let url = redis.url();
    let spec = |name, ip: &str, off: u16, peers| NodeSpec {
        name,
        sip: format!("{ip}:{}", base + off).parse().unwrap(),
        ws: format!("{ip}:{}", base + off + 1).parse().unwrap(),
        metrics: format!("{ip}:{}", base + off + 2).parse().unwrap(),
        peers,
        redis_url: &url,
        users_file: &users,
    };
    let mut a = Node::start(&dir, &spec("a", "127.0.0.1", 0, &["127.0.0.2"]));
    let mut b = Node::start(&dir, &spec("b", "127.0.0.2", 4, &["127.0.0.1"]));

    // Phones at A: UDP from behind a "NAT" (its Contact is a private address nobody reaches;
    // only A knows where its REGISTER came from), TCP, and WebSocket (RFC 7118 `.invalid`).
    let udp = Conn::udp("127.0.0.1", a.sip);
    let port = udp.local().port();
    let mut alice = Phone::new(udp, "alice", format!("sip:alice@10.0.0.5:{port}"));
    let tcp = Conn::tcp(a.sip);
    let port = tcp.local().port();
    let mut bob = Phone::new(tcp, "bob", format!("sip:bob@127.0.0.1:{port};transport=tcp"));
    let mut carol = Phone::new(Conn::ws(a.ws), "carol", "sip:carol@df7jal23ls0d.invalid;transport=ws".into());
    for p in [&mut alice, &mut bob, &mut carol] {
        assert_eq!(p.register(a.sip, 300), 200, "{} registers at A", p.user);
    }
    for user in ["alice", "bob", "carol"] {
        eventually(&format!("B learns {user}"), CONVERGE, || contacts_at(b.sip, "127.0.0.2", user) == 1);
    }

    // Called through B: B challenges the caller, routes through A, A delivers on its flow.
    for (p, tag) in [(&mut alice, "udp"), (&mut bob, "tcp"), (&mut carol, "ws")] {
        let invite = call(b.sip, "127.0.0.3", p, tag).unwrap_or_else(|e| panic!("{} via B: {e}", p.user));
        assert_via_a(&invite, &a);
    }

    // An unregistration sent to B is seen at A.
    let mut alice_at_b = Phone::new(Conn::udp("127.0.0.1", b.sip), "alice", alice.contact.clone());
    assert_eq!(alice_at_b.register(b.sip, 0), 200);
    eventually("A sees alice's unregistration at B", CONVERGE, || contacts_at(a.sip, "127.0.0.1", "alice") == 0);
    assert_eq!(contacts_at(b.sip, "127.0.0.2", "alice"), 0);

    // Redis stops answering for 10 s. Both nodes keep serving their cached users; a
    // registration at A meanwhile succeeds, reaches B only after Redis is back.
    {
        let _stopped = sigstop(redis.pid());
        std::thread::sleep(Duration::from_secs(1));
        let invite = call(b.sip, "127.0.0.3", &mut bob, "outage").expect("bob via B while Redis is stopped");
        assert_via_a(&invite, &a);
        let erin_conn = Conn::udp("127.0.0.1", a.sip);
        let port = erin_conn.local().port();
        let mut erin = Phone::new(erin_conn, "erin", format!("sip:erin@10.0.0.6:{port}"));
        assert_eq!(erin.register(a.sip, 300), 200, "a registration at A while Redis is stopped");
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(contacts_at(b.sip, "127.0.0.2", "erin"), 0, "B cannot know erin before the resync");
        // The nodes noticed (PING timed out) and A holds erin's change for later.
        for n in [&a, &b] {
            eventually("Redis reported down", WAIT, || metric(&n.metrics_url(), "herald_location_redis_up") == 0.0);
        }
        assert_eq!(metric(&a.metrics_url(), "herald_location_redis_queued"), 1.0);
        std::thread::sleep(Duration::from_secs(7));
        a.assert_running();
        b.assert_running();
        drop(_stopped);
        eventually("B learns erin after the resync", CONVERGE, || contacts_at(b.sip, "127.0.0.2", "erin") == 1);
        call(b.sip, "127.0.0.3", &mut erin, "after").expect("erin via B after Redis came back");
        eventually("A reports Redis up, nothing queued", CONVERGE, || {
            metric(&a.metrics_url(), "herald_location_redis_up") == 1.0
                && metric(&a.metrics_url(), "herald_location_redis_queued") == 0.0
        });
    }
    assert!(metric(&a.metrics_url(), "herald_location_redis_resyncs_total") >= 2.0);

    // Redis loses everything (killed, restarted empty on the same port): each node writes its
    // store back, and a node that restarts later finds every user.
    redis.kill_and_restart(Duration::from_millis(500));
    eventually("the nodes write their stores back", CONVERGE, || redis.keys() >= 3);
    b.restart();
    for user in ["bob", "carol", "erin"] {
        eventually(&format!("restarted B loads {user}"), CONVERGE, || contacts_at(b.sip, "127.0.0.2", user) == 1);
    }
    assert_eq!(contacts_at(b.sip, "127.0.0.2", "alice"), 0, "the unregistration survived");
    let invite = call(b.sip, "127.0.0.3", &mut carol, "restarted").expect("carol (WS at A) via restarted B");
    assert_via_a(&invite, &a);
    a.assert_running();
    b.assert_running();
}
