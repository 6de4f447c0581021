//! The answering side (UAS, RFC 3261 §13.3, §15.1.2, §9.2): 180 at once, 200 after the ring
//! time with To-tag, Contact and the copied Record-Route (§12.1.1), 2xx retransmitted until the
//! ACK arrives (§13.3.1.4), 200 for BYE, 200 + 487 for CANCEL while ringing, and retransmitted
//! requests answered with the last response instead of starting anew (§17.2).
//!
//! [`Callee`] owns the dialogs; each entry point takes the run's [`Context`] and pushes what
//! should happen into an [`Outbox`].

use super::context::Context;
use super::held::Answer;
use super::output::{Measure, Outbox, SendKind, Side};
use super::slab::Slab;
use super::timers::{next_interval, Timer, TimerKind, T1_US, T2_US, TIMEOUT_US};
use super::users::User;
use super::wire::{echo_tagging, RING_HEADER};
use bytes::Bytes;
use herald_core::seed::{Seed, TableState};
use herald_sip::{HeaderName, Message};
use std::collections::HashMap;
use std::net::SocketAddr;

mod peeked;

/// Longest ring a caller may ask for in [`RING_HEADER`]: one hour.
const MAX_RING_MS: u64 = 3_600_000;
/// Dialogs held at once; an INVITE beyond this gets 503 (bounded memory under floods).
pub const MAX_DIALOGS: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogState {
    Ringing,
    /// 200 sent, waiting for the ACK.
    Answering,
    /// ACKed (or the ACK never came: §13.3.1.4 gives up after 64·T1); waiting for BYE.
    Confirmed,
    /// CANCELled: 487 sent, waiting for its ACK (Timer G/H of §17.2.1).
    Cancelled,
    /// BYE answered; kept a while to answer retransmitted BYEs.
    Ended,
}

pub struct Dialog {
    /// The Call-ID's bytes as the INVITE carried them.
    pub call_id: Vec<u8>,
    pub state: DialogState,
    pub user: usize,
    /// Lines the INVITE's responses copy (Via, From, Call-ID, CSeq, Record-Route).
    pub echo: String,
    /// The To line with our tag.
    pub to_line: String,
    /// Where the INVITE came from: responses go back there (the proxy's socket).
    pub peer: SocketAddr,
    /// The last response sent for the INVITE (or BYE), resent on retransmissions.
    pub last: Bytes,
    pub interval_us: u64,
    /// When the 200 is due: the INVITE's arrival (its kernel stamp) plus the ring time.
    pub answer_due_us: u64,
    /// The Call-ID's part of the keys of the held answers ([`super::held::Held::call_key`]).
    pub held_call: u64,
}

/// The callee side's dialogs, by `(slot, generation)` handle and by Call-ID.
///
/// Both maps are looked up for every request (three per call): they hash with herald-core's
/// keyed foldhash ([`TableState`], a random seed per run), a fraction of SipHash's cost on
/// these short keys, which the proxy's peers choose as they like.
pub struct Callee {
    dialogs: Slab<Dialog>,
    /// Dialogs by the keyed hash of their Call-ID ([`super::held::Held::call_key`], a random seed per run:
    /// no peer can choose collisions), each hit checked against the dialog's own Call-ID: the
    /// hash is worked out for the held answers anyway, and the Call-ID is neither hashed again
    /// nor copied into the table (~300 instructions a call, callgrind).
    ids: HashMap<u64, (u32, u32), TableState>,
    /// User name → index: the Request-URI of an INVITE is the Contact we registered.
    user_index: HashMap<String, usize, TableState>,
    /// Our registered contact URIs as written (`sip:user@host:port...`) → user index, filled at
    /// the first INVITE: a Request-URI that is one of them verbatim names its user without being
    /// parsed (~560 instructions a call, callgrind); any other is parsed as before.
    contacts: HashMap<Vec<u8>, usize, TableState>,
    /// How long to ring when the INVITE does not say ([`RING_HEADER`]).
    default_ring_us: u64,
}

impl Callee {
    pub fn new(users: &[User], default_ring_us: u64) -> Callee {
        let seed = Seed::random();
        let mut user_index = HashMap::with_capacity_and_hasher(users.len(), seed.derive("users", 0).table_state());
        user_index.extend(users.iter().enumerate().map(|(i, u)| (u.name.clone(), i)));
        Callee {
            dialogs: Slab::default(),
            ids: HashMap::with_hasher(seed.derive("dialogs", 0).table_state()),
            user_index,
            contacts: HashMap::with_hasher(seed.derive("contacts", 0).table_state()),
            default_ring_us,
        }
    }

    /// Room for `n` dialogs held at once (at most [`MAX_DIALOGS`]).
    pub fn reserve(&mut self, n: usize) {
        let n = n.min(MAX_DIALOGS);
        self.dialogs.reserve(n);
        self.ids.reserve(n);
    }

    /// Dialogs held (ended ones included until forgotten).
    pub fn len(&self) -> usize {
        self.dialogs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dialogs.is_empty()
    }

    pub fn on_request(&mut self, ctx: &mut Context, msg: &Message, from: SocketAddr, out: &mut Outbox) {
        // The Call-ID as written, unchecked against its grammar (~550 instructions a request)
        // and not even as UTF-8 (~120): here it is only a key, compared byte for byte as RFC
        // 3261 §20.8 compares Call-IDs, and the responses copy its line verbatim.
        let call_id = msg.get(HeaderName::CallId).filter(|id| !id.is_empty());
        let (Some(method), Some(call_id)) = (msg.method(), call_id) else {
            out.record(Measure::Stray);
            return;
        };
        let key = ctx.held.call_key(call_id);
        let handle = self.find(key, call_id);
        match (method.as_str(), handle) {
            ("INVITE", None) => self.on_new_invite(ctx, msg, call_id, key, from, out),
            ("INVITE", Some((slot, generation))) => {
                // A retransmission (§17.2.1): repeat the last response.
                if let Some(d) = self.dialogs.get_mut(slot, generation) {
                    out.send(Side::Callee, d.last.clone(), from, SendKind::Plain);
                }
            }
            ("ACK", _) => self.on_ack(handle, out),
            ("BYE", Some((slot, generation))) => {
                let ok = || ctx.callee_local.reply(msg, 200, "OK", "bench");
                self.on_bye(ctx, ok, from, slot, generation, out)
            }
            ("CANCEL", Some((slot, generation))) => self.on_cancel(ctx, msg, from, slot, generation, out),
            ("BYE" | "CANCEL", None) => reply(ctx, msg, from, 481, "Call/Transaction Does Not Exist", out),
            ("OPTIONS", _) => reply(ctx, msg, from, 200, "OK", out),
            _ => reply(ctx, msg, from, 501, "Not Implemented", out),
        }
    }

    /// The dialog of the Call-ID `call_id`, whose [`super::held::Held::call_key`] is `key`.
    fn find(&mut self, key: u64, call_id: &[u8]) -> Option<(u32, u32)> {
        let &(slot, generation) = self.ids.get(&key)?;
        let d = self.dialogs.get_mut(slot, generation)?;
        (d.call_id == call_id).then_some((slot, generation))
    }

    /// An ACK of the dialog `handle` (None: of no dialog; §13.3.1.4 for a 2xx; §17.2.1 Timer H
    /// for the 487 of a CANCEL).
    fn on_ack(&mut self, handle: Option<(u32, u32)>, out: &mut Outbox) {
        let Some((slot, generation)) = handle else {
            out.record(Measure::Stray);
            return;
        };
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        match d.state {
            DialogState::Answering => d.state = DialogState::Confirmed,
            DialogState::Cancelled => self.forget(slot, generation),
            _ => {}
        }
    }

    /// A new INVITE, of Call-ID `call_id` whose [`super::held::Held::call_key`] is `key`.
    fn on_new_invite(
        &mut self,
        ctx: &mut Context,
        msg: &Message,
        call_id: &[u8],
        key: u64,
        from: SocketAddr,
        out: &mut Outbox,
    ) {
        let Some(user) = self.user_of_target(ctx, msg) else {
            reply(ctx, msg, from, 404, "Not Found", out);
            return;
        };
        if self.dialogs.len() >= MAX_DIALOGS || !msg.to_tag().is_ok_and(|t| t.is_none()) {
            // Over the memory bound, or a re-INVITE this generator never sends.
            reply(ctx, msg, from, 503, "Service Unavailable", out);
            return;
        }
        // The ring header by name among the lines of no name herald knows (Message::get_by_name
        // compares every line's name, ~350 instructions an INVITE that mostly has none).
        let ring = msg
            .headers()
            .iter()
            .find(|h| h.name == HeaderName::Other && msg.name_of(h).eq_ignore_ascii_case(RING_HEADER.as_bytes()));
        let ring_us = self.ring_us(ring.map(|h| msg.value_of(h)));
        let tag = new_tag(ctx);
        // Checked above: the To has no tag.
        let (lines, to_line) = echo_tagging(msg, true, Some(&tag));
        let invite = NewInvite { call_id, key, user, ring_us, from };
        self.answer_invite(ctx, invite, lines, to_line, out);
    }

    /// How long to ring for an INVITE whose ring header has the value `value` (none: the
    /// default).
    fn ring_us(&self, value: Option<&[u8]>) -> u64 {
        value
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
            .map(|ms| ms.min(MAX_RING_MS) * 1000)
            .unwrap_or(self.default_ring_us)
    }

    /// Takes a new dialog for `invite`, whose responses copy `lines` and carry the To line
    /// `to_line` (our tag in it): 180 now, and the 200 after the ring time.
    fn answer_invite(
        &mut self,
        ctx: &Context,
        invite: NewInvite<'_>,
        lines: String,
        to_line: String,
        out: &mut Outbox,
    ) {
        let NewInvite { call_id, key, user, ring_us, from } = invite;
        let ringing = ctx.callee_local.response(180, "Ringing", &lines, &to_line, Some(&ctx.users[user].name));
        let dialog = Dialog {
            call_id: call_id.to_vec(),
            state: DialogState::Ringing,
            user,
            echo: lines,
            to_line,
            peer: from,
            last: ringing.clone(),
            interval_us: T1_US,
            // The ring starts when the INVITE arrived, not when the loop got to it.
            answer_due_us: ctx.rx_us + ring_us,
            held_call: key,
        };
        let (slot, generation) = self.dialogs.insert(dialog);
        self.ids.insert(key, (slot, generation));
        let key = ctx.held.answer_key(key, "INVITE", Answer::Provisional);
        out.send(Side::Callee, ringing, from, SendKind::Answer { key, due_us: ctx.rx_us });
        out.arm(ctx.rx_us + ring_us, Timer { kind: TimerKind::CalleeAnswer, slot, generation });
    }

    /// The user an INVITE calls: its Request-URI is the Contact we registered, whose user part
    /// names the user.
    fn user_of_target(&mut self, ctx: &Context, msg: &Message) -> Option<usize> {
        if let Some(user) = self.user_by_contact(ctx, msg.request_uri_bytes()) {
            return Some(user);
        }
        let uri = msg.request_uri().ok()?;
        uri.as_sip().and_then(|s| s.user).and_then(|name| self.user_index.get(name).copied())
    }

    /// The user whose registered contact is the Request-URI `uri` as written, if any (the
    /// contacts are written down at the first INVITE).
    fn user_by_contact(&mut self, ctx: &Context, uri: Option<&[u8]>) -> Option<usize> {
        if self.contacts.is_empty() {
            for (i, user) in ctx.users.iter().enumerate() {
                self.contacts.insert(ctx.callee_local.contact_uri(&user.name).into_bytes(), i);
            }
        }
        uri.and_then(|uri| self.contacts.get(uri)).copied()
    }

    /// A BYE of the dialog `(slot, generation)`, answered with the 200 `ok` writes (asked only
    /// when the dialog has not ended: a retransmitted BYE gets the same 200 again).
    fn on_bye(
        &mut self,
        ctx: &Context,
        ok: impl FnOnce() -> Bytes,
        from: SocketAddr,
        slot: u32,
        generation: u32,
        out: &mut Outbox,
    ) {
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        let mut kind = SendKind::Plain;
        if d.state != DialogState::Ended {
            d.last = ok();
            d.state = DialogState::Ended;
            if !ctx.reliable {
                // Absorb BYE retransmissions for 64·T1 (Timer J of §17.2.2).
                out.arm(ctx.now + TIMEOUT_US, Timer { kind: TimerKind::CalleeForget, slot, generation });
            }
            kind = SendKind::Answer { key: ctx.held.answer_key(d.held_call, "BYE", Answer::Final), due_us: ctx.rx_us };
        }
        out.send(Side::Callee, d.last.clone(), from, kind);
        if ctx.reliable {
            self.forget(slot, generation);
        }
    }

    fn on_cancel(
        &mut self,
        ctx: &Context,
        msg: &Message,
        from: SocketAddr,
        slot: u32,
        generation: u32,
        out: &mut Outbox,
    ) {
        let Some(d) = self.dialogs.get_mut(slot, generation) else {
            reply(ctx, msg, from, 200, "OK", out);
            return;
        };
        let ok = ctx.callee_local.reply(msg, 200, "OK", "bench");
        let key = ctx.held.answer_key(d.held_call, "CANCEL", Answer::Final);
        out.send(Side::Callee, ok, from, SendKind::Answer { key, due_us: ctx.rx_us });
        if d.state != DialogState::Ringing {
            return; // already answered: the CANCEL has no effect (§9.2)
        }
        d.state = DialogState::Cancelled;
        d.last = ctx.callee_local.response(487, "Request Terminated", &d.echo, &d.to_line, None);
        let key = ctx.held.answer_key(d.held_call, "INVITE", Answer::Final);
        out.send(Side::Callee, d.last.clone(), d.peer, SendKind::Answer { key, due_us: ctx.rx_us });
        arm_final_timers(ctx, slot, generation, out);
    }

    fn forget(&mut self, slot: u32, generation: u32) {
        if let Some(d) = self.dialogs.remove(slot, generation) {
            // Only its own entry: another Call-ID of the same hash (a 2^-64 chance) may have
            // taken the key since.
            if self.ids.get(&d.held_call) == Some(&(slot, generation)) {
                self.ids.remove(&d.held_call);
            }
        }
    }

    pub fn on_timer(&mut self, ctx: &Context, t: Timer, out: &mut Outbox) {
        let (slot, generation) = (t.slot, t.generation);
        let Some(d) = self.dialogs.get_mut(slot, generation) else { return };
        match (t.kind, d.state) {
            (TimerKind::CalleeAnswer, DialogState::Ringing) => {
                d.state = DialogState::Answering;
                let user = &ctx.users[d.user].name;
                d.last = ctx.callee_local.response(200, "OK", &d.echo, &d.to_line, Some(user));
                let key = ctx.held.answer_key(d.held_call, "INVITE", Answer::Final);
                out.send(Side::Callee, d.last.clone(), d.peer, SendKind::Answer { key, due_us: d.answer_due_us });
                arm_final_timers(ctx, slot, generation, out);
            }
            (TimerKind::CalleeRetransmit, DialogState::Answering | DialogState::Cancelled) => {
                d.interval_us = next_interval(d.interval_us, true, T2_US);
                out.send(Side::Callee, d.last.clone(), d.peer, SendKind::Retransmission);
                out.arm(ctx.now + d.interval_us, Timer { kind: TimerKind::CalleeRetransmit, slot, generation });
            }
            // §13.3.1.4: no ACK within 64·T1. The caller's BYE may still come (and a BYE
            // implies the 2xx arrived), so keep the dialog; a 487 without ACK is just dropped.
            (TimerKind::CalleeAckTimeout, DialogState::Answering) => d.state = DialogState::Confirmed,
            (TimerKind::CalleeAckTimeout, DialogState::Cancelled) | (TimerKind::CalleeForget, DialogState::Ended) => {
                self.forget(slot, generation)
            }
            _ => {}
        }
    }
}

/// A new INVITE our callee answers: its Call-ID, that Call-ID's
/// [`super::held::Held::call_key`], the user it calls, how long to ring, where it came from.
struct NewInvite<'a> {
    call_id: &'a [u8],
    key: u64,
    user: usize,
    ring_us: u64,
    from: SocketAddr,
}

/// Our callee's To tag for a new dialog.
fn new_tag(ctx: &mut Context) -> String {
    let mut tag = String::with_capacity(16);
    herald_sip::text::push_hex(&mut tag, rand::RngExt::random::<u64>(&mut ctx.rng), 0);
    tag
}

/// A stateless response (RFC 3261 §8.2.6) with a fresh To tag.
fn reply(ctx: &Context, msg: &Message, to: SocketAddr, status: u16, reason: &str, out: &mut Outbox) {
    out.send(Side::Callee, ctx.callee_local.reply(msg, status, reason, "bench"), to, SendKind::Plain);
}

/// Timer G (or the 2xx retransmission of §13.3.1.4) over UDP, and the 64·T1 bound.
fn arm_final_timers(ctx: &Context, slot: u32, generation: u32, out: &mut Outbox) {
    if !ctx.reliable {
        out.arm(ctx.now + T1_US, Timer { kind: TimerKind::CalleeRetransmit, slot, generation });
    }
    out.arm(ctx.now + TIMEOUT_US, Timer { kind: TimerKind::CalleeAckTimeout, slot, generation });
}
