//! Tests of the generator's endpoints over real loopback sockets.

use super::*;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn a_kept_receive_buffer_is_reused_only_when_no_message_holds_it() {
    let mut a = Endpoint::udp(LO).unwrap();
    let mut b = Endpoint::udp(LO).unwrap();
    let mut round = |fill: u8, got: &mut Vec<Incoming>| {
        assert!(a.send(Bytes::from(vec![fill; 300]), b.local_addr()));
        a.flush();
        for _ in 0..100 {
            wait([&b], 10_000);
            b.receive(got, &Limits::default());
            if !got.is_empty() {
                break;
            }
        }
        got.pop().expect("received").bytes
    };
    let mut got = Vec::new();
    let first = round(1, &mut got);
    let at = first.as_ptr();
    // Still held: the next datagram goes elsewhere, and the held one is unchanged.
    let second = round(2, &mut got);
    assert_ne!(second.as_ptr(), at);
    assert_eq!(first[..], [1u8; 300][..]);
    assert_eq!(second[..], [2u8; 300][..]);
    // Both dropped: the buffer of the last batch is taken again from its start.
    let at = second.as_ptr();
    drop((first, second));
    let third = round(3, &mut got);
    assert_eq!(third.as_ptr(), at);
    assert_eq!(third[..], [3u8; 300][..]);
}

#[test]
fn udp_batches_round_trip() {
    let mut a = Endpoint::udp(LO).unwrap();
    let mut b = Endpoint::udp(LO).unwrap();
    for i in 0..40u8 {
        assert!(a.send(Bytes::from(vec![i; 100]), b.local_addr()));
    }
    a.flush();
    assert!(!a.wants_write());
    let mut got = Vec::new();
    for _ in 0..100 {
        wait([&b], 10_000);
        b.receive(&mut got, &Limits::default());
        if got.len() == 40 {
            break;
        }
    }
    assert_eq!(got.len(), 40);
    assert_eq!(got[39].bytes[..], [39u8; 100][..]);
    assert_eq!(got[0].from, a.local_addr());
    // SO_TIMESTAMPNS: every datagram carries the kernel's CLOCK_REALTIME receive time.
    let realtime = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for g in &got {
        let stamp = g.kernel_ns.expect("SCM_TIMESTAMPNS");
        assert!(stamp <= realtime && realtime - stamp < 10_000_000_000, "{stamp} vs {realtime}");
    }
}

#[test]
fn tcp_frames_messages_and_detects_close() {
    let listener = TcpListener::bind((LO, 0)).unwrap();
    let mut client = Endpoint::tcp(LO, listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let msg = b"OPTIONS sip:x SIP/2.0\r\nContent-Length: 2\r\n\r\nhi";
    server.write_all(&[&msg[..], b"\r\n", &msg[..10]].concat()).unwrap();
    let mut got = Vec::new();
    for _ in 0..100 {
        wait([&client], 10_000);
        client.receive(&mut got, &Limits::default());
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].bytes[..], &msg[..]);
    drop(server);
    for _ in 0..100 {
        wait([&client], 10_000);
        client.receive(&mut got, &Limits::default());
        if client.is_closed() {
            break;
        }
    }
    assert!(client.is_closed());
    assert!(!client.send(Bytes::from_static(b"x"), listener.local_addr().unwrap()));
}
