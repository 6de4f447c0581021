//! One client transaction of the generator (RFC 3261 §17.1): herald-core's sans-IO machine
//! ([`herald_core::transaction::ClientInvite`] or [`ClientNonInvite`]) does the retransmissions
//! (Timers A, E), the timeouts (B, F) and the ACK of a non-2xx final (§17.1.1.3); this wrapper
//! adds what the generator measures and matches on (id, method, branch, destination, send time)
//! and maps the machine's actions and deadlines onto the loop's [`Outbox`] and timer heap.
//!
//! A transaction is dropped by its owner at its final response. The RFC keeps a finished client
//! transaction a while (Timer D 32 s, K 5 s, RFC 6026's M 32 s) only to absorb retransmitted
//! responses; the generator answers those from the call itself instead (a 2xx is ACKed again
//! from the dialog, a late non-2xx gets an ACK built from the response alone), so a finished
//! transaction costs neither memory nor a timer entry at thousands of calls per second.

use super::context::Context;
use super::output::{Outbox, Owner, SendKind, Side};
use super::timers::{Timer, TimerKind};
use bytes::Bytes;
use herald_core::transaction::{AckSource, ClientInvite, ClientNonInvite, Transaction, TuEvent, TxAction, TxState};
use herald_sip::Message;
use std::net::SocketAddr;

/// What a response did to the transaction, for its owner.
#[derive(Debug)]
pub enum Reply {
    /// A provisional response; the transaction goes on.
    Provisional(Message),
    /// The final response: the owner drops the transaction now.
    Final(Message),
    /// Absorbed by the machine (nothing for the owner).
    Absorbed,
}

/// Where the timer entries of one transaction go in the loop's heap.
#[derive(Debug, Clone, Copy)]
pub struct TimerSlot {
    pub kind: TimerKind,
    pub slot: u32,
}

pub struct ClientTx {
    /// Unique per transaction in the run; its timer entries carry it as their generation, so a
    /// stale entry never touches a newer transaction of the same call or user.
    pub id: u32,
    pub method: &'static str,
    pub branch: String,
    pub dest: SocketAddr,
    /// When the request was handed to the kernel (stamped by the loop at the flush).
    pub sent_us: u64,
    side: Side,
    timer: TimerSlot,
    /// Boxed: a machine is most of a transaction's size (272 bytes), and a call holding two
    /// transactions is moved into and out of its slab, which a pointer keeps cheap.
    machine: Box<Transaction>,
    /// The deadline the heap holds an entry for (None: none that matters).
    armed_us: Option<u64>,
}

/// A new client transaction's request: what [`ClientTx::start`] sends.
pub struct NewRequest {
    pub id: u32,
    pub method: &'static str,
    pub branch: String,
    pub bytes: Bytes,
    pub dest: SocketAddr,
    /// Some exactly for an INVITE: what the ACK of a non-2xx final copies from it
    /// ([`super::wire::Local::invite`]).
    pub ack: Option<AckSource>,
}

impl ClientTx {
    /// Sends `request` from `side` as a new client transaction of `owner` and arms its first
    /// deadline. The machine gets the request as written, unparsed (the generator wrote it; see
    /// [`ClientInvite::written`]).
    pub fn start(
        ctx: &Context,
        side: Side,
        owner: Owner,
        timer: TimerSlot,
        request: NewRequest,
        out: &mut Outbox,
    ) -> ClientTx {
        let NewRequest { id, method, branch, bytes, dest, ack } = request;
        debug_assert_eq!(method == "INVITE", ack.is_some(), "an INVITE and only an INVITE has an ACK source");
        let now = ctx.instant(ctx.now);
        let (machine, actions) = match ack {
            Some(ack) => {
                let (m, a) = ClientInvite::written(now, bytes, ack, ctx.reliable, &ctx.timers);
                (Transaction::ClientInvite(m), a)
            }
            None => {
                let (m, a) = ClientNonInvite::written(now, bytes, ctx.reliable, &ctx.timers);
                (Transaction::ClientNonInvite(m), a)
            }
        };
        for bytes in actions.sends() {
            out.send(side, bytes.clone(), dest, SendKind::Request { owner, id });
        }
        let machine = Box::new(machine);
        let mut tx = ClientTx { id, method, branch, dest, sent_us: ctx.now, side, timer, machine, armed_us: None };
        tx.rearm(ctx, out);
        tx
    }

    /// A provisional response arrived (Timer A has stopped, Timer E runs at T2).
    pub fn is_proceeding(&self) -> bool {
        self.machine.state() == TxState::Proceeding
    }

    /// A response matched to this transaction (by the owner: Call-ID, branch, method) whose
    /// status alone decides what it does: every final but an INVITE's non-2xx (whose ACK the
    /// machine writes, §17.1.1.3), since the owner drops the transaction, machine and all, at its
    /// final; and a provisional once the machine is Proceeding, which it only passes up
    /// (§17.1.1.2, §17.1.2.2: its timers stay as they are). A status of no class is absorbed, as
    /// the machine absorbs it. Handing these to the machine cost ~1,200 instructions per call
    /// (callgrind: its state change, timer table and the re-arming check) for nothing the owner
    /// kept. Err gives the response back for [`ClientTx::on_response`].
    pub fn settled(&self, msg: Message) -> Result<Reply, Message> {
        match msg.status().unwrap_or(0) {
            100..=199 if self.is_proceeding() => Ok(Reply::Provisional(msg)),
            200..=299 => Ok(Reply::Final(msg)),
            300..=699 if self.method != "INVITE" => Ok(Reply::Final(msg)),
            100..=699 => Err(msg),
            _ => Ok(Reply::Absorbed),
        }
    }

    /// A response matched to this transaction (by the owner: Call-ID, branch, method).
    pub fn on_response(&mut self, ctx: &Context, msg: Message, out: &mut Outbox) -> Reply {
        let status = msg.status().unwrap_or(0);
        let actions = self.machine.on_message(ctx.instant(ctx.now), msg);
        let mut reply = Reply::Absorbed;
        for action in actions {
            match action {
                // The ACK of a non-2xx final, on the INVITE's branch (§17.1.1.3).
                TxAction::Send(bytes) => out.send(self.side, bytes, self.dest, SendKind::Plain),
                TxAction::ToTu(TuEvent::Response(m)) if status >= 200 => reply = Reply::Final(m),
                TxAction::ToTu(TuEvent::Response(m)) => reply = Reply::Provisional(m),
                TxAction::ToTu(_) => {}
            }
        }
        if !matches!(reply, Reply::Final(_)) {
            self.rearm(ctx, out);
        }
        reply
    }

    /// A provisional response to the INVITE matched (by the owner) and read by its status alone
    /// (a peek: the machine's [`ClientTx::on_response`] takes a fully parsed message, ~2k
    /// instructions for a 100 Trying, callgrind): the machine goes to Proceeding as it would for
    /// the parsed response (§17.1.1.2: no more retransmissions, no Timer B) through
    /// [`ClientInvite::on_provisional_read`]. False, nothing done, when the machine would not
    /// pass a provisional up (not an INVITE, or past Proceeding).
    pub fn on_provisional_read(&mut self, ctx: &Context, out: &mut Outbox) -> bool {
        let Transaction::ClientInvite(machine) = &mut *self.machine else { return false };
        if !machine.on_provisional_read() {
            return false;
        }
        self.rearm(ctx, out);
        true
    }

    /// An entry of this transaction in the timer heap fell due: runs the machine's timer if it
    /// is due (retransmitting as it says). True when the transaction timed out (Timer B or F;
    /// the owner drops it and acts as on a 408, RFC 3261 §8.1.3.1).
    pub fn on_timer(&mut self, ctx: &Context, out: &mut Outbox) -> bool {
        let now = ctx.instant(ctx.now);
        let Some((at, kind)) = self.machine.next_deadline() else { return false };
        if at > now {
            return false; // a stale entry; the one for `at` is still in the heap
        }
        self.armed_us = None;
        let mut timed_out = false;
        for action in self.machine.on_timer(now, kind) {
            match action {
                TxAction::Send(bytes) => out.send(self.side, bytes, self.dest, SendKind::Retransmission),
                TxAction::ToTu(TuEvent::Timeout) => timed_out = true,
                TxAction::ToTu(_) => {}
            }
        }
        if !timed_out {
            self.rearm(ctx, out);
        }
        timed_out
    }

    /// Arms a heap entry for the machine's next deadline unless one is armed for it already.
    fn rearm(&mut self, ctx: &Context, out: &mut Outbox) {
        let next = self.machine.next_deadline().map(|(at, _)| ctx.micros(at));
        if next != self.armed_us {
            if let Some(at_us) = next {
                out.arm(at_us, Timer { kind: self.timer.kind, slot: self.timer.slot, generation: self.id });
            }
            self.armed_us = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::output::Output;
    use crate::agent::timers::{T1_US, T2_US, TIMEOUT_US};
    use crate::agent::users::User;
    use crate::agent::wire::{Local, Request};
    use rand::SeedableRng;

    fn ctx(reliable: bool) -> Context {
        let local = Local::new("UDP", "127.0.0.1:5070".into(), "", "d".into());
        let users = vec![User { name: "alice".into(), password: None }];
        let proxy = "127.0.0.1:5060".parse().unwrap();
        Context::new(local.clone(), local, proxy, reliable, users, rand::rngs::SmallRng::seed_from_u64(1), 7)
    }

    fn start(ctx: &mut Context, method: &'static str, out: &mut Outbox) -> ClientTx {
        let (id, branch) = ctx.new_tx();
        let (bytes, ack) = ctx.caller_local.invite(&Request {
            method,
            uri: "sip:bob@d",
            branch: &branch,
            from: "<sip:alice@d>;tag=1",
            to: "<sip:bob@d>",
            call_id: "c1",
            cseq: 1,
            routes: &[],
            contact_user: None,
            auth: None,
            extra: "",
            body: None,
        });
        let timer = TimerSlot { kind: TimerKind::CallerTransaction, slot: 3 };
        let owner = Owner::Call { slot: 3, generation: 0 };
        let dest = ctx.proxy;
        let ack = (method == "INVITE").then_some(ack);
        ClientTx::start(ctx, Side::Caller, owner, timer, NewRequest { id, method, branch, bytes, dest, ack }, out)
    }

    /// Runs the transaction's timers at every armed deadline until it times out; returns the
    /// times (ms) of every send and of the timeout.
    fn run(ctx: &mut Context, tx: &mut ClientTx, out: &mut Outbox) -> (Vec<u64>, u64) {
        let mut sends = Vec::new();
        let mut pending = Vec::new();
        loop {
            let mut drained = Vec::new();
            out.swap_into(&mut drained);
            for o in drained {
                match o {
                    Output::Send { .. } => sends.push(ctx.now / 1000),
                    Output::Arm { at_us, .. } => pending.push(at_us),
                    other => panic!("unexpected {other:?}"),
                }
            }
            pending.sort();
            let Some(at) = (!pending.is_empty()).then(|| pending.remove(0)) else { panic!("no timer") };
            ctx.now = at;
            if tx.on_timer(ctx, out) {
                return (sends, at / 1000);
            }
        }
    }

    #[test]
    fn invite_retransmits_on_timer_a_and_times_out_on_b() {
        let mut c = ctx(false);
        let mut out = Outbox::default();
        let mut tx = start(&mut c, "INVITE", &mut out);
        let (sends, timeout) = run(&mut c, &mut tx, &mut out);
        // RFC 3261 §17.1.1.2: doubling without cap until 64·T1.
        assert_eq!(sends, [0, 500, 1500, 3500, 7500, 15500, 31500]);
        assert_eq!(timeout, TIMEOUT_US / 1000);
    }

    #[test]
    fn non_invite_retransmits_capped_at_t2_and_not_at_all_over_streams() {
        let mut c = ctx(false);
        let mut out = Outbox::default();
        let mut tx = start(&mut c, "BYE", &mut out);
        let (sends, timeout) = run(&mut c, &mut tx, &mut out);
        assert_eq!(&sends[..7], [0, 500, 1500, 3500, 7500, 11500, 15500]);
        assert!(sends.windows(2).skip(4).all(|w| (w[1] - w[0]) * 1000 == T2_US), "{sends:?}");
        assert_eq!(timeout, TIMEOUT_US / 1000);

        let mut c = ctx(true);
        let mut tx = start(&mut c, "BYE", &mut out);
        let (sends, timeout) = run(&mut c, &mut tx, &mut out);
        assert_eq!(sends, [0]);
        assert_eq!(timeout, TIMEOUT_US / 1000);
        assert_eq!(T1_US, c.timers.t1.as_micros() as u64, "the loop's T1 is the machine's");
    }

    #[test]
    fn a_provisional_stops_invite_retransmissions_and_a_final_is_handed_up_once() {
        let mut c = ctx(false);
        let mut out = Outbox::default();
        let mut tx = start(&mut c, "INVITE", &mut out);
        let branch = tx.branch.clone();
        let response = |status: &str| {
            let text = format!(
                "SIP/2.0 {status}\r\nVia: SIP/2.0/UDP 127.0.0.1:5070;branch={branch}\r\nFrom: <sip:alice@d>;tag=1\r\n\
                 To: <sip:bob@d>;tag=2\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
            );
            Message::parse(Bytes::from(text), &herald_sip::Limits::default()).unwrap()
        };
        c.now = 100_000;
        let ringing = response("180 Ringing");
        let ringing = tx.settled(ringing).expect_err("the first provisional is the machine's");
        assert!(matches!(tx.on_response(&c, ringing, &mut out), Reply::Provisional(_)));
        assert!(tx.is_proceeding());
        // From now on the status decides: later provisionals and a 2xx need no machine, a 486
        // still does (the machine ACKs it); a status of no class is absorbed.
        assert!(matches!(tx.settled(response("183 Session Progress")), Ok(Reply::Provisional(_))));
        assert!(matches!(tx.settled(response("200 OK")), Ok(Reply::Final(_))));
        assert!(tx.settled(response("486 Busy Here")).is_err());
        // Timer A's entry is stale now: it sends nothing.
        c.now = T1_US;
        let mut drained = Vec::new();
        out.swap_into(&mut drained);
        assert!(!tx.on_timer(&c, &mut out));
        assert!(out.is_empty());
        // A 486 is ACKed on the INVITE's branch (§17.1.1.3) and handed up as the final.
        let busy = response("486 Busy Here");
        assert!(matches!(tx.on_response(&c, busy, &mut out), Reply::Final(_)));
        let [Output::Send { bytes, kind: SendKind::Plain, .. }] = out.items() else { panic!("{:?}", out.items()) };
        let ack = Message::parse(bytes.clone(), &herald_sip::Limits::default()).unwrap();
        assert_eq!(ack.method().unwrap().as_str(), "ACK");
        assert_eq!(ack.top_via().unwrap().branch(), Some(tx.branch.as_str()));
    }
}
