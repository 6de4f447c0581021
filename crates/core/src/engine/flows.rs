//! herald as an Outbound edge proxy (RFC 5626 §5) and for WebSocket phones (RFC 7118 §5): the
//! flow tokens it puts into its Record-Route and Path values, and the requests those bring back,
//! which leave over the flow the token names. The tokens themselves are
//! [`crate::proxy::flow_token`]'s (signed: a forged one makes herald send nowhere).
//!
//! Keep-alive: on streams (TCP, TLS, WebSocket) the runtime answers RFC 5626 §4.4.1 CRLF pings
//! with a CRLF pong (and WebSocket has its own ping frames); on UDP flows the STUN Binding
//! requests of §4.4.2 are answered on herald's SIP port (§8, [`crate::inbound::stun`]), and CRLF
//! datagrams are dropped as keep-alives. A UDP flow that died is not seen as a transport error:
//! its branch times out (408).

use super::contact_facts::{reachable_host_and_transport, reachable_uri};
use super::context::{Planned, PlannedDest};
use super::decisions::Local;
use super::Engine;
use crate::nat::{message_behind_nat, EdgePath, RequestSender};
use crate::peer::Peer;
use crate::proxy::flow_token::{FlowToken, FLOW_PARAM};
use crate::proxy::route::Preprocessed;
use herald_sip::headers::{Contact, NameAddr};
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message};

/// RFC 5626 §5.3: the status of a branch over a flow token's flow that failed (the connection is
/// gone): 430 Flow Failed, so that the authoritative proxy that routed through herald tries
/// another flow of the instance.
const FLOW_FAILED: u16 = 430;

impl Engine {
    /// RFC 5626 §5.3: among the Route values of ours at the top (`pre.remove`), the first that
    /// carries a flow token naming a flow other than the one the request came on says where it
    /// goes. A token naming the arrival flow is the UA's own request leaving through its edge
    /// proxy: it is routed as usual. `None`: no such token; `Err`: a token herald did not mint.
    pub(super) fn flow_route(&self, pre: &Preprocessed<'_>, from: Peer) -> Option<Result<Planned, Local>> {
        // herald's own plain Record-Route texts carry no token: not parsed to find none.
        for route in pre.removed().filter(|r| !r.is_own_plain()) {
            let Some(token) = route.addr().and_then(|a| flow_param(&a.uri)) else { continue };
            let flow = match self.flows.read(token) {
                FlowToken::Valid(flow) => flow,
                // §5.3: "the proxy SHOULD send a 403 (Forbidden) response" for a tampered token.
                FlowToken::Forged => return Some(Err(Local::Reject(403, "Forbidden (Bad Flow Token)"))),
            };
            if same_flow(flow, from) {
                continue;
            }
            return Some(Ok(Planned {
                request_uri: pre.request_uri.clone(),
                dest: PlannedDest::Peer(flow),
                push_routes: Vec::new(),
                q: 1000,
                strict_route_tail: None,
                fallback: Vec::new(),
                lost_flow: Some(FLOW_FAILED),
                gateway: None,
                contact: None,
            }));
        }
        None
    }

    /// The flow tokens of the two Record-Route values of a dialog-creating request: (facing the
    /// next hop, facing the previous hop). Towards the next hop when the branch goes over a
    /// flow (a registered WebSocket or Outbound phone: its Contact may be `.invalid`); towards
    /// the previous hop when that is a UA that herald is the first hop of (one Via) and whose
    /// Contact cannot be reached by itself or asks for it with `ob`, in the Contact or in the
    /// Route to herald its outbound-proxy setting put first (RFC 5626 §4.3, §5.4; RFC 7118 §5).
    pub(super) fn record_route_flows(
        &self,
        sender: &RequestSender<'_>,
        from: Peer,
        to: Peer,
        over_flow: bool,
    ) -> (Option<String>, Option<String>) {
        let out = over_flow.then(|| self.flows.mint(to));
        let back = (sender.first_hop() && (contact_needs_flow(sender) || self.routed_with_ob(sender.message())))
            .then(|| self.flows.mint(from));
        (out, back)
    }

    /// The UA's top Route names herald with `ob` (its outbound proxy configured for Outbound,
    /// RFC 5626 §4.3).
    fn routed_with_ob(&self, req: &Message) -> bool {
        // The first value from the line the header index names, not `routes()`, which walks
        // every line before it (all of them in a request without Route: ~150 instructions per
        // INVITE, issue 21).
        let top = req.first_list_value(HeaderName::Route).and_then(Result::ok);
        top.and_then(|v| NameAddr::parse(v.bytes).ok()).is_some_and(|r| {
            self.cfg.identity.is_this_proxy(&r.uri) && r.uri.as_sip().is_some_and(|u| u.param("ob").is_some())
        })
    }

    /// The Path herald inserts into a REGISTER it forwards to another registrar, if any (RFC
    /// 3327 §4, RFC 5626 §5.1). With the flow token of the REGISTER's flow and `ob` when herald
    /// is the UA's first hop and the UA registers with Outbound (`Supported: outbound`,
    /// `+sip.instance` and `reg-id`) or with a Contact only its flow reaches; else as `[nat]
    /// edge_path` says (`crate::nat::EdgePath`): with the flow token when the UA is behind NAT
    /// (`crate::nat::message_behind_nat`: the registrar's requests must leave over the NAT's
    /// mapping), without one otherwise (they come back to herald, which routes them by their
    /// Request-URI: a third-party registration's contact is not where the REGISTER came from).
    pub(super) fn edge_path(&self, sender: &RequestSender<'_>, from: Peer) -> Option<EdgePathPlan> {
        let req = sender.message();
        let supports =
            |tag: &str| req.tokens(HeaderName::Supported).any(|t| t.is_ok_and(|t| t.eq_ignore_ascii_case(tag)));
        let outbound = supports("outbound")
            && req.contacts().filter_map(Result::ok).any(|c| match c {
                Contact::Address(a) => a.params.get("reg-id").is_some() && a.params.get("+sip.instance").is_some(),
                Contact::Star => false,
            });
        if sender.first_hop() && (outbound || contact_needs_flow(sender)) {
            return Some(EdgePathPlan { token: Some(self.flows.mint(from)), ob: true, require: false });
        }
        let configured = match self.cfg.nat.edge_path {
            EdgePath::Off => false,
            EdgePath::Supported => supports("path"),
            EdgePath::Always => true,
        };
        if !configured {
            return None;
        }
        let natted = sender.first_hop() && message_behind_nat(req, from.addr, self.cfg.nat.detect);
        Some(EdgePathPlan { token: natted.then(|| self.flows.mint(from)), ob: false, require: !supports("path") })
    }
}

/// The Path value herald adds to a forwarded REGISTER ([`Engine::edge_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EdgePathPlan {
    /// The flow token naming the REGISTER's flow, when the registrar's requests must leave over
    /// it.
    pub token: Option<String>,
    /// `;ob`: herald supports Outbound as the UA's first hop (RFC 5626 §6).
    pub ob: bool,
    /// Add `Require: path`: the UA did not list `path` in Supported (RFC 3327 §5.1).
    pub require: bool,
}

/// The flow token a URI of ours carries.
fn flow_param<'a>(uri: &Uri<'a>) -> Option<&'a str> {
    let u = uri.as_sip()?;
    // Nearly every Route of ours has no token (a plain `;lr`): without the two octets of its
    // name anywhere, and no escape that could spell them, there is none to look up (the
    // lookup walked the parameters through the escape decoder, ~250 instructions a Route).
    let raw = u.params_raw().as_bytes();
    let may_hold =
        raw.contains(&b'%') || raw.windows(FLOW_PARAM.len()).any(|w| w.eq_ignore_ascii_case(FLOW_PARAM.as_bytes()));
    if !may_hold {
        return None;
    }
    u.param(FLOW_PARAM).flatten()
}

/// One flow: a connection is its id; a UDP flow its transport and address.
fn same_flow(a: Peer, b: Peer) -> bool {
    match (a.conn, b.conn) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The first Contact cannot be reached by itself (RFC 7118 §5) or carries `ob` (RFC 5626 §4.3:
/// the UA asks its edge proxy to keep the dialog on this flow).
fn contact_needs_flow(sender: &RequestSender<'_>) -> bool {
    // Most Contacts cannot need a flow, and their text shows it: then nothing is parsed (the
    // Contact parse was about 800 instructions per dialog-creating request). The first Contact
    // line's whole text is asked first: its first value, split out of that line, holds no pair
    // of octets the line does not ([`may_need_flow`]), and the split cost ~260 instructions.
    let Some(line) = sender.message().get(HeaderName::Contact) else { return false };
    if !may_need_flow(line) {
        return false;
    }
    let Some(raw) = sender.raw_contact() else { return false };
    if !may_need_flow(raw.bytes) {
        return false;
    }
    sender.contact().is_some_and(|(_, a)| match a.uri.as_sip() {
        // One pass over the parameters for `transport` and `ob` when no name is escaped (the
        // two lookups cost about 700 instructions per dialog-creating request).
        Some(u) if !u.params_raw().contains('%') => {
            let (mut transport, mut ob) = (None, false);
            for (name, value) in u.params() {
                if transport.is_none() && name.eq_ignore_ascii_case("transport") {
                    transport = Some(value);
                } else if name.eq_ignore_ascii_case("ob") {
                    ob = true;
                }
            }
            ob || !reachable_host_and_transport(u, transport.flatten())
        }
        _ => !reachable_uri(&a.uri) || a.uri.as_sip().is_some_and(|u| u.param("ob").is_some()),
    })
}

/// Whether a Contact value's text may say that the contact needs its flow
/// ([`contact_needs_flow`]): an escape (a parameter name may hide behind one), or the octets
/// `ws` (a `transport=ws`/`wss`), `ob` (the `ob` parameter) or `va` (a host under `.invalid`),
/// in any case. `false` proves the parse would find none of them; `true` proves nothing. A part
/// of a text has no pair the text has not (its first octet has none before it): `false` for a
/// text is `false` for every part of it.
fn may_need_flow(value: &[u8]) -> bool {
    // Eight octets at a time for the octets that end one of those pairs or are an escape (an
    // exact zero-octet test on the word, its letters lower-cased, XORed with each), and the pair
    // tested only at them: a table load and a test per octet cost ~9 instructions an octet
    // (~380 per dialog-creating request).
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let equal = |w: u64, b: u8| {
        let x = w ^ (ONES * u64::from(b));
        !(((x & LOW7) + LOW7) | x | LOW7)
    };
    // At an octet that ends a pair (in any case) or is an escape.
    let pair_ends_at = |i: usize| {
        let b = value[i];
        b == b'%' || i > 0 && matches!((value[i - 1] | 0x20, b | 0x20), (b'w', b's') | (b'o', b'b') | (b'v', b'a'))
    };
    let words = value.chunks_exact(8);
    let tail = value.len() - words.remainder().len();
    for (k, word) in words.enumerate() {
        let w = u64::from_le_bytes([word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]]);
        // Only `s`, `b` and `a` are `S`, `B` and `A` with 0x20 set.
        let lower = w | (ONES * 0x20);
        let mut ends = equal(lower, b's') | equal(lower, b'b') | equal(lower, b'a') | equal(w, b'%');
        while ends != 0 {
            if pair_ends_at(8 * k + ends.trailing_zeros() as usize / 8) {
                return true;
            }
            ends &= ends - 1;
        }
    }
    (tail..value.len()).any(pair_ends_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_sip::headers::NameAddr;

    /// No part of a text the filter clears may need a flow: what lets `contact_needs_flow` ask
    /// the first Contact line's text before splitting its first value out.
    #[test]
    fn no_part_of_a_text_the_flow_filter_clears_passes_it() {
        let parts: [&[u8]; 12] = [b"w", b"s", b"o", b"b", b"v", b"a", b"W", b"%", b",", b"<sip:x@", b";", b"1"];
        crate::substring_filters::assert_no_part_of_a_cleared_text_passes(&parts, 5, may_need_flow);
    }

    /// The filter as it was written first, an octet at a time: the word-at-a-time one must say
    /// the same of every text.
    fn may_need_flow_by_octet(value: &[u8]) -> bool {
        value.iter().enumerate().any(|(i, &b)| {
            matches!(b, b's' | b'S' | b'b' | b'B' | b'a' | b'A' | b'%')
                && (b == b'%'
                    || i > 0 && matches!((value[i - 1] | 0x20, b | 0x20), (b'w', b's') | (b'o', b'b') | (b'v', b'a')))
        })
    }

    /// Texts of every length up to 40 built from the octets the filter looks at (each pair in
    /// both cases, across every word boundary), near misses and others (0x80 and above too),
    /// and every two-octet text: the same verdict as the octet-at-a-time filter.
    #[test]
    fn the_word_filter_says_what_the_octet_filter_says() {
        let alphabet: &[u8] = b"wsWSobOBvaVA%SsqrWw@.;<>:1\x80\xff\x00\x13\x53\x57\x20";
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(may_need_flow(&[a, b]), may_need_flow_by_octet(&[a, b]), "{a:#x} {b:#x}");
            }
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 41) as usize;
            let mut s = x;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    alphabet[(s % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(may_need_flow(&text), may_need_flow_by_octet(&text), "{}", String::from_utf8_lossy(&text));
        }
    }

    /// The text filter in front of the Contact parse never hides a contact that needs its flow.
    #[test]
    fn the_text_filter_passes_every_contact_that_needs_its_flow() {
        let contacts = [
            "<sip:abc@df7jal23ls0d.invalid;transport=ws>",
            "<sip:abc@DF7JAL23LS0D.INVALID.>",
            "<sip:abc@192.0.2.4;transport=WSS>",
            "<sip:a@192.0.2.4;OB>",
            "<sip:a@192.0.2.4;%6Fb>",
            "<sip:a@192.0.2.4;%74ransport=ws>",
            "\"x\" <sip:a@h.example;ob;transport=tcp>;expires=60",
            "<sip:sipp@127.0.0.1:5061;transport=UDP>",
            "<sip:alice@192.0.2.4:5060>",
            "sip:carol@invalid",
        ];
        for c in contacts {
            let needs = NameAddr::parse(c.as_bytes())
                .is_ok_and(|a| !reachable_uri(&a.uri) || a.uri.as_sip().is_some_and(|u| u.param("ob").is_some()));
            assert!(!needs || may_need_flow(c.as_bytes()), "{c}");
        }
        assert!(!may_need_flow(b"<sip:sipp@127.0.0.1:5061;transport=UDP>"));
        assert!(!may_need_flow(b"<sip:alice@192.0.2.4:5060;transport=tcp>"));
    }
}
