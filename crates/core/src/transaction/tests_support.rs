//! Test helpers: messages, a simulated clock and a timer driver that checks exact instants.

use super::{Actions, TimerKind, Transaction, TuEvent};
use bytes::Bytes;
use herald_sip::{HeaderName, Limits, Message};
use std::time::{Duration, Instant};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The simulated clock's origin; every test time is `t0 + offset`.
pub fn t0() -> Instant {
    Instant::now()
}

pub fn parse(s: &str) -> Message {
    Message::parse(Bytes::copy_from_slice(s.as_bytes()), &Limits::default()).expect("test message parses")
}

/// A request from alice's UA with the given top Via branch (or none: an RFC 2543 client).
pub fn request_via(method: &str, via: &str, cseq: u32) -> Message {
    parse(&format!(
        "{method} sip:bob@biloxi.example.com SIP/2.0\r\n\
         Via: {via}\r\n\
         Max-Forwards: 70\r\n\
         To: Bob <sip:bob@biloxi.example.com>\r\n\
         From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
         Call-ID: a84b4c76e66710@pc33.atlanta.example.com\r\n\
         CSeq: {cseq} {method}\r\n\
         Contact: <sip:alice@pc33.atlanta.example.com>\r\n\
         Content-Length: 0\r\n\r\n"
    ))
}

pub fn request(method: &str, branch: &str) -> Message {
    request_via(method, &format!("SIP/2.0/UDP pc33.atlanta.example.com;branch={branch}"), 314159)
}

pub fn invite(branch: &str) -> Message {
    request("INVITE", branch)
}

/// A response to `req`: its Vias, From, To (with `to_tag`), Call-ID and CSeq.
pub fn response(req: &Message, status: u16, to_tag: Option<&str>) -> Message {
    parse(&String::from_utf8_lossy(&response_bytes(req, status, to_tag)))
}

pub fn response_bytes(req: &Message, status: u16, to_tag: Option<&str>) -> Bytes {
    let v = |h| String::from_utf8_lossy(req.get(h).unwrap_or_default()).into_owned();
    let mut s = format!("SIP/2.0 {status} Whatever\r\n");
    for via in req.fields(HeaderName::Via) {
        s.push_str(&format!("Via: {}\r\n", String::from_utf8_lossy(req.value_of(via))));
    }
    let to = match to_tag {
        Some(t) => format!("{};tag={t}", v(HeaderName::To)),
        None => v(HeaderName::To),
    };
    s.push_str(&format!(
        "From: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {}\r\nContent-Length: 0\r\n\r\n",
        v(HeaderName::From),
        v(HeaderName::CallId),
        v(HeaderName::CSeq)
    ));
    Bytes::from(s)
}

/// A comparable summary of a TU event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Response(u16),
    Timeout,
    TransportError,
    Ack,
    NoAck,
    Terminated,
}

pub fn events(a: &Actions) -> Vec<Ev> {
    a.events()
        .map(|e| match e {
            TuEvent::Response(m) => Ev::Response(m.status().unwrap_or(0)),
            TuEvent::Timeout => Ev::Timeout,
            TuEvent::TransportError => Ev::TransportError,
            TuEvent::AckReceived(_) => Ev::Ack,
            TuEvent::NoAck => Ev::NoAck,
            TuEvent::Terminated => Ev::Terminated,
        })
        .collect()
}

pub fn sends(a: &Actions) -> Vec<Bytes> {
    a.sends().cloned().collect()
}

/// One timer firing as observed by [`drive`].
#[derive(Debug)]
pub struct Fired {
    /// Offset from the clock origin.
    pub at: Duration,
    pub kind: TimerKind,
    pub sends: Vec<Bytes>,
    pub events: Vec<Ev>,
}

/// Fires `tx`'s timers in order until none is left due at or before `origin + until`.
/// Before each firing it checks that the timer does nothing 1 ms early, so the recorded
/// instants are exact.
pub fn drive(tx: &mut Transaction, origin: Instant, until: Duration) -> Vec<Fired> {
    let mut fired = Vec::new();
    while let Some((at, kind)) = tx.next_deadline() {
        if at > origin + until {
            break;
        }
        let early = at - ms(1);
        assert!(tx.on_timer(early, kind).is_empty(), "{kind:?} acted 1 ms before its deadline");
        assert_eq!(tx.next_deadline(), Some((at, kind)), "an early call must not disarm {kind:?}");
        let a = tx.on_timer(at, kind);
        fired.push(Fired { at: at - origin, kind, sends: sends(&a), events: events(&a) });
        assert!(fired.len() < 1000, "runaway timers");
    }
    fired
}

/// The offsets at which a timer of `kind` fired.
pub fn times(fired: &[Fired], kind: TimerKind) -> Vec<Duration> {
    fired.iter().filter(|f| f.kind == kind).map(|f| f.at).collect()
}

/// Cumulative offsets of retransmissions whose intervals start at T1, double, and are capped
/// at `cap` (None: no cap), strictly before `end`.
pub fn backoff(t1: Duration, cap: Option<Duration>, end: Duration) -> Vec<Duration> {
    let (mut at, mut iv, mut out) = (t1, t1, Vec::new());
    while at < end {
        out.push(at);
        iv = cap.map_or(iv * 2, |c| (iv * 2).min(c));
        at += iv;
    }
    out
}

/// The RFC 4475 §3.1.1.13 message inv2543 (an RFC 2543 INVITE: no branch, no From tag).
pub const INV2543: &str = "INVITE sip:UserB@example.com SIP/2.0\r\n\
    Via: SIP/2.0/UDP iftgw.example.com\r\n\
    From: <sip:+13035551111@ift.client.example.net;user=phone>\r\n\
    Record-Route: <sip:UserB@example.com;maddr=ss1.example.com>\r\n\
    To: sip:+16505552222@ss1.example.net;user=phone\r\n\
    Call-ID: inv2543.1717@ift.client.example.com\r\n\
    CSeq: 56 INVITE\r\n\
    Content-Type: application/sdp\r\n\
    \r\n\
    v=0\r\n\
    o=mhandley 29739 7272939 IN IP4 192.0.2.5\r\n\
    s=-\r\n\
    c=IN IP4 192.0.2.5\r\n\
    t=0 0\r\n\
    m=audio 49217 RTP/AVP 0\r\n";

/// `INV2543` with the start line and CSeq method replaced (an ACK or CANCEL from that client)
/// and an optional To tag.
pub fn inv2543_as(method: &str, to_tag: Option<&str>) -> Message {
    let mut s =
        INV2543.replacen("INVITE sip:", &format!("{method} sip:"), 1).replace("56 INVITE", &format!("56 {method}"));
    if let Some(t) = to_tag {
        s = s.replace("user=phone\r\nCall-ID", &format!("user=phone;tag={t}\r\nCall-ID"));
    }
    parse(&s)
}
