//! The requests our callee handles from a [`Peek`] (their start line and the header lines a
//! response copies), without the full parse: see [`Callee::on_peeked_request`].

use super::{new_tag, Callee, NewInvite, MAX_DIALOGS};
use crate::agent::context::Context;
use crate::agent::output::{Outbox, SendKind, Side};
use crate::agent::wire::{push_body, push_status_line, push_to_line, Head, RING_HEADER};
use bytes::Bytes;
use herald_sip::headers::tag_of;
use herald_sip::peek::Peek;
use herald_sip::HeaderField;
use herald_sip::HeaderName::{self, CSeq, CallId, From, RecordRoute, To, Via};
use std::net::SocketAddr;
use std::ops::Range;

/// What an INVITE's responses copy (RFC 3261 §8.2.6.2, §12.1.1), and its To.
const INVITE_LINES: [HeaderName; 6] = [Via, From, To, CallId, CSeq, RecordRoute];
/// What a BYE's 200 copies, and its To.
const BYE_LINES: [HeaderName; 5] = [Via, From, To, CallId, CSeq];

impl Callee {
    /// A request read with a [`Peek`] only as far as its start line and the header lines that
    /// decide what our callee does with it and that its response copies: an ACK (its Call-ID),
    /// a new INVITE to one of our registered contacts (or a retransmitted one) and a BYE of one
    /// of our dialogs (Via, From, To, Call-ID, CSeq, Record-Route and the ring header), handled
    /// as [`Callee::on_request`] handles them parsed, with the same responses, byte for byte.
    /// False (nothing done) for any other, or one that needs more (a Request-URI that is not
    /// one of our contacts as written, a To that is not one line, a BYE of no dialog, an
    /// INVITE over the dialog bound), which then goes through the full parse. Parsing the INVITE
    /// and the BYE in full cost ~5k instructions per call, the ACK ~1.2k (callgrind).
    pub fn on_peeked_request(
        &mut self,
        ctx: &mut Context,
        peek: &Peek<'_>,
        from: SocketAddr,
        out: &mut Outbox,
    ) -> bool {
        match peek.method().as_ref().map(|m| m.as_str()) {
            Some("ACK") => self.on_peeked_ack(ctx, peek, out),
            Some("INVITE") => self.on_peeked_invite(ctx, peek, from, out),
            Some("BYE") => self.on_peeked_bye(ctx, peek, from, out),
            _ => false,
        }
    }

    fn on_peeked_ack(&mut self, ctx: &Context, peek: &Peek<'_>, out: &mut Outbox) -> bool {
        match peek.first_of([CallId]) {
            Ok([Some(call_id)]) if !call_id.is_empty() => {
                let handle = self.find(ctx.held.call_key(call_id), call_id);
                self.on_ack(handle, out);
                true
            }
            _ => false,
        }
    }

    /// [`Callee::on_request`]'s INVITE: a retransmission gets the last response again, a new
    /// one a dialog ([`Callee::answer_invite`]).
    fn on_peeked_invite(&mut self, ctx: &mut Context, peek: &Peek<'_>, from: SocketAddr, out: &mut Outbox) -> bool {
        let mut read = Read::default();
        let lines = peek.each_field(&INVITE_LINES, Some(RING_HEADER), |f| read.field(f, f.name != HeaderName::Other));
        let (Ok(()), Some((call_id, to))) = (lines, read.call_id_and_to(peek.bytes())) else { return false };
        let key = ctx.held.call_key(call_id);
        if let Some((slot, generation)) = self.find(key, call_id) {
            // A retransmission (§17.2.1): repeat the last response.
            if let Some(d) = self.dialogs.get_mut(slot, generation) {
                out.send(Side::Callee, d.last.clone(), from, SendKind::Plain);
            }
            return true;
        }
        let Some(user) = self.user_by_contact(ctx, peek.request_uri_bytes()) else { return false };
        if self.dialogs.len() >= MAX_DIALOGS || !tag_of(to).is_ok_and(|t| t.is_none()) {
            return false; // the 503 goes from the full parse
        }
        let ring_us = self.ring_us(read.ring.clone().map(|r| &peek.bytes()[r]));
        let tag = new_tag(ctx);
        let text = read.text(peek.bytes());
        let mut lines = String::with_capacity(512);
        read.copy(&mut lines, &text);
        let mut to_line = String::new();
        read.push_to_line(&mut to_line, &text, Some(&tag));
        self.answer_invite(ctx, NewInvite { call_id, key, user, ring_us, from }, lines, to_line, out);
        true
    }

    /// [`Callee::on_request`]'s BYE of one of our dialogs: its 200 written straight from the
    /// lines read (what [`crate::agent::wire::Local::reply`] writes from the parsed BYE).
    fn on_peeked_bye(&mut self, ctx: &Context, peek: &Peek<'_>, from: SocketAddr, out: &mut Outbox) -> bool {
        let mut read = Read::default();
        let lines = peek.each_field(&BYE_LINES, None, |f| read.field(f, true));
        let (Ok(()), Some((call_id, to))) = (lines, read.call_id_and_to(peek.bytes())) else { return false };
        let Some((slot, generation)) = self.find(ctx.held.call_key(call_id), call_id) else { return false };
        let ok = || {
            let text = read.text(peek.bytes());
            let mut ok = String::with_capacity(peek.bytes().len() + 64);
            push_status_line(&mut ok, 200, "OK");
            read.copy(&mut ok, &text);
            read.push_to_line(&mut ok, &text, tag_of(to).ok().flatten().is_none().then_some("bench"));
            push_body(&mut ok, "");
            Bytes::from(ok)
        };
        self.on_bye(ctx, ok, from, slot, generation, out);
        true
    }
}

/// Runs of copied lines a request may have before its response is written line by line instead.
const MAX_RUNS: usize = 8;

/// What a peek read of a request: where its Call-ID, To and ring header values are, and the
/// lines its response copies (all read but To and the ring header), in runs: lines copied one
/// after another in the request are copied in one piece, as the parsed path copies them
/// (`wire::echo_lines`); a line between two copied ones, read or stepped over, splits them.
#[derive(Default)]
struct Read {
    call_id: Option<Range<usize>>,
    to: Option<Range<usize>>,
    tos: usize,
    ring: Option<Range<usize>>,
    runs: [Range<usize>; MAX_RUNS],
    /// Runs in `runs`; more than [`MAX_RUNS`] are copied a line at a time from `more`.
    count: usize,
    more: Vec<Range<usize>>,
    /// From the first line read to the end of the last.
    span: Range<usize>,
}

impl Read {
    /// One line read; `copied` when the response copies it (To aside, which it rewrites).
    fn field(&mut self, f: &HeaderField, copied: bool) {
        let (line, value) = (f.line.range(), f.value.range());
        if self.span.is_empty() {
            self.span.start = line.start;
        }
        self.span.end = line.end;
        match f.name {
            CallId => {
                self.call_id.get_or_insert(value);
            }
            To => {
                self.tos += 1;
                self.to.get_or_insert(value);
                return;
            }
            // The only other name asked for: the ring header.
            HeaderName::Other => {
                self.ring.get_or_insert(value);
            }
            _ => {}
        }
        if !copied {
            return;
        }
        match self.count.checked_sub(1).map(|last| &mut self.runs[last]) {
            Some(run) if run.end == line.start => run.end = line.end,
            _ if self.count < MAX_RUNS => {
                self.runs[self.count] = line;
                self.count += 1;
            }
            _ => self.more.push(line),
        }
    }

    /// The Call-ID (not empty) and the one To value, or None: the full parse decides then.
    fn call_id_and_to<'a>(&self, text: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        let call_id = self.call_id.clone().map(|r| &text[r]).filter(|id| !id.is_empty())?;
        (self.tos == 1).then_some((call_id, &text[self.to.clone()?]))
    }

    /// The lines read, checked as text once ([`Head::span`]: a check of each copied piece cost
    /// ~150 instructions a piece, ~1.2k a call, callgrind).
    fn text<'a>(&self, bytes: &'a [u8]) -> Head<'a> {
        Head::span(bytes, self.span.clone())
    }

    /// Appends the copied lines, in order.
    fn copy(&self, out: &mut String, text: &Head<'_>) {
        for run in self.runs[..self.count].iter().chain(&self.more) {
            text.push(out, run.clone());
        }
    }

    /// `To: {value}[;tag={tag}]` CRLF, as the parsed path writes it.
    fn push_to_line(&self, out: &mut String, text: &Head<'_>, tag: Option<&str>) {
        push_to_line(out, text, self.to.clone().unwrap_or_default(), tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::output::Output;
    use crate::agent::users::User;
    use crate::agent::wire::Local;
    use herald_sip::{Limits, Message};
    use rand::SeedableRng;

    /// A callee and its context; two made alike draw the same tags.
    fn callee() -> (Callee, Context) {
        let users = vec![User { name: "alice".into(), password: None }, User { name: "bob".into(), password: None }];
        let local = |port: u16| Local::new("UDP", format!("127.0.0.1:{port}"), "", "example.com".into());
        let proxy = "127.0.0.1:5060".parse().unwrap();
        let mut ctx =
            Context::new(local(7001), local(7002), proxy, false, users, rand::rngs::SmallRng::seed_from_u64(3), 1);
        ctx.now = 1_000;
        ctx.rx_us = 900;
        (Callee::new(&ctx.users, 0), ctx)
    }

    /// The outputs, with the keys of held answers left out (each context hashes with a seed of
    /// its own).
    fn outputs(out: &mut Outbox) -> String {
        let mut items = Vec::new();
        out.swap_into(&mut items);
        for item in &mut items {
            if let Output::Send { kind: SendKind::Answer { key, .. }, .. } = item {
                *key = 0;
            }
        }
        format!("{items:?}")
    }

    /// A proxied INVITE to our contact for bob, with `extra` lines before its Call-ID.
    fn invite(call_id: &str, extra: &str) -> String {
        format!(
            "INVITE sip:bob@127.0.0.1:7002 SIP/2.0\r\nRecord-Route: <sip:127.0.0.1:5060;lr>\r\n\
             Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKp1\r\nVia: SIP/2.0/UDP 127.0.0.1:7001;branch=z9hG4bKc1;rport=7001\r\n\
             Max-Forwards: 69\r\nFrom: <sip:alice@example.com>;tag=a1\r\nTo: <sip:bob@example.com>\r\n{extra}\
             Call-ID: {call_id}\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@127.0.0.1:7001>\r\n\
             Content-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\n"
        )
    }

    fn bye(call_id: &str, to: &str) -> String {
        format!(
            "BYE sip:bob@127.0.0.1:7002 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKp2\r\n\
             v: SIP/2.0/UDP 127.0.0.1:7001;branch=z9hG4bKc2\r\nMax-Forwards: 69\r\nf: <sip:alice@example.com>;tag=a1\r\n\
             {to}\r\ni: {call_id}\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n"
        )
    }

    /// Every request of the list, in order, to a callee that parses it and one that peeks first:
    /// what the peek handles, it answers byte for byte as the parse does (responses, timers,
    /// dialogs); what it declines it leaves untouched for the parse. Returns which were peeked.
    fn peeked_as_parsed(requests: &[Vec<u8>]) -> Vec<bool> {
        let ((mut parsed, mut pctx), (mut peeking, mut kctx)) = (callee(), callee());
        let (mut pout, mut kout) = (Outbox::default(), Outbox::default());
        let from = "127.0.0.1:5060".parse().unwrap();
        let limits = Limits::default();
        let mut taken = Vec::new();
        for bytes in requests {
            let text = String::from_utf8_lossy(bytes);
            let msg = Message::parse(Bytes::from(bytes.clone()), &limits).expect(&text);
            parsed.on_request(&mut pctx, &msg, from, &mut pout);
            let peek = Peek::new(bytes, &limits).expect(&text);
            let took = peeking.on_peeked_request(&mut kctx, &peek, from, &mut kout);
            if !took {
                assert_eq!(outputs(&mut kout), "[]", "{text}: declined, yet did something");
                peeking.on_request(&mut kctx, &msg, from, &mut kout);
            }
            assert_eq!(outputs(&mut kout), outputs(&mut pout), "{text}");
            assert_eq!(peeking.len(), parsed.len(), "{text}");
            taken.push(took);
        }
        taken
    }

    #[test]
    fn invites_and_byes_are_answered_from_a_peek_as_from_the_parse() {
        // Bytes that are not UTF-8 (0x01 stands for 0xff), in a line stepped over and in a
        // copied one, and other text.
        let not_utf8 = |text: String| text.into_bytes().into_iter().map(|b| if b == 1 { 0xff } else { b }).collect();
        let requests: [Vec<u8>; 12] = [
            invite("c1", "").into(),
            // The ring header, in any case; lines of other names between the copied ones.
            invite("c2", "X-Herald-Ring: 250\r\nSubject: s\r\n").into(),
            invite("c3", "x-herald-ring:  7\r\n").into(),
            // Folded and compact lines, spacing.
            invite("c4", "X-Other: a\r\n b\r\n").replace("From: <", "f : \"\u{e9}\" <").into(),
            not_utf8(invite("c5", "X-Note: \u{1}\r\n")),
            not_utf8(invite("c6", "").replace("From: <", "From: \"\u{1}\" <")),
            not_utf8(invite("c7", "").replace("To: <sip:bob", "To: \"\u{1}\" <sip:bob")),
            // Retransmitted: the last response again.
            invite("c1", "").into(),
            bye("c1", "To: <sip:bob@example.com>;tag=b1").into(),
            // Retransmitted BYE: the same 200; a BYE whose To has no tag gets ours.
            bye("c1", "To: <sip:bob@example.com>;tag=b1").into(),
            bye("c2", "t: <sip:bob@example.com>").into(),
            "ACK sip:bob@127.0.0.1:7002 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKp3\r\n\
             Call-ID: c3\r\nCSeq: 1 ACK\r\nContent-Length: 0\r\n\r\n"
                .into(),
        ];
        assert_eq!(peeked_as_parsed(&requests), [true; 12]);
    }

    #[test]
    fn what_a_peek_cannot_decide_is_left_to_the_parse() {
        let requests = [
            // Not our contact as written (the parse reads the URI), a To with a tag (503),
            // two To lines, no Call-ID, a BYE of no dialog (481).
            invite("d1", "").replace("sip:bob@127.0.0.1:7002", "sip:bob@example.com"),
            invite("d2", "").replace("To: <sip:bob@example.com>", "To: <sip:bob@example.com>;tag=x"),
            invite("d3", "To: <sip:carol@example.com>\r\n"),
            invite("d4", "").replace("Call-ID: d4\r\n", ""),
            bye("nobody", "To: <sip:bob@example.com>;tag=b1"),
            // And a plain one still is.
            invite("d5", ""),
        ]
        .map(String::into_bytes);
        assert_eq!(peeked_as_parsed(&requests), [false, false, false, false, false, true]);
    }
}
