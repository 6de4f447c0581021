//! The keep-alive loop against a real location store and real loopback sockets.

use super::keepalive::{needs_keepalive, run, KeepaliveCounters, Keepalives};
use super::wake::Wake;
use crate::config::{Keepalive, Nat};
use crate::pings::{PingReport, PingRouter};
use crate::runtime::Ctl;
use herald_core::registrar::{Aor, Location};
use herald_core::{Peer, PingOutcome, PingTarget};
use herald_store::{ContactUpdate, Update};
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

fn register(store: &Location, user: &str, contact: &str, source: Peer, path: Option<&str>) {
    let contacts = [ContactUpdate::new(contact, 600)];
    let update = Update { call_id: user, cseq: 1, path, source, contacts: &contacts };
    store.apply(&Aor::parse(&format!("sip:{user}@example.com")).unwrap(), Instant::now(), &update).unwrap();
}

fn herald_socket() -> Vec<(std::net::SocketAddr, UdpSocket)> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    vec![(s.local_addr().unwrap(), s)]
}

fn nat(mode: Keepalive) -> Nat {
    Nat { keepalive: mode, keepalive_interval_s: 30, keepalive_max_failures: 2, ..Nat::default() }
}

#[tokio::test]
async fn crlf_keepalives_go_to_natted_udp_bindings_only() {
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    phone.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let store = Arc::new(Location::new());
    let natted = Peer::udp(phone.local_addr().unwrap());
    register(&store, "nat", "sip:nat@192.168.1.20:5060", natted, None);
    // Not behind NAT (the contact is its source), and a NATed binding behind a Path: none.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let direct = Peer::udp(other.local_addr().unwrap());
    register(&store, "direct", &format!("sip:direct@{}", direct.addr), direct, None);
    register(&store, "pathed", "sip:p@192.168.1.21", direct, Some("<sip:edge.example;lr>"));
    let counters = KeepaliveCounters::default();
    let mut ka = Keepalives::new(&nat(Keepalive::Crlf), store, None, herald_socket(), None, counters.clone());
    ka.round().await;
    let mut buf = [0u8; 64];
    let (n, _) = phone.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"\r\n\r\n");
    assert_eq!(counters.sent.get(), 1);
    assert!(other.recv_from(&mut buf).is_err(), "nothing for bindings not behind NAT or behind a Path");
}

#[tokio::test]
async fn an_unanswering_binding_is_dropped_after_k_missed_options_and_an_answer_resets_the_count() {
    let store = Arc::new(Location::new());
    let a = Peer::udp("192.0.2.7:40001".parse().unwrap());
    let b = Peer::udp("192.0.2.8:40002".parse().unwrap());
    register(&store, "a", "sip:a@10.0.0.2:5060", a, None);
    register(&store, "b", "sip:b@10.0.0.3:5060", b, None);
    let router = Arc::new(PingRouter::default());
    let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel();
    let (pinger, _reports) = router.client(vec![ctl_tx], 1, 16).unwrap();
    let counters = KeepaliveCounters::default();
    let mut ka =
        Keepalives::new(&nat(Keepalive::Options), store.clone(), None, herald_socket(), Some(pinger), counters.clone());
    let aor = |u: &str| Aor::parse(&format!("sip:{u}@example.com")).unwrap();
    for round in 0..3 {
        ka.round().await;
        let mut pings = Vec::new();
        while let Ok(Ctl::Ping { token, ping, .. }) = ctl_rx.try_recv() {
            pings.push((token, ping));
        }
        // a never answers; b answers every round.
        let expected = if round < 2 { 2 } else { 1 };
        assert_eq!(pings.len(), expected, "round {round}");
        for (token, ping) in pings {
            let PingTarget::Peer(to) = ping.target else { panic!("a keep-alive goes to the binding's source") };
            assert_eq!(ping.max_forwards, 1);
            let outcome = if to == a {
                assert_eq!(ping.uri.as_deref(), Some("sip:a@10.0.0.2:5060"), "Request-URI is the contact");
                PingOutcome::TimedOut
            } else {
                PingOutcome::Answered(200)
            };
            ka.on_report(PingReport { token, outcome }, Instant::now());
        }
        let a_left = store.lookup(&aor("a"), Instant::now()).len();
        assert_eq!(a_left, usize::from(round == 0), "round {round}: dropped after 2 misses");
        assert_eq!(store.lookup(&aor("b"), Instant::now()).len(), 1);
    }
    assert_eq!((counters.sent.get(), counters.answered.get(), counters.dropped.get()), (5, 3, 1));
}

/// A round spreads its pages over half the interval once it knows how many there are: the first
/// round of 1,000 AoRs (4 pages) goes at once, the next sleeps between pages.
#[tokio::test]
async fn rounds_are_paced_over_half_the_interval() {
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let source = Peer::udp(phone.local_addr().unwrap());
    let store = Arc::new(Location::new());
    for i in 0..1000 {
        register(&store, &format!("u{i}"), &format!("sip:u{i}@10.0.0.2:5060"), source, None);
    }
    let counters = KeepaliveCounters::default();
    let nat = Nat { keepalive_interval_s: 1, ..nat(Keepalive::Crlf) };
    let mut ka = Keepalives::new(&nat, store, None, herald_socket(), None, counters.clone());
    let first = Instant::now();
    ka.round().await;
    let first = first.elapsed();
    let second = Instant::now();
    ka.round().await;
    let second = second.elapsed();
    assert_eq!(counters.sent.get(), 2000, "every binding, every round");
    // 4 pages: 3 pauses of 500 ms / 4.
    assert!(second >= Duration::from_millis(375), "paced: {second:?}");
    assert!(first < second && second < Duration::from_secs(5), "first {first:?}, second {second:?}");
}

/// Flows herald registered elsewhere as an edge proxy get CRLF keep-alives while their
/// registration lasts, whatever the mode (there is no binding here to drop).
#[tokio::test]
async fn edge_flows_get_crlf_keepalives_in_every_mode() {
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    phone.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let edge = Arc::new(herald_core::nat::EdgeFlows::default());
    edge.note(phone.local_addr().unwrap(), Instant::now(), 60);
    for mode in [Keepalive::Crlf, Keepalive::Options] {
        let counters = KeepaliveCounters::default();
        let store = Arc::new(Location::new());
        let mut ka = Keepalives::new(&nat(mode), store, Some(edge.clone()), herald_socket(), None, counters.clone());
        ka.round().await;
        let mut buf = [0u8; 16];
        let (n, _) = phone.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"\r\n\r\n", "{mode:?}");
        assert_eq!(counters.sent.get(), 1);
    }
}

/// With nothing to keep alive the loop sleeps from its start: an hour (of the paused clock)
/// later it has run no round. A NATed binding registered then gets its keep-alive one interval
/// after its REGISTER and every interval while it lasts; once it is gone the loop sleeps again
/// after one round that finds nothing, until an edge flow is noted.
#[tokio::test(start_paused = true)]
async fn an_idle_loop_sleeps_until_something_needs_keepalives() {
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    phone.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let store = Arc::new(Location::new());
    let edge = Arc::new(herald_core::nat::EdgeFlows::default());
    let nat = Nat { keepalive_interval_s: 1, ..nat(Keepalive::Crlf) };
    let detect = nat.engine().detect;
    let wake = Wake::install(&store, Some(&edge), move |b| needs_keepalive(b, detect));
    let counters = KeepaliveCounters::default();
    let ka = Keepalives::new(&nat, store.clone(), Some(edge.clone()), herald_socket(), None, counters.clone());
    let task = tokio::spawn(run(ka, Duration::from_secs(1), wake, None));
    let sleep = |ms| tokio::time::sleep(Duration::from_millis(ms));
    sleep(3_600_000).await;
    assert_eq!(counters.rounds.get(), 0, "nothing to keep alive: no round");
    // A binding that needs no keep-alive wakes nothing.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    let direct = Peer::udp(other.local_addr().unwrap());
    register(&store, "direct", &format!("sip:direct@{}", direct.addr), direct, None);
    sleep(10_000).await;
    assert_eq!(counters.rounds.get(), 0);

    register(&store, "nat", "sip:nat@192.168.1.20:5060", Peer::udp(phone.local_addr().unwrap()), None);
    sleep(999).await;
    assert_eq!(counters.sent.get(), 0, "the REGISTER itself just opened the mapping");
    sleep(2).await;
    assert_eq!((counters.rounds.get(), counters.sent.get()), (1, 1), "one interval after the REGISTER");
    let mut buf = [0u8; 16];
    let (n, _) = phone.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"\r\n\r\n");
    sleep(1_000).await;
    assert_eq!((counters.rounds.get(), counters.sent.get()), (2, 2), "and every interval while it lasts");
    phone.recv_from(&mut buf).unwrap();

    let aor = Aor::parse("sip:nat@example.com").unwrap();
    assert_eq!(store.remove_binding(&aor, "sip:nat@192.168.1.20:5060", Instant::now()).count, 1);
    sleep(1_000).await;
    assert_eq!(counters.rounds.get(), 3, "this round found nothing");
    sleep(3_600_000).await;
    assert_eq!((counters.rounds.get(), counters.sent.get()), (3, 2), "asleep again");
    edge.note(phone.local_addr().unwrap(), Instant::now(), 60);
    sleep(1_001).await;
    assert_eq!((counters.rounds.get(), counters.sent.get()), (4, 3), "an edge flow wakes it too");
    let (n, _) = phone.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"\r\n\r\n");
    task.abort();
}

/// A loop that starts over bindings that need keep-alives (a durable copy loaded before it)
/// keeps its interval from the start, as it always did.
#[tokio::test(start_paused = true)]
async fn a_loop_started_over_natted_bindings_keeps_its_interval() {
    let phone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let store = Arc::new(Location::new());
    register(&store, "nat", "sip:nat@192.168.1.20:5060", Peer::udp(phone.local_addr().unwrap()), None);
    let nat = Nat { keepalive_interval_s: 1, ..nat(Keepalive::Crlf) };
    let detect = nat.engine().detect;
    let wake = Wake::install(&store, None, move |b| needs_keepalive(b, detect));
    let counters = KeepaliveCounters::default();
    let ka = Keepalives::new(&nat, store, None, herald_socket(), None, counters.clone());
    let task = tokio::spawn(run(ka, Duration::from_secs(1), wake, None));
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert_eq!(counters.sent.get(), 0, "bindings registered at start-up are fresh");
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(counters.sent.get(), 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(counters.sent.get(), 11);
    task.abort();
}
