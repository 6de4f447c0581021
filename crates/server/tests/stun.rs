//! STUN keep-alives on herald's UDP ports (RFC 5626 §8): a real Binding request to a running
//! server gets a Binding success response whose XOR-MAPPED-ADDRESS is the client's address, on
//! IPv4 and IPv6; other STUN messages get nothing; SIP on the same socket goes on; answers are
//! held to the source's `[flood]` rate.

mod common;

use common::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

const COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];

/// A Binding request (RFC 5389 §6) with transaction id `id` and no attributes (RFC 5626 §8).
fn binding_request(id: [u8; 12]) -> Vec<u8> {
    let mut m = vec![0x00, 0x01, 0x00, 0x00];
    m.extend_from_slice(&COOKIE);
    m.extend_from_slice(&id);
    m
}

/// The transaction id and XOR-MAPPED-ADDRESS of a Binding success response, decoded here by
/// RFC 5389 §15.2 (not by herald's code).
fn decode_success(r: &[u8]) -> ([u8; 12], SocketAddr) {
    assert!(r.len() >= 20, "{r:?}");
    assert_eq!(&r[..2], &[0x01, 0x01], "Binding success response");
    assert_eq!(usize::from(u16::from_be_bytes([r[2], r[3]])), r.len() - 20, "length");
    assert_eq!(&r[4..8], &COOKIE);
    let id: [u8; 12] = r[8..20].try_into().unwrap();
    let mut at = 20;
    while at + 4 <= r.len() {
        let kind = u16::from_be_bytes([r[at], r[at + 1]]);
        let len = usize::from(u16::from_be_bytes([r[at + 2], r[at + 3]]));
        let v = &r[at + 4..at + 4 + len];
        if kind == 0x0020 {
            let port = u16::from_be_bytes([v[2], v[3]]) ^ 0x2112;
            let key: Vec<u8> = COOKIE.iter().chain(&id).copied().collect();
            let x: Vec<u8> = v[4..].iter().zip(&key).map(|(a, k)| a ^ k).collect();
            let ip = match v[1] {
                1 => IpAddr::V4(Ipv4Addr::new(x[0], x[1], x[2], x[3])),
                2 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&x[..]).unwrap())),
                f => panic!("family {f}"),
            };
            return (id, SocketAddr::new(ip, port));
        }
        at += 4 + len.next_multiple_of(4);
    }
    panic!("no XOR-MAPPED-ADDRESS in {r:?}");
}

fn recv_raw(c: &UdpSocket) -> Vec<u8> {
    let mut buf = vec![0u8; 65_536];
    let n = c.recv(&mut buf).expect("a datagram from the server");
    buf.truncate(n);
    buf
}

#[test]
fn binding_requests_are_answered_with_the_clients_address_and_sip_goes_on() {
    let server = start("[server]\nworkers = 2\n");
    let mut addrs = vec![server.udp4];
    addrs.extend(server.udp6);
    for (i, addr) in addrs.iter().enumerate() {
        let c = udp_client(*addr);
        for k in 0..3u8 {
            let id = [i as u8, k, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
            let request = binding_request(id);
            c.send(&request).unwrap();
            let answer = recv_raw(&c);
            assert_eq!(decode_success(&answer), (id, c.local_addr().unwrap()), "{addr}");
            // No amplification: the request plus XOR-MAPPED-ADDRESS (12 bytes, 24 for IPv6).
            let attribute = if addr.is_ipv4() { 12 } else { 24 };
            assert!(answer.len() <= request.len() + attribute, "{} bytes", answer.len());
            // SIP on the same socket, between keep-alives.
            c.send(request_text(&format!("after-stun-{i}-{k}")).as_bytes()).unwrap();
            let r = recv_msg(&c);
            assert_eq!((r.status(), r.call_id().unwrap()), (Some(200), format!("after-stun-{i}-{k}").as_str()));
        }
    }
    let s = server.stats.snapshot();
    assert_eq!(s.stun_requests_answered, 3 * addrs.len() as u64, "{s:?}");
    assert_eq!((s.stun_dropped, s.malformed_dropped, s.malformed_answered), (0, 0, 0), "{s:?}");
    server.stop().unwrap();
}

fn request_text(call_id: &str) -> String {
    request("OPTIONS", call_id, 1, "UDP", None, "")
}

#[test]
fn other_stun_messages_get_no_answer() {
    let server = start("[server]\nworkers = 1\n");
    let c = udp_client(server.udp4);
    let with_type = |t: [u8; 2]| {
        let mut m = binding_request([9; 12]);
        m[..2].copy_from_slice(&t);
        m
    };
    let mut lying_length = binding_request([9; 12]);
    lying_length[3] = 0x40;
    let mut huge_length = binding_request([9; 12]);
    huge_length[2..4].copy_from_slice(&[0xFF, 0xFC]);
    let unsent = [
        with_type([0x00, 0x11]), // Binding indication (RFC 5389 §7.3.2: never answered)
        with_type([0x01, 0x01]), // a Binding success response
        with_type([0x00, 0x03]), // another method (TURN Allocate)
        lying_length,
        huge_length,
        binding_request([9; 12])[..19].to_vec(), // a truncated header (the cookie is there)
    ];
    for m in &unsent {
        c.send(m).unwrap();
    }
    c.send(request_text("after-bad-stun").as_bytes()).unwrap();
    let r = recv_msg(&c);
    assert_eq!(r.call_id().unwrap(), "after-bad-stun", "nothing answered the STUN messages");
    let s = server.stats.snapshot();
    assert_eq!((s.stun_dropped, s.stun_requests_answered), (unsent.len() as u64, 0), "{s:?}");
    assert_eq!((s.malformed_dropped, s.malformed_answered), (0, 0), "STUN is not counted as malformed SIP: {s:?}");
    server.stop().unwrap();
}

/// The source address of a Binding request may be forged: its answers count against the
/// source's `[flood] max_requests`, like answers to malformed SIP.
#[test]
fn answers_are_held_to_the_sources_rate() {
    let server = start("[server]\nworkers = 1\n[flood]\nmax_requests = 5\nwindow_s = 60\n");
    let c = udp_client(server.udp4);
    c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    for k in 0..20u8 {
        c.send(&binding_request([k; 12])).unwrap();
    }
    let mut answered = 0;
    let mut buf = [0u8; 1500];
    while c.recv(&mut buf).is_ok() {
        answered += 1;
    }
    assert_eq!(answered, 5, "the rate, then nothing");
    let s = server.stats.snapshot();
    assert_eq!((s.stun_requests_answered, s.stun_dropped), (5, 15), "{s:?}");
    server.stop().unwrap();
}
