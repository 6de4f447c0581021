//! The request a client transaction holds until its final response: retransmitted as sent
//! (Timers A and E) and, for an INVITE, the source of the ACK of a non-2xx final (RFC 3261
//! §17.1.1.3).
//!
//! The engine hands its transactions requests it parsed (it forwards what it received), so they
//! hold a [`Message`] and build the ACK from its headers ([`super::ack::build_ack`]). A user agent that
//! writes its own requests (the load generator) knows every field it put in them; parsing them
//! back would cost more than building them (about 3,200 instructions for an INVITE with SDP), so
//! it hands over the bytes and, for an INVITE, the few fields the ACK copies ([`AckSource`]).

use super::ack::{write_ack, AckFields};
use bytes::Bytes;
use herald_sip::{HeaderName, Limits, Message};
use std::cell::OnceCell;

/// What the ACK of a non-2xx final response copies from its INVITE (RFC 3261 §17.1.1.3), for a
/// TU that built the INVITE itself: each field as written in it (typically slices of the INVITE's
/// own buffer, which cost no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckSource {
    pub request_uri: Bytes,
    /// The INVITE's top (only) Via value, so the server transaction matches the ACK.
    pub top_via: Bytes,
    /// The INVITE's Route values in order (one URI each), so the ACK follows its path.
    pub routes: Vec<Bytes>,
    /// The From value, tag included.
    pub from: Bytes,
    pub call_id: Bytes,
    /// The INVITE's CSeq number (the ACK's method is ACK).
    pub cseq: u32,
}

impl AckSource {
    /// The ACK for `response`, a 300-699 to the INVITE these fields came from: the same message,
    /// byte for byte, that [`super::ack::build_ack`] writes from the parsed INVITE (To from the
    /// response, so it carries the UAS's tag; Max-Forwards 70; no body). None when the response
    /// has no To.
    pub fn ack(&self, response: &Message) -> Option<Bytes> {
        let to = response.get(HeaderName::To)?;
        let routes: Vec<&[u8]> = self.routes.iter().map(|r| &r[..]).collect();
        Some(write_ack(AckFields {
            uri: &self.request_uri,
            top_via: &self.top_via,
            routes: &routes,
            from: &self.from,
            to,
            call_id: &self.call_id,
            seq: self.cseq,
        }))
    }
}

/// A client transaction's request until its final response.
#[derive(Debug)]
pub(crate) enum Sent {
    /// Parsed (the engine's): the ACK comes from its headers, and [`Sent::message`] lends it for
    /// a CANCEL (§9.1). The messages here are boxed: a transaction is as large as its largest
    /// state, and the table moves it into place when it starts (a Message is 136 bytes).
    Parsed(Box<Message>),
    /// Written by the TU: the bytes, and for an INVITE what its ACK copies (boxed: a
    /// transaction's size is that of its largest state, and the engine's transactions never
    /// hold this one).
    Written { bytes: Bytes, ack: Option<Box<AckSource>> },
    /// The engine's own forwarded copy of a request (well-formed: written by the editor from a
    /// checked request), parsed only when its headers are first needed (a CANCEL, a failover,
    /// the ACK of a non-2xx): most transactions never need them.
    Forwarded { bytes: Bytes, parsed: OnceCell<Option<Box<Message>>> },
}

impl Sent {
    /// The bytes as sent (and resent).
    pub(crate) fn bytes(&self) -> &Bytes {
        match self {
            Sent::Parsed(m) => m.buffer(),
            Sent::Written { bytes, .. } | Sent::Forwarded { bytes, .. } => bytes,
        }
    }

    /// The ACK for `response`, a non-2xx final to this INVITE; None when it cannot be built (a
    /// malformed response, or a written request given no [`AckSource`]).
    pub(crate) fn ack(&self, response: &Message) -> Option<Bytes> {
        match self {
            Sent::Parsed(m) => super::ack::build_ack(m, response),
            Sent::Written { ack, .. } => ack.as_ref()?.ack(response),
            Sent::Forwarded { .. } => super::ack::build_ack(self.message()?, response),
        }
    }

    /// The request as a parsed message, when it was handed over parsed or forwarded.
    pub(crate) fn message(&self) -> Option<&Message> {
        match self {
            Sent::Parsed(m) => Some(m),
            Sent::Written { .. } => None,
            Sent::Forwarded { bytes, parsed } => {
                parsed.get_or_init(|| Message::parse(bytes.clone(), &Limits::default()).ok().map(Box::new)).as_deref()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::build_ack;
    use herald_sip::Limits;

    fn parse(s: &str) -> Message {
        Message::parse(Bytes::copy_from_slice(s.as_bytes()), &Limits::default()).expect("test message parses")
    }

    const INVITE: &str = "INVITE sip:bob@biloxi.example.com SIP/2.0\r\n\
        Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKa;rport\r\n\
        Max-Forwards: 70\r\n\
        From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
        To: Bob <sip:bob@biloxi.example.com>\r\n\
        Call-ID: a84b4c76e66710\r\n\
        CSeq: 314159 INVITE\r\n\
        Route: <sip:p1.example.com;lr>\r\n\
        Route: <sip:p2.example.com;lr>\r\n\
        Content-Length: 0\r\n\r\n";

    const BUSY: &str = "SIP/2.0 486 Busy Here\r\n\
        Via: SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKa;rport=5060\r\n\
        To: Bob <sip:bob@biloxi.example.com>;tag=8321234356\r\n\
        From: Alice <sip:alice@atlanta.example.com>;tag=1928301774\r\n\
        Call-ID: a84b4c76e66710\r\n\
        CSeq: 314159 INVITE\r\n\
        Content-Length: 0\r\n\r\n";

    fn source() -> AckSource {
        AckSource {
            request_uri: Bytes::from_static(b"sip:bob@biloxi.example.com"),
            top_via: Bytes::from_static(b"SIP/2.0/UDP pc33.atlanta.example.com;branch=z9hG4bKa;rport"),
            routes: vec![
                Bytes::from_static(b"<sip:p1.example.com;lr>"),
                Bytes::from_static(b"<sip:p2.example.com;lr>"),
            ],
            from: Bytes::from_static(b"Alice <sip:alice@atlanta.example.com>;tag=1928301774"),
            call_id: Bytes::from_static(b"a84b4c76e66710"),
            cseq: 314159,
        }
    }

    #[test]
    fn a_forwarded_request_is_parsed_only_when_needed_and_acks_as_the_parsed_one() {
        let busy = parse(BUSY);
        let fwd = Sent::Forwarded { bytes: Bytes::from_static(INVITE.as_bytes()), parsed: OnceCell::new() };
        assert_eq!(&fwd.bytes()[..], INVITE.as_bytes());
        assert!(matches!(&fwd, Sent::Forwarded { parsed, .. } if parsed.get().is_none()), "parsed before use");
        assert_eq!(fwd.ack(&busy), build_ack(&parse(INVITE), &busy));
        assert_eq!(fwd.message().map(|m| m.as_bytes()), Some(INVITE.as_bytes()));
        assert!(matches!(&fwd, Sent::Forwarded { parsed, .. } if parsed.get().is_some()), "parsed once, kept");
    }

    #[test]
    fn the_ack_from_fields_is_the_ack_from_the_parsed_invite() {
        let busy = parse(BUSY);
        let from_fields = source().ack(&busy).expect("ack");
        assert_eq!(from_fields, build_ack(&parse(INVITE), &busy).expect("ack"));
        let written = Sent::Written { bytes: Bytes::from_static(INVITE.as_bytes()), ack: Some(Box::new(source())) };
        assert_eq!(written.ack(&busy), Some(from_fields));
        assert_eq!(written.bytes(), INVITE.as_bytes());
        assert!(written.message().is_none());
    }

    /// A written INVITE goes through the machine as a parsed one does: the same sends (the
    /// INVITE, its retransmission, the ACK of a 486) and events, and it holds the same bytes.
    #[test]
    fn a_written_invite_behaves_as_a_parsed_one() {
        use crate::transaction::{ClientInvite, ClientNonInvite, TimerKind, Timers, TuEvent, TxAction};
        use std::time::{Duration, Instant};
        fn trace(out: crate::transaction::Actions) -> Vec<String> {
            out.into_iter()
                .map(|a| match a {
                    TxAction::Send(b) => format!("send {}", String::from_utf8_lossy(&b)),
                    TxAction::ToTu(TuEvent::Response(m)) => format!("response {:?}", m.status()),
                    TxAction::ToTu(e) => format!("{e:?}"),
                })
                .collect()
        }
        let (t0, timers) = (Instant::now(), Timers::default());
        let invite = Bytes::from_static(INVITE.as_bytes());
        let (mut parsed, p0) = ClientInvite::new(t0, parse(INVITE), false, &timers);
        let (mut written, w0) = ClientInvite::written(t0, invite.clone(), source(), false, &timers);
        assert_eq!(trace(p0), trace(w0));
        assert_eq!(written.held_bytes(), parsed.held_bytes());
        assert!(parsed.request().is_some() && written.request().is_none());
        let a = t0 + Duration::from_millis(500);
        assert_eq!(trace(parsed.on_timer(a, TimerKind::A)), trace(written.on_timer(a, TimerKind::A)));
        let (p, w) = (parsed.on_message(a, parse(BUSY)), written.on_message(a, parse(BUSY)));
        let (p, w) = (trace(p), trace(w));
        assert_eq!(p, w);
        assert!(w[0].starts_with("send ACK sip:bob@biloxi.example.com SIP/2.0\r\n"), "{w:?}");
        assert_eq!(written.state(), parsed.state());
        assert_eq!(written.held_bytes(), parsed.held_bytes());

        let bye = INVITE.replace("INVITE", "BYE");
        let (mut parsed, p0) = ClientNonInvite::new(t0, parse(&bye), false, &timers);
        let (mut written, w0) = ClientNonInvite::written(t0, Bytes::from(bye), false, &timers);
        assert_eq!(trace(p0), trace(w0));
        assert!(written.request().is_none());
        assert_eq!(trace(parsed.on_timer(a, TimerKind::E)), trace(written.on_timer(a, TimerKind::E)));
        assert_eq!(written.held_bytes(), parsed.held_bytes());
    }

    #[test]
    fn no_ack_without_a_to_or_a_source() {
        let no_to = parse("SIP/2.0 486 Busy Here\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKa\r\nContent-Length: 0\r\n\r\n");
        assert!(source().ack(&no_to).is_none());
        let written = Sent::Written { bytes: Bytes::from_static(INVITE.as_bytes()), ack: None };
        assert!(written.ack(&parse(BUSY)).is_none());
    }
}
