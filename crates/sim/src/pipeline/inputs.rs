//! What the steps of a fuzz input become: template requests edited by the input
//! ([`splice`]), with digest credentials answering herald's last challenge, and callees'
//! responses to the requests herald sent.

use super::{World, DOMAIN, USERS};
use bytes::Bytes;
use herald_core::auth::Algorithm;
use herald_core::inbound;
use herald_core::Peer;
use herald_sip::{Framing, HeaderName, Message};

/// A callee's response to `req` (sent to `to`): its Via, From, Call-ID, CSeq and Record-Route,
/// To with a tag, a Contact for 2xx and 3xx.
pub(super) fn response_to(req: &Message, to: Peer, status: u16) -> Vec<u8> {
    let mut s = format!("SIP/2.0 {status} Whatever\r\n");
    for h in req.headers() {
        let line = &req.as_bytes()[h.line.range()];
        match h.name {
            HeaderName::Via | HeaderName::From | HeaderName::CallId | HeaderName::CSeq | HeaderName::RecordRoute => {
                s.push_str(&String::from_utf8_lossy(line));
            }
            HeaderName::To if status > 100 && req.to_tag().ok().flatten().is_none() => {
                let v = String::from_utf8_lossy(req.value_of(h));
                s.push_str(&format!("To: {v};tag=callee\r\n"));
            }
            HeaderName::To => s.push_str(&String::from_utf8_lossy(line)),
            _ => {}
        }
    }
    if (200..300).contains(&status) || status == 302 {
        s.push_str(&format!("Contact: <sip:callee@{}>\r\n", to.addr));
    }
    s.push_str("Content-Length: 0\r\n\r\n");
    s.into_bytes()
}

/// `payload` edits `msg`: byte 0 picks a line, byte 1 a column in it, byte 2 how many bytes to
/// delete there; the rest is inserted. Shorter payloads leave the message as it is. Positions
/// are line-relative because herald's branches (copied into responses) vary in length from one
/// process to the next: a crash found late in a long run should still replay on its own.
fn splice(msg: &mut Vec<u8>, payload: &[u8]) {
    if payload.len() < 3 {
        return;
    }
    let starts: Vec<usize> =
        std::iter::once(0).chain(msg.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1)).collect();
    let line = usize::from(payload[0]) % starts.len();
    let (start, end) = (starts[line], starts.get(line + 1).copied().unwrap_or(msg.len()));
    let at = start + usize::from(payload[1]) % (end - start + 1);
    let stop = (at + usize::from(payload[2])).min(msg.len());
    msg.splice(at..stop, payload[3..].iter().copied());
}

/// Request templates: (user whose credentials it carries, text). `{T}` transport, `{A}` the
/// sender's address, `{V}` a variant (new branch or retransmission), `{AUTH}` credentials.
const TEMPLATES: &[(usize, &str)] = &[
    // A local caller (challenged when auth is on) calls bob; ACK, BYE, CANCEL of that call.
    (0, "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 INVITE\nContact: <sip:alice@{A}>\n{AUTH}Content-Type: application/sdp\nContent-Length: 5\n\nv=0\n"),
    (0, "ACK sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 1 ACK\nContent-Length: 0\n\n"),
    (0, "ACK sip:bob@192.0.2.2:5062 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-ack{V};rport\nRoute: <sip:192.0.2.10:5060;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 1 ACK\nContent-Length: 0\n\n"),
    (0, "BYE sip:bob@192.0.2.2:5062 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-bye{V};rport\nRoute: <sip:192.0.2.10:5060;lr>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>;tag=callee\nCall-ID: c1\nCSeq: 2 BYE\n{AUTH}Content-Length: 0\n\n"),
    (0, "CANCEL sip:bob@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-inv{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=a1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 CANCEL\nContent-Length: 0\n\n"),
    // An inbound call from another domain (not challenged), to a forked and a TCP user.
    (2, "INVITE sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dave{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=c2\nTo: <sip:dave@example.com>\nCall-ID: c2\nCSeq: 1 INVITE\nContact: <sip:carol@{A}>\nContent-Length: 0\n\n"),
    (2, "INVITE sip:carol@example.com;transport=tcp SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-carol{V};rport\nMax-Forwards: 70\nFrom: <sip:eve@other.org>;tag=c3\nTo: <sip:carol@example.com>\nCall-ID: c3\nCSeq: 1 INVITE\nContact: <sip:eve@{A}>\nContent-Length: 0\n\n"),
    (2, "CANCEL sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dave{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=c2\nTo: <sip:dave@example.com>\nCall-ID: c2\nCSeq: 1 CANCEL\nContent-Length: 0\n\n"),
    // Registrations: a new binding, a refresh with q and expires, removing all of bob's.
    (0, "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-reg{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=r1\nTo: <sip:alice@example.com>\nCall-ID: reg-a\nCSeq: {V} REGISTER\nContact: <sip:alice@{A}>;q=0.7;expires=120\n{AUTH}Content-Length: 0\n\n"),
    (1, "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-unreg{V};rport\nMax-Forwards: 70\nFrom: <sip:bob@example.com>;tag=r2\nTo: <sip:bob@example.com>\nCall-ID: reg-b\nCSeq: {V} REGISTER\nContact: *\nExpires: 0\n{AUTH}Content-Length: 0\n\n"),
    // To the proxy itself, a MESSAGE, and routes: loose to an IP, strict, by DNS, failing DNS.
    (0, "OPTIONS sip:192.0.2.10:5060 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-opt{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=o1\nTo: <sip:192.0.2.10:5060>\nCall-ID: opt\nCSeq: 1 OPTIONS\nContent-Length: 0\n\n"),
    (0, "MESSAGE sip:dave@example.com SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-msg{V};rport\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=m1\nTo: <sip:dave@example.com>\nCall-ID: msg\nCSeq: 1 MESSAGE\n{AUTH}Content-Type: text/plain\nContent-Length: 2\n\nhi"),
    (0, "INVITE sip:x@elsewhere.org SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-lr{V};rport\nRoute: <sip:192.0.2.10:5060;lr>, <sip:192.0.2.50:5070;lr;transport=tcp>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=l1\nTo: <sip:x@elsewhere.org>\nCall-ID: lr\nCSeq: 1 INVITE\n{AUTH}Contact: <sip:alice@{A}>\nContent-Length: 0\n\n"),
    (0, "INVITE sip:192.0.2.10:5060 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-sr{V};rport\nRoute: <sip:y@192.0.2.51:5071>, <sip:z@far.example.net>\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=s1\nTo: <sip:z@far.example.net>\nCall-ID: sr\nCSeq: 1 INVITE\n{AUTH}Contact: <sip:alice@{A}>\nContent-Length: 0\n\n"),
    (2, "INVITE sip:u@resolve.example.net:5080 SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-dns{V};rport\nMax-Forwards: 70\nFrom: <sip:carol@other.org>;tag=d1\nTo: <sip:u@resolve.example.net>\nCall-ID: dns\nCSeq: 1 INVITE\nContent-Length: 0\n\n"),
    (2, "SUBSCRIBE sip:u@fail.invalid SIP/2.0\nVia: SIP/2.0/{T} {A};branch=z9hG4bK-nx{V};rport\nMax-Forwards: 1\nFrom: <sip:carol@other.org>;tag=n1\nTo: <sip:u@fail.invalid>\nCall-ID: nx\nCSeq: 1 SUBSCRIBE\nEvent: presence\nExpires: 60\nContent-Length: 0\n\n"),
];

/// Status codes a callee answers with.
const STATUSES: [u16; 12] = [100, 180, 183, 200, 202, 302, 404, 407, 486, 487, 503, 603];

impl World {
    pub(super) fn template(&mut self, who: usize, payload: &[u8], credentials: bool) -> Vec<u8> {
        let Some((&pick, rest)) = payload.split_first() else { return Vec::new() };
        let (user, text) = TEMPLATES[usize::from(pick) % TEMPLATES.len()];
        let peer = self.peer(who);
        let variant = (pick / TEMPLATES.len() as u8 % 4).to_string();
        let mut text = text
            .replace("{T}", peer.transport.as_via_str())
            .replace("{A}", &peer.addr.to_string())
            .replace("{V}", &variant);
        let auth = match (&self.last_nonce, credentials) {
            (Some(nonce), true) => {
                let method = text.split(' ').next().unwrap_or("").to_owned();
                let uri = text.split(' ').nth(1).unwrap_or("").to_owned();
                let header = if method == "REGISTER" { "Authorization" } else { "Proxy-Authorization" };
                self.nc += 1;
                format!("{header}: {}\n", digest(USERS[user], &method, &uri, nonce, self.nc))
            }
            _ => String::new(),
        };
        text = text.replace("{AUTH}", &auth).replace('\n', "\r\n");
        let mut bytes = text.into_bytes();
        splice(&mut bytes, rest);
        bytes
    }

    /// A response to one of the requests herald sent, from where it went.
    pub(super) fn reply(&mut self, payload: &[u8]) -> Option<(Peer, Vec<u8>)> {
        let (&pick, rest) = payload.split_first()?;
        let n = self.sent_requests.len();
        if n == 0 {
            return None;
        }
        let (to, req) = &self.sent_requests[n - 1 - usize::from(pick) % n];
        let status = STATUSES[usize::from(pick >> 4) % STATUSES.len()];
        let mut bytes = response_to(req, *to, status);
        splice(&mut bytes, rest);
        Some((*to, bytes))
    }

    /// Bytes from `from` (a peer herald sent to): if it is one of ours, over its current
    /// connection (a response may come back on a newer one than its request left on).
    pub(super) fn receive_from_peer(&mut self, from: Peer, bytes: &[u8]) {
        if let Some(i) = (0..4).find(|i| {
            let p = self.peer(*i);
            p.transport == from.transport && p.addr == from.addr
        }) {
            self.receive(i, bytes);
            return;
        }
        let framing = if from.transport.is_reliable() { Framing::Stream } else { Framing::Datagram };
        // A stream peer that is none of ours: one frame on its own connection.
        let got = inbound::classify(Bytes::copy_from_slice(bytes), &self.limits, framing, false);
        self.inbound(from, got);
    }
}

/// RFC 7616 §3.4.1 with qop=auth, MD5 (herald offers it last, accepts it all the same).
fn digest((user, password): (&str, &str), method: &str, uri: &str, nonce: &str, nc: u32) -> String {
    let answer = herald_credentials::Answer {
        algorithm: Algorithm::Md5,
        sess: false,
        user,
        realm: DOMAIN,
        nonce,
        uri,
        nc: Some(nc),
        cnonce: "fuzzcn",
        opaque: None,
    };
    answer.header_value(method, password)
}
