//! The UA as a client (RFC 3261 §8.1, §13.2): it registers, calls, sends MESSAGE, cancels
//! and hangs up, each request in a client transaction of herald-core's; final responses end its requests, a 2xx to its
//! INVITE sets up the dialog and is acknowledged (§12.1.2, §13.2.2.4), a challenge is answered
//! once with digest credentials (§22.2, RFC 7616).

use super::{Sends, Ua};
use bytes::Bytes;
use herald_core::auth::Algorithm;
use herald_core::transaction::TxId;
use herald_credentials::Answer as DigestAnswer;
use herald_sip::uri::{Host, Uri};
use herald_sip::{HeaderName, Limits, Message};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

impl Ua {
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

    pub(super) fn on_response(&mut self, now: Instant, id: TxId, resp: Message, sends: &mut Sends) {
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
    pub(super) fn on_2xx(&mut self, resp: &Message, sends: &mut Sends) {
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

    pub(super) fn retry_with_credentials(
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

fn parse(bytes: Bytes) -> Message {
    Message::parse(bytes, &Limits::default()).expect("the simulated UA writes valid SIP")
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
