use super::*;
use bytes::Bytes;

fn parse(text: &str) -> Message {
    Message::parse(Bytes::from(text.replace('\n', "\r\n")), &herald_sip::Limits::default()).unwrap()
}

const HEADERS: &str = "Via: SIP/2.0/UDP h;branch=z9hG4bK1\nFrom: <sip:a@b>;tag=1\nTo: <sip:a@b>\nCall-ID: x\n";

#[test]
fn message_types() {
    let req = |m: &str| parse(&format!("{m} sip:a@b SIP/2.0\n{HEADERS}CSeq: 1 {m}\nContent-Length: 0\n\n"));
    let resp = |code: u16| parse(&format!("SIP/2.0 {code} X\n{HEADERS}CSeq: 1 INVITE\nContent-Length: 0\n\n"));
    assert_eq!(MsgType::of(&req("INVITE")), MsgType::Invite);
    assert_eq!(MsgType::of(&req("REGISTER")), MsgType::Register);
    assert_eq!(MsgType::of(&req("SUBSCRIBE")), MsgType::Other);
    assert_eq!(MsgType::of(&req("invite")), MsgType::Other, "methods are case-sensitive");
    assert_eq!(MsgType::of(&resp(180)), MsgType::Class(1));
    assert_eq!(MsgType::of(&resp(699)), MsgType::Class(6));
    let labels: Vec<&str> = ["INVITE", "ACK", "BYE", "CANCEL", "REGISTER", "OPTIONS", "FOO"]
        .iter()
        .map(|m| MsgType::label(MsgType::of(&req(m)).index()))
        .collect();
    assert_eq!(labels, ["INVITE", "ACK", "BYE", "CANCEL", "REGISTER", "OPTIONS", "other"]);
    assert_eq!(MsgType::label(MsgType::of(&resp(404)).index()), "4xx");
}

#[test]
fn outgoing_types_from_bytes() {
    assert_eq!(MsgType::of_bytes(b"SIP/2.0 200 OK\r\n"), MsgType::Class(2));
    assert_eq!(MsgType::of_bytes(b"SIP/2.0 100 Trying\r\n"), MsgType::Class(1));
    assert_eq!(MsgType::of_bytes(b"INVITE sip:a@b SIP/2.0\r\n"), MsgType::Invite);
    assert_eq!(MsgType::of_bytes(b"ACK sip:a@b SIP/2.0\r\n"), MsgType::Ack);
    assert_eq!(MsgType::of_bytes(b"NOTIFY sip:a@b SIP/2.0\r\n"), MsgType::Other);
    // Never panics on odd bytes.
    for b in [&b""[..], b"SIP/2.0 ", b"\xff\xff ", b"INVITE", b" sip:x"] {
        let _ = MsgType::of_bytes(b).index();
    }
}

#[test]
fn bucket_slots() {
    assert_eq!(slot(0), 0);
    assert_eq!(slot(512), 0);
    assert_eq!(slot(513), 1);
    assert_eq!(slot(1024), 1);
    assert_eq!(slot(1025), 2);
    assert_eq!(slot(1 << 30), SLOTS - 2);
    assert_eq!(slot((1 << 30) + 1), SLOTS - 1);
    assert_eq!(slot(u64::MAX), SLOTS - 1);
}

#[test]
fn drop_tracker_counts_new_drops_and_survives_wrap() {
    let mut d = DropTracker::default();
    assert_eq!(d.advance(5), 5);
    assert_eq!(d.advance(5), 0);
    assert_eq!(d.advance(7), 2);
    assert_eq!(d.advance(3), 0, "never backwards");
    let mut d = DropTracker { seen: u32::MAX - 1 };
    assert_eq!(d.advance(2), 4, "the kernel's u32 wraps");
}

#[test]
fn workers_add_up_and_moments_are_exact() {
    let a = WorkerMetrics::default();
    let b = WorkerMetrics::default();
    a.handled(MsgType::Options, Wire::Udp, 2_000, Some(10_000));
    a.handled(MsgType::Options, Wire::Udp, 4_000, Some(30_000));
    b.handled(MsgType::Options, Wire::Tcp, 6_000, None);
    b.handled(MsgType::Class(2), Wire::Udp, 1_000, Some(1_000));
    a.sent(MsgType::of_bytes(b"SIP/2.0 200 OK\r\n"), Wire::Udp);
    b.sent(MsgType::Class(2), Wire::Tcp);
    b.dropped(3);
    let mut t = Totals::default();
    a.add_to(&mut t);
    b.add_to(&mut t);
    let o = MsgType::Options.index();
    assert_eq!(t.received[o], [2, 1]);
    assert_eq!(t.sent[MsgType::Class(2).index()], [1, 1]);
    assert_eq!(t.service[o].count, 3);
    assert_eq!(t.service[o].sum_ns, 12_000);
    assert_eq!(t.service[o].sum_sq_ns2, 4e6 + 16e6 + 36e6);
    assert_eq!(t.queue_wait[o].count, 2, "TCP has no kernel timestamp");
    assert_eq!(t.queue_wait[o].sum_sq_ns2, 1e8 + 9e8);
    assert_eq!(t.service[o].slots[slot(2_000)], 1);
    assert_eq!(t.service[o].slots.iter().sum::<u64>(), 3);
    assert_eq!(t.socket_drops, 3);
}
