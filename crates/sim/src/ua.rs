//! A simulated user agent (RFC 3261 §8, §12-§15) over UDP, or over a stream flow (WebSocket,
//! RFC 7118: its Via and Contact name a `.invalid` host; with [`Ua::set_outbound`] it registers
//! an RFC 5626 flow with `+sip.instance` and `reg-id`): as a client it registers (answering
//! digest challenges, RFC 7616 with MD5), calls, acknowledges every 2xx, cancels and hangs up;
//! as a server it answers by a script and retransmits its 2xx until the ACK (§13.3.1.4). Its
//! transactions are herald-core's own ([`TransactionTable`]), so request retransmissions,
//! Timers B and F (a timeout counts as 408, §8.1.3.1) and absorbing retransmitted requests are
//! the same code herald runs.

use bytes::Bytes;
use herald_core::auth::Algorithm;
use herald_core::transaction::{BranchGen, TransactionTable, TuEvent, TxAction, TxId};
use herald_core::{Peer, Seed, Transport};
use herald_credentials::Answer as DigestAnswer;
use herald_sip::uri::{Host, Uri};
use herald_sip::{HeaderName, Limits, Message, Method, ResponseBuilder};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What a UA does with an INVITE it receives (times from its arrival).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 180 after `ring` (if any), then the final `status` after `after` (if any).
    Script { ring: Option<Duration>, after: Option<(Duration, u16)> },
    /// Nothing at all, to any request (a phone that is gone).
    Silent,
}

impl Answer {
    /// Rings at once, answers 200 after `after`.
    pub fn pick_up(after: Duration) -> Answer {
        Answer::Script { ring: Some(Duration::ZERO), after: Some((after, 200)) }
    }

    /// Rings and never answers.
    pub fn ring_forever() -> Answer {
        Answer::Script { ring: Some(Duration::ZERO), after: None }
    }
}

/// The final answer to a request this UA sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub call_id: String,
    pub method: String,
    pub status: u16,
    /// Time since the start of the simulation.
    pub at: Duration,
}

/// A message this UA received.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Duration,
    pub from: SocketAddr,
    pub msg: Message,
}

impl Received {
    /// `INVITE`, `ACK`... for requests; the CSeq method for responses.
    pub fn method(&self) -> String {
        match self.msg.method() {
            Some(m) => m.as_str().to_owned(),
            None => self.msg.cseq().map(|c| c.method.as_str().to_owned()).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone)]
enum Timer {
    /// A scripted response to the INVITE of server transaction `tx`.
    Respond { tx: TxId, status: u16 },
    /// §13.3.1.4: the 2xx of `call_id` again, until its ACK; the interval doubles up to T2.
    Resend2xx { call_id: String, interval: Duration, give_up: Instant },
}

/// One call (dialog) or registration, by Call-ID.
#[derive(Debug, Default)]
struct Call {
    local_tag: String,
    cseq: u32,
    /// The last request sent out of dialog (INVITE or REGISTER): resent with credentials, and
    /// the source of the CANCEL.
    request: Option<Message>,
    challenged: bool,
    /// Established by a 2xx: the To header with the remote tag, remote target, route set.
    remote_to: Option<String>,
    remote_target: Option<String>,
    route_set: Vec<String>,
    /// UAS side: the 2xx sent, its ACK seen, the INVITE's server transaction.
    ok: Option<(Bytes, SocketAddr)>,
    acked: bool,
    invite_tx: Option<TxId>,
}

pub struct Ua {
    pub name: String,
    pub user: String,
    pub domain: String,
    pub addr: SocketAddr,
    /// Where requests outside a dialog go (herald).
    pub proxy: SocketAddr,
    pub answer: Answer,
    /// UDP, or the transport of its flow to herald (the simulator carries it as datagrams;
    /// [`crate::Sim::connect`] opens the flow on herald's side).
    pub transport: Transport,
    /// RFC 5626: `+sip.instance` URN and `reg-id` of the flow it registers.
    outbound: Option<(String, u32)>,
    password: Option<String>,
    start: Instant,
    txs: TransactionTable,
    branches: BranchGen,
    /// Client transaction → (Call-ID, method).
    clients: BTreeMap<TxId, (String, String)>,
    /// Server transaction → the request it answers (a server transaction keeps no copy).
    servers: BTreeMap<TxId, Message>,
    calls: BTreeMap<String, Call>,
    timers: BTreeMap<(Instant, u64), Timer>,
    seq: u64,
    next_call: u64,
    nc: u32,
    received: Vec<Received>,
    outcomes: Vec<Outcome>,
}

/// Datagrams a UA wants sent: (to, bytes).
pub type Sends = Vec<(SocketAddr, Bytes)>;

impl Ua {
    /// A UA named (and, until [`Ua::set_user`], registering as) `name` at `addr`. Its branches
    /// and transaction keys come from `seed` and its address: every run with the seed is the
    /// same, and no two UAs of a run share a branch.
    pub fn new(name: &str, domain: &str, addr: SocketAddr, proxy: SocketAddr, start: Instant, seed: u64) -> Ua {
        // Keyed by the whole address: two UAs on one port of different hosts differ too.
        let own = Seed::fixed(seed).derive(&format!("ua {addr}"), 0);
        Ua {
            name: name.to_owned(),
            user: name.to_owned(),
            domain: domain.to_owned(),
            addr,
            proxy,
            answer: Answer::pick_up(Duration::from_millis(500)),
            transport: Transport::Udp,
            outbound: None,
            password: None,
            start,
            txs: TransactionTable::seeded(Default::default(), own.derive("transactions", 0)),
            branches: BranchGen::new(own, addr.port()),
            clients: BTreeMap::new(),
            servers: BTreeMap::new(),
            calls: BTreeMap::new(),
            timers: BTreeMap::new(),
            seq: 0,
            next_call: 0,
            nc: 0,
            received: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    /// The user part of its AoR, when it differs from its name (two phones of one user).
    pub fn set_user(&mut self, user: &str) -> &mut Ua {
        self.user = user.to_owned();
        self
    }

    /// Answers digest challenges with this password.
    pub fn set_password(&mut self, password: &str) -> &mut Ua {
        self.password = Some(password.to_owned());
        self
    }

    /// Speaks over a stream flow of `transport` (set by [`crate::Sim::connect`]): reliable, so
    /// its transactions do not retransmit; a WebSocket UA's Via and Contact name a `.invalid`
    /// host (RFC 7118 §5).
    pub fn set_transport(&mut self, transport: Transport) -> &mut Ua {
        self.transport = transport;
        self
    }

    /// Registers as flow `reg_id` of instance `instance` (a URN) with `Supported: outbound`,
    /// and puts `ob` in its Contact (RFC 5626 §4.2, §4.3).
    pub fn set_outbound(&mut self, instance: &str, reg_id: u32) -> &mut Ua {
        self.outbound = Some((instance.to_owned(), reg_id));
        self
    }

    /// How it answers the INVITEs it receives.
    pub fn set_answer(&mut self, answer: Answer) -> &mut Ua {
        self.answer = answer;
        self
    }

    pub fn received(&self) -> &[Received] {
        &self.received
    }

    /// Status codes received in responses to `method`, in order (retransmissions included).
    pub fn statuses(&self, method: &str) -> Vec<u16> {
        self.received
            .iter()
            .filter(|r| r.msg.status().is_some() && r.method() == method)
            .filter_map(|r| r.msg.status())
            .collect()
    }

    /// Requests of `method` received (retransmissions included).
    pub fn requests(&self, method: &str) -> Vec<&Received> {
        self.received.iter().filter(|r| r.msg.is_request() && r.method() == method).collect()
    }

    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// The final answer to the last `method` sent in `call_id`.
    pub fn outcome(&self, call_id: &str, method: &str) -> Option<&Outcome> {
        self.outcomes.iter().rev().find(|o| o.call_id == call_id && o.method == method)
    }

    /// Whether the 2xx this UA sent in `call_id` was acknowledged.
    pub fn acked(&self, call_id: &str) -> bool {
        self.calls.get(call_id).is_some_and(|c| c.acked)
    }

    pub fn next_timeout(&self) -> Option<Instant> {
        let own = self.timers.keys().next().map(|(at, _)| *at);
        [own, self.txs.next_timeout()].into_iter().flatten().min()
    }

    fn new_call_id(&mut self) -> String {
        self.next_call += 1;
        format!("{}-{}@{}", self.name, self.next_call, self.addr.ip())
    }

    fn aor(&self) -> String {
        format!("sip:{}@{}", self.user, self.domain)
    }

    fn contact(&self) -> String {
        let ob = if self.outbound.is_some() { ";ob" } else { "" };
        match self.transport {
            Transport::Ws | Transport::Wss => {
                format!("<sip:{}@{}.invalid;transport={}{ob}>", self.user, self.name, self.transport.as_param())
            }
            Transport::Udp => format!("<sip:{}@{}{ob}>", self.user, self.addr),
            t => format!("<sip:{}@{};transport={}{ob}>", self.user, self.addr, t.as_param()),
        }
    }

    /// The sent-by of its Vias: a `.invalid` name over WebSocket (RFC 7118 §5), else its address.
    fn sent_by(&self) -> String {
        match self.transport {
            Transport::Ws | Transport::Wss => format!("{}.invalid", self.name),
            _ => self.addr.to_string(),
        }
    }

    /// A peer over this UA's transport (its transactions are reliable over a stream).
    fn peer(&self, addr: SocketAddr) -> Peer {
        Peer { transport: self.transport, addr, conn: None }
    }

    fn schedule(&mut self, at: Instant, timer: Timer) {
        self.seq += 1;
        self.timers.insert((at, self.seq), timer);
    }

    /// REGISTER this UA's contact for `expires` seconds; returns the Call-ID.
    pub fn register(&mut self, now: Instant, expires: u32) -> (String, Sends) {
        let call_id = self.new_call_id();
        let aor = self.aor();
        let flow = match &self.outbound {
            Some((instance, reg_id)) => {
                format!(";+sip.instance=\"<{instance}>\";reg-id={reg_id}\r\nSupported: outbound, path")
            }
            None => String::new(),
        };
        let head = format!(
            "REGISTER sip:{} SIP/2.0\r\nTo: <{aor}>\r\nContact: {};expires={expires}{flow}\r\n",
            self.domain,
            self.contact()
        );
        let sends = self.start_request(now, &call_id, head, "REGISTER", None);
        (call_id, sends)
    }

    /// INVITE `to_user` of the domain through herald; returns the Call-ID.
    pub fn invite(&mut self, now: Instant, to_user: &str) -> (String, Sends) {
        let call_id = self.new_call_id();
        let head = format!(
            "INVITE sip:{to_user}@{d} SIP/2.0\r\nTo: <sip:{to_user}@{d}>\r\nContact: {}\r\n",
            self.contact(),
            d = self.domain
        );
        let sends = self.start_request(now, &call_id, head, "INVITE", None);
        (call_id, sends)
    }

    /// A MESSAGE (RFC 3428) to `to_user` of the domain: a non-INVITE request through herald.
    pub fn message(&mut self, now: Instant, to_user: &str) -> (String, Sends) {
        let call_id = self.new_call_id();
        let head = format!("MESSAGE sip:{to_user}@{d} SIP/2.0\r\nTo: <sip:{to_user}@{d}>\r\n", d = self.domain);
        let sends = self.start_request(now, &call_id, head, "MESSAGE", None);
        (call_id, sends)
    }

    /// A request outside a dialog: `head` is its request line, To and Contact; the rest is
    /// added here (Via with a fresh branch, From with the call's tag, CSeq, credentials).
    fn start_request(
        &mut self,
        now: Instant,
        call_id: &str,
        head: String,
        method: &str,
        auth: Option<String>,
    ) -> Sends {
        let branch = self.branches.next_branch();
        let (aor, name, via) = (self.aor(), self.name.clone(), format!("{} {}", self.transport, self.sent_by()));
        let call = self.calls.entry(call_id.to_owned()).or_default();
        if call.local_tag.is_empty() {
            call.local_tag = format!("{name}-tag");
        }
        call.cseq += 1;
        let text = format!(
            "{head}Via: SIP/2.0/{via};branch={branch};rport\r\nMax-Forwards: 70\r\nFrom: <{aor}>;tag={}\r\nCall-ID: {call_id}\r\nCSeq: {} {method}\r\n{}Content-Length: 0\r\n\r\n",
            call.local_tag,
            call.cseq,
            auth.unwrap_or_default()
        );
        let msg = parse(text.into_bytes().into());
        call.request = Some(msg.clone());
        let to = self.proxy;
        self.send_in_tx(now, call_id, method, msg, to)
    }

    fn send_in_tx(&mut self, now: Instant, call_id: &str, method: &str, msg: Message, to: SocketAddr) -> Sends {
        let peer = self.peer(to);
        match self.txs.insert_client(now, msg, peer) {
            Ok((id, actions)) => {
                self.clients.insert(id, (call_id.to_owned(), method.to_owned()));
                let mut sends = Sends::new();
                for a in actions {
                    self.on_action(now, id, a, &mut sends);
                }
                sends
            }
            Err(_) => Vec::new(),
        }
    }

    /// CANCEL the INVITE of `call_id` (§9.1: its Request-URI, Call-ID, From, To, CSeq number
    /// and top Via).
    pub fn cancel(&mut self, now: Instant, call_id: &str) -> Sends {
        let Some(invite) = self.calls.get(call_id).and_then(|c| c.request.clone()) else { return Vec::new() };
        let b = invite.as_bytes();
        let line = |name| invite.field(name).map(|h| String::from_utf8_lossy(&b[h.line.range()]).into_owned());
        let uri = String::from_utf8_lossy(invite.request_uri_bytes().unwrap_or_default()).into_owned();
        let seq = invite.cseq().map(|c| c.seq).unwrap_or(1);
        let text = format!(
            "CANCEL {uri} SIP/2.0\r\n{}Max-Forwards: 70\r\n{}{}{}CSeq: {seq} CANCEL\r\nContent-Length: 0\r\n\r\n",
            line(HeaderName::Via).unwrap_or_default(),
            line(HeaderName::From).unwrap_or_default(),
            line(HeaderName::To).unwrap_or_default(),
            line(HeaderName::CallId).unwrap_or_default(),
        );
        let to = self.proxy;
        self.send_in_tx(now, call_id, "CANCEL", parse(text.into_bytes().into()), to)
    }

    /// BYE in the dialog of `call_id` (§15.1.1), along its route set.
    pub fn bye(&mut self, now: Instant, call_id: &str) -> Sends {
        let Some((text, to)) = self.in_dialog(call_id, "BYE", None) else { return Vec::new() };
        self.send_in_tx(now, call_id, "BYE", parse(text.into_bytes().into()), to)
    }

    /// A request inside the dialog (§12.2.1.1): Request-URI the remote target, Route the route
    /// set, sent to the first route (loose routing) or to the target. `cseq`: the ACK's number.
    fn in_dialog(&mut self, call_id: &str, method: &str, cseq: Option<u32>) -> Option<(String, SocketAddr)> {
        let branch = self.branches.next_branch();
        let (aor, via) = (self.aor(), format!("{} {}", self.transport, self.sent_by()));
        let call = self.calls.get_mut(call_id)?;
        let target = call.remote_target.clone()?;
        let seq = match cseq {
            Some(n) => n,
            None => {
                call.cseq += 1;
                call.cseq
            }
        };
        let routes: String = call.route_set.iter().map(|r| format!("Route: {r}\r\n")).collect();
        let next = call.route_set.first().map(|r| r.trim_matches(|c| c == '<' || c == '>')).unwrap_or(&target);
        let to = uri_addr(next)?;
        let text = format!(
            "{method} {target} SIP/2.0\r\nVia: SIP/2.0/{via};branch={branch};rport\r\n{routes}Max-Forwards: 70\r\nFrom: <{aor}>;tag={}\r\n{}\r\nCall-ID: {call_id}\r\nCSeq: {seq} {method}\r\nContent-Length: 0\r\n\r\n",
            call.local_tag,
            call.remote_to.clone()?,
        );
        Some((text, to))
    }

    /// A datagram for this UA.
    pub fn receive(&mut self, now: Instant, from: SocketAddr, bytes: Bytes) -> Sends {
        let Ok(msg) = Message::parse(bytes, &Limits::default()) else { return Vec::new() };
        self.received.push(Received { at: now - self.start, from, msg: msg.clone() });
        if self.answer == Answer::Silent {
            return Vec::new();
        }
        let mut sends = Sends::new();
        if msg.is_request() {
            self.on_request(now, from, msg, &mut sends);
        } else if let Some(id) = self.txs.find_client(&msg) {
            let actions = self.txs.on_message(now, id, msg);
            for a in actions {
                self.on_action(now, id, a, &mut sends);
            }
        } else if msg.status().is_some_and(|s| (200..300).contains(&s)) {
            // A 2xx retransmission after the transaction ended: acknowledge it again (§13.2.2.4).
            self.on_2xx(&msg, &mut sends);
        }
        sends
    }

    /// Runs the UA's timers due at `now`.
    pub fn timeouts(&mut self, now: Instant) -> Sends {
        let mut sends = Sends::new();
        for (id, a) in self.txs.handle_timeouts(now) {
            self.on_action(now, id, a, &mut sends);
        }
        while let Some((&key, _)) = self.timers.iter().next().filter(|((at, _), _)| *at <= now) {
            let timer = self.timers.remove(&key).expect("key just seen");
            self.on_timer(now, timer, &mut sends);
        }
        sends
    }

    fn on_action(&mut self, now: Instant, id: TxId, action: TxAction, sends: &mut Sends) {
        match action {
            TxAction::Send(bytes) => {
                if let Some(p) = self.txs.peer(id) {
                    sends.push((p.addr, bytes));
                }
            }
            TxAction::ToTu(TuEvent::Response(resp)) => self.on_response(now, id, resp, sends),
            TxAction::ToTu(TuEvent::Timeout) => self.finish(now, id, 408),
            TxAction::ToTu(TuEvent::TransportError) => self.finish(now, id, 503),
            TxAction::ToTu(_) => {}
        }
    }

    fn finish(&mut self, now: Instant, id: TxId, status: u16) {
        if let Some((call_id, method)) = self.clients.get(&id).cloned() {
            self.outcomes.push(Outcome { call_id, method, status, at: now - self.start });
        }
    }

    fn on_response(&mut self, now: Instant, id: TxId, resp: Message, sends: &mut Sends) {
        let Some(status) = resp.status() else { return };
        let Some((call_id, method)) = self.clients.get(&id).cloned() else { return };
        if status < 200 {
            return;
        }
        if (status == 401 || status == 407) && method != "CANCEL" {
            if let Some(s) = self.retry_with_credentials(now, &call_id, &method, &resp, status) {
                sends.extend(s);
                return;
            }
        }
        self.finish(now, id, status);
        if method == "INVITE" && (200..300).contains(&status) {
            self.on_2xx(&resp, sends);
        }
    }

    /// A 2xx to our INVITE: the dialog is set up from it (§12.1.2) and acknowledged (§13.2.2.4).
    fn on_2xx(&mut self, resp: &Message, sends: &mut Sends) {
        let Ok(call_id) = resp.call_id() else { return };
        let call_id = call_id.to_owned();
        let Some(call) = self.calls.get_mut(&call_id) else { return };
        if call.remote_target.is_none() {
            let b = resp.as_bytes();
            call.remote_to =
                resp.field(HeaderName::To).map(|h| String::from_utf8_lossy(&b[h.line.range()]).trim_end().to_owned());
            call.remote_target = resp.contacts().next().and_then(|c| match c.ok()? {
                herald_sip::headers::Contact::Address(a) => Some(a.uri.as_str().to_owned()),
                herald_sip::headers::Contact::Star => None,
            });
            // The UAC's route set is the Record-Route in reverse order.
            let mut rr: Vec<String> =
                resp.record_routes().filter_map(|r| r.ok()).map(|r| format!("<{}>", r.uri.as_str())).collect();
            rr.reverse();
            call.route_set = rr;
        }
        let seq = resp.cseq().map(|c| c.seq).unwrap_or(1);
        if let Some((text, to)) = self.in_dialog(&call_id, "ACK", Some(seq)) {
            sends.push((to, Bytes::from(text)));
        }
    }

    fn retry_with_credentials(
        &mut self,
        now: Instant,
        call_id: &str,
        method: &str,
        resp: &Message,
        status: u16,
    ) -> Option<Sends> {
        let password = self.password.clone()?;
        let call = self.calls.get_mut(call_id)?;
        if call.challenged {
            return None;
        }
        call.challenged = true;
        let request = call.request.clone()?;
        let (want, answer) = if status == 401 {
            (HeaderName::WwwAuthenticate, "Authorization")
        } else {
            (HeaderName::ProxyAuthenticate, "Proxy-Authorization")
        };
        // MD5 (herald offers it last, and accepts it): the simplest digest to compute here.
        let challenge = resp
            .auth_values(want)
            .filter_map(|v| v.ok())
            .find(|v| v.param("algorithm").is_none_or(|a| a.eq_ignore_ascii_case("MD5")))?;
        let realm = challenge.param("realm")?.into_owned();
        let nonce = challenge.param("nonce")?.into_owned();
        let uri = String::from_utf8_lossy(request.request_uri_bytes()?).into_owned();
        self.nc += 1;
        let value = digest(&self.user, &password, &realm, method, &uri, &nonce, self.nc);
        // The same request again with the credentials: request line, To and Contact kept.
        let b = request.as_bytes();
        let line_end = b.iter().position(|c| *c == b'\n')? + 1;
        let mut head = String::from_utf8_lossy(&b[..line_end]).into_owned();
        for name in [HeaderName::To, HeaderName::Contact, HeaderName::Supported] {
            if let Some(h) = request.field(name) {
                head.push_str(&String::from_utf8_lossy(&b[h.line.range()]));
            }
        }
        Some(self.start_request(now, call_id, head, method, Some(format!("{answer}: {value}\r\n"))))
    }

    fn on_request(&mut self, now: Instant, from: SocketAddr, msg: Message, sends: &mut Sends) {
        if let Some(id) = self.txs.find_server(&msg) {
            // A retransmission (the transaction resends its last response), or the ACK of a
            // non-2xx final response, which the transaction absorbs.
            let actions = self.txs.on_message(now, id, msg);
            for a in actions {
                self.on_action(now, id, a, sends);
            }
            return;
        }
        let Some(method) = msg.method() else { return };
        let call_id = msg.call_id().unwrap_or("").to_owned();
        match method {
            Method::Ack => {
                // The ACK of our 2xx: a transaction of its own (§17.1.1.3); stop resending.
                if let Some(call) = self.calls.get_mut(&call_id) {
                    call.acked = true;
                }
            }
            Method::Cancel => {
                let target = self.txs.find_cancel_target(&msg);
                let status = if target.is_some() { 200 } else { 481 };
                self.respond_new(now, from, &msg, status, sends);
                if let Some(invite_tx) = target {
                    self.timers.retain(|_, t| !matches!(t, Timer::Respond { tx, .. } if *tx == invite_tx));
                    self.respond(now, invite_tx, 487, sends);
                }
            }
            Method::Invite => {
                let peer = self.peer(from);
                let Ok((id, actions)) = self.txs.insert_server(now, &msg, peer, true) else { return };
                self.servers.insert(id, msg.clone());
                for a in actions {
                    self.on_action(now, id, a, sends);
                }
                let name = self.name.clone();
                let call = self.calls.entry(call_id).or_default();
                call.local_tag = format!("{name}-tag");
                call.invite_tx = Some(id);
                if let Answer::Script { ring, after } = self.answer {
                    if let Some(d) = ring {
                        self.schedule(now + d, Timer::Respond { tx: id, status: 180 });
                    }
                    if let Some((d, status)) = after {
                        self.schedule(now + d, Timer::Respond { tx: id, status });
                    }
                }
            }
            _ => self.respond_new(now, from, &msg, 200, sends),
        }
    }

    /// Answers a request that has no transaction yet with one response.
    fn respond_new(&mut self, now: Instant, from: SocketAddr, msg: &Message, status: u16, sends: &mut Sends) {
        let peer = self.peer(from);
        if let Ok((id, actions)) = self.txs.insert_server(now, msg, peer, false) {
            self.servers.insert(id, msg.clone());
            for a in actions {
                self.on_action(now, id, a, sends);
            }
            self.respond(now, id, status, sends);
        }
    }

    /// Sends `status` through server transaction `id`: To tag, Contact, and for an INVITE its
    /// Record-Route copied (§12.1.1); a 2xx to an INVITE is then resent until its ACK.
    fn respond(&mut self, now: Instant, id: TxId, status: u16, sends: &mut Sends) {
        let Some(req) = self.servers.get(&id).cloned() else { return };
        let Some(peer) = self.txs.peer(id) else { return };
        let tag = format!("{}-tag", self.name);
        let contact = self.contact();
        let b = req.as_bytes();
        let rr: Vec<&[u8]> = req.fields(HeaderName::RecordRoute).map(|h| &b[h.value.range()]).collect();
        let invite = req.method() == Some(Method::Invite);
        let mut builder = ResponseBuilder::new(&req, status, reason(status)).to_tag(&tag);
        if invite && status < 300 {
            builder = builder.header("Contact", contact.as_bytes());
            for v in &rr {
                builder = builder.header("Record-Route", v);
            }
        }
        let bytes = builder.build().freeze();
        let actions = self.txs.on_tu_response(now, id, bytes.clone(), status);
        for a in actions {
            match a {
                // Over a stream the transaction may end with this response (Timer J is zero,
                // RFC 3261 §17.2.2): send to the peer read before.
                TxAction::Send(b) => sends.push((peer.addr, b)),
                a => self.on_action(now, id, a, sends),
            }
        }
        if invite && (200..300).contains(&status) {
            let call_id = req.call_id().unwrap_or("").to_owned();
            let t1 = self.txs.timers().t1;
            let give_up = now + self.txs.timers().t1x64();
            if let Some(call) = self.calls.get_mut(&call_id) {
                call.ok = Some((bytes, peer.addr));
            }
            self.schedule(now + t1, Timer::Resend2xx { call_id, interval: t1, give_up });
        }
    }

    fn on_timer(&mut self, now: Instant, timer: Timer, sends: &mut Sends) {
        match timer {
            Timer::Respond { tx, status } => self.respond(now, tx, status, sends),
            Timer::Resend2xx { call_id, interval, give_up } => {
                let Some(call) = self.calls.get(&call_id) else { return };
                if call.acked || now >= give_up {
                    return;
                }
                if let Some((bytes, to)) = call.ok.clone() {
                    sends.push((to, bytes));
                }
                let next = (interval * 2).min(self.txs.timers().t2);
                self.schedule(now + next, Timer::Resend2xx { call_id, interval: next, give_up });
            }
        }
    }
}

fn parse(bytes: Bytes) -> Message {
    Message::parse(bytes, &Limits::default()).expect("the simulated UA writes valid SIP")
}

fn reason(status: u16) -> &'static str {
    match status {
        180 => "Ringing",
        200 => "OK",
        404 => "Not Found",
        481 => "Call/Transaction Does Not Exist",
        486 => "Busy Here",
        487 => "Request Terminated",
        _ => "Whatever",
    }
}

/// The address of a SIP URI with an IP host (the simulation has no DNS for UAs).
fn uri_addr(uri: &str) -> Option<SocketAddr> {
    let Ok(Uri::Sip(u)) = Uri::parse(uri.as_bytes()) else { return None };
    let ip: IpAddr = match u.host {
        Host::Ipv4(v4) => v4.into(),
        Host::Ipv6(v6) => v6.into(),
        Host::Name(_) => return None,
    };
    Some(SocketAddr::new(ip, u.port.unwrap_or(5060)))
}

/// RFC 7616 §3.4.1 with qop=auth and MD5.
fn digest(user: &str, password: &str, realm: &str, method: &str, uri: &str, nonce: &str, nc: u32) -> String {
    let answer = DigestAnswer {
        algorithm: Algorithm::Md5,
        sess: false,
        user,
        realm,
        nonce,
        uri,
        nc: Some(nc),
        cnonce: "simcnonce",
        opaque: None,
    };
    answer.header_value(method, password)
}
