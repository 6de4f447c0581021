//! Where a request for a registered contact is delivered (RFC 3261 §16.5 leaves it to the
//! location service): over the flow the registration came on (RFC 5626 Outbound, RFC 7118
//! WebSocket phones), at the address a NATed registration really came from, or to the contact.

use super::contact_facts::{ContactCache, ContactFacts};
use super::context::{Planned, PlannedDest};
use crate::nat::{address_behind_nat, NatDetect};
use crate::peer::{Peer, Transport};
use herald_sip::uri::Uri;
use herald_store::Binding;

/// RFC 5626 §5.3 and RFC 3261 §21.4.18: the status a branch counts as when the flow of a
/// registered binding is gone (its connection closed) and the contact cannot be reached any
/// other way. 480 Temporarily Unavailable: the user is registered and will be reachable again
/// when the phone reconnects and registers the new flow (RFC 5626 §4.4 makes it do so at
/// once). Not 410 Gone, which says the user is permanently gone with no forwarding address
/// (§21.4.9), nor 430 Flow Failed, which an edge proxy answers the authoritative proxy for one
/// flow token (§5.3) and which must not reach a UAC; not the default 503 either, which §16.7
/// turns into 500 and which would blame herald.
const LOST_FLOW: u16 = 480;

/// The targets for an AoR's bindings, in the store's order (highest q, most recent first).
/// Outbound bindings (RFC 5626: `+sip.instance` and `reg-id`) are flows of an instance: the
/// request goes to each instance once, over its most recently registered flow, and another
/// flow of the same instance is its fallback when that one has failed (§5.3: "the proxy MUST
/// NOT send the request on more than one flow per instance"; §9 failover). `nat`: what makes a
/// UDP binding one behind NAT (`crate::nat`). `contacts`: the contacts' readings kept.
pub(super) fn plan_bindings<'a>(
    bindings: impl ExactSizeIterator<Item = &'a Binding<Peer>>,
    nat: NatDetect,
    contacts: &mut ContactCache,
) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::with_capacity(bindings.len());
    let mut instances: Vec<(&str, usize)> = Vec::new();
    for b in bindings {
        let plan = plan_binding(b, nat, contacts.facts(&b.contact));
        let flow_of = b.instance.as_deref().filter(|_| b.reg_id.is_some());
        match flow_of {
            Some(instance) => match instances.iter().find(|(i, _)| *i == instance) {
                Some(&(_, at)) => planned[at].fallback.push(plan),
                None => {
                    instances.push((instance, planned.len()));
                    planned.push(plan);
                }
            },
            None => planned.push(plan),
        }
    }
    planned
}

/// One binding's target, with its fallback.
fn plan_binding(b: &Binding<Peer>, nat: NatDetect, contact: ContactFacts) -> Planned {
    let push_routes = b.path.as_deref().map(|p| vec![p.to_owned()]).unwrap_or_default();
    // An Outbound flow (RFC 5626 §5.3) and a contact nothing but its flow reaches (RFC 7118
    // §5) are reached over the flow the registration came on, and only over it.
    let flow_only = (b.instance.is_some() && b.reg_id.is_some()) || !contact.reachable;
    // RFC 3327 §5.3: with a Path, the request goes to the first Path entry (the edge proxy the
    // registration came through), which routes it on (over its flow, with Outbound).
    let (dest, fallback, lost_flow) = match b.path.as_deref().and_then(first_path_uri) {
        Some(first) => (PlannedDest::Uri(first), Vec::new(), None),
        None if flow_only => (PlannedDest::Peer(b.source), Vec::new(), Some(LOST_FLOW)),
        None => match delivery(&contact, b.source, nat) {
            // A connection may close while the phone is still there (it reconnects, an idle
            // timeout): the contact itself is the second try.
            Some(source) if source.transport.is_reliable() => (
                PlannedDest::Peer(source),
                vec![contact_plan(b, PlannedDest::Uri(String::from(&*b.contact)), contact)],
                None,
            ),
            Some(source) => (PlannedDest::Peer(source), Vec::new(), None),
            None => (addressed(&b.contact, &contact), Vec::new(), None),
        },
    };
    Planned { dest, fallback, lost_flow, push_routes, ..contact_plan(b, PlannedDest::Uri(String::new()), contact) }
}

/// RFC 3261 §16.6 step 2: the contact as the Request-URI, without what a Request-URI may not
/// carry (a registered contact may have header components, RFC 4475 §3.3.14).
fn request_uri_of(contact: &str, facts: ContactFacts) -> String {
    if !facts.request_uri_as_written {
        if let Ok(uri) = Uri::parse(contact.as_bytes()) {
            return uri.request_uri_form().into_owned();
        }
    }
    // `String::from`, not `to_string`, which goes through `Display` (the formatter's padding).
    String::from(contact)
}

fn contact_plan(b: &Binding<Peer>, dest: PlannedDest, facts: ContactFacts) -> Planned {
    Planned {
        request_uri: Some(request_uri_of(&b.contact, facts)),
        dest,
        push_routes: Vec::new(),
        q: b.q_or_default(),
        strict_route_tail: None,
        fallback: Vec::new(),
        lost_flow: None,
        gateway: None,
        contact: Some(facts),
    }
}

/// Where a request for a registered contact goes.
/// * Registered over a stream: over that connection (the phone may not accept new ones, and
///   behind NAT it cannot).
/// * Over UDP from behind NAT (`crate::nat::binding_behind_nat`: by default a private contact,
///   RFC 1918 / RFC 6598 / RFC 4193 / link-local, that is not where the REGISTER came from): to
///   the registration's source, the NAT's public address and port, like Kamailio's
///   `fix_nated_register`; the Request-URI stays the contact (the phone recognises itself).
/// * Otherwise to the contact URI itself (`None`), so third-party registrations work.
///
/// `contact`: what the contact says ([`ContactFacts`]; the NAT test of
/// `crate::nat::parsed_binding_behind_nat` on its address).
pub(super) fn delivery(contact: &ContactFacts, source: Peer, nat: NatDetect) -> Option<Peer> {
    if source.transport.is_reliable() {
        return Some(source);
    }
    let behind_nat = |&(ip, port): &(_, u16)| address_behind_nat(ip, port, source.addr, nat);
    (source.transport == Transport::Udp && contact.address.as_ref().is_some_and(behind_nat)).then_some(source)
}

/// The contact itself as a branch's destination: one with an IP address goes there (RFC 3263
/// §4 without DNS, `hop_for`), named as the peer now from the reading already made (neither
/// parsed again when the branch starts nor copied as text to be dropped, issue 21); a host name
/// is the URI to resolve.
fn addressed(contact: &str, facts: &ContactFacts) -> PlannedDest {
    facts.hop.map_or_else(|| PlannedDest::Uri(contact.to_owned()), PlannedDest::Peer)
}

/// The URI of the first value of a stored Path header ("<sip:p1;lr>, <sip:p2;lr>").
pub(super) fn first_path_uri(path: &str) -> Option<String> {
    let first = herald_sip::headers::ListIter::new(path.as_bytes()).next()?.ok()?.1;
    herald_sip::headers::NameAddr::parse(first).ok().map(|a| a.uri.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::contact_facts::reachable_uri;
    use herald_sip::uri::Uri;

    fn reachable_by_itself(contact: &str) -> bool {
        Uri::parse(contact.as_bytes()).map_or(true, |u| reachable_uri(&u))
    }
    use crate::peer::ConnId;
    use std::num::NonZeroU32;

    fn binding(contact: &str, source: Peer, flow: Option<(&str, u32)>) -> Binding<Peer> {
        Binding {
            contact: contact.into(),
            call_id: "c".into(),
            path: None,
            instance: flow.map(|(i, _)| i.into()),
            source,
            expires_at: 100,
            cseq: 1,
            reg_id: flow.and_then(|(_, r)| NonZeroU32::new(r)),
            q: None,
        }
    }

    fn plan_of(bindings: Vec<Binding<Peer>>) -> Vec<Planned> {
        plan_bindings(bindings.iter(), NatDetect::Private, &mut ContactCache::new())
    }

    fn ws(conn: u64) -> Peer {
        Peer { transport: Transport::Ws, addr: "198.51.100.4:50000".parse().unwrap(), conn: Some(ConnId(conn)) }
    }

    #[test]
    fn contacts_that_only_their_flow_reaches() {
        assert!(!reachable_by_itself("sip:abc@df7jal23ls0d.invalid;transport=ws"));
        assert!(!reachable_by_itself("sip:abc@DF7JAL23LS0D.INVALID."));
        assert!(!reachable_by_itself("sip:abc@192.0.2.4;transport=wss"));
        assert!(reachable_by_itself("sip:abc@192.0.2.4;transport=tcp"));
        assert!(reachable_by_itself("sip:abc@invalid.example.com"));
        assert!(reachable_by_itself("tel:+15551234"));
    }

    #[test]
    fn a_websocket_binding_has_no_fallback_but_a_tcp_one_does() {
        let plan = plan_of(vec![binding("sip:a@x.invalid;transport=ws", ws(1), None)]);
        assert_eq!(plan.len(), 1);
        assert!(matches!(plan[0].dest, PlannedDest::Peer(p) if p == ws(1)));
        assert!(plan[0].fallback.is_empty());
        assert_eq!(plan[0].lost_flow, Some(480));
        let tcp = Peer { transport: Transport::Tcp, ..ws(2) };
        let plan = plan_of(vec![binding("sip:a@192.0.2.4;transport=tcp", tcp, None)]);
        assert_eq!(plan[0].fallback.len(), 1);
        assert!(matches!(&plan[0].fallback[0].dest, PlannedDest::Uri(u) if u == "sip:a@192.0.2.4;transport=tcp"));
        assert_eq!(plan[0].lost_flow, None);
        // A UDP registration of an `.invalid` contact: to where it came from.
        let udp = Peer::udp("203.0.113.9:5062".parse().unwrap());
        let plan = plan_of(vec![binding("sip:a@x.invalid", udp, None)]);
        assert!(matches!(plan[0].dest, PlannedDest::Peer(p) if p == udp));
        assert_eq!(plan[0].lost_flow, Some(480));
        // An Outbound flow over TCP with a reachable contact: still only its flow (RFC 5626 §5.3).
        let plan = plan_of(vec![binding("sip:a@192.0.2.4;transport=tcp;ob", tcp, Some(("<urn:uuid:c>", 1)))]);
        assert!(matches!(plan[0].dest, PlannedDest::Peer(p) if p == tcp));
        assert!(plan[0].fallback.is_empty());
    }

    #[test]
    fn one_target_per_outbound_instance_the_other_flows_as_fallbacks() {
        let a = "<urn:uuid:a>";
        let plan = plan_of(vec![
            binding("sip:a@x.invalid;transport=ws;ob", ws(2), Some((a, 2))),
            binding("sip:a@y.invalid;transport=ws", ws(9), None),
            binding("sip:a@x.invalid;transport=ws;ob", ws(1), Some((a, 1))),
            binding("sip:a@z.invalid;transport=ws;ob", ws(3), Some(("<urn:uuid:b>", 1))),
        ]);
        let dests: Vec<Peer> = plan
            .iter()
            .map(|p| match p.dest {
                PlannedDest::Peer(p) => p,
                _ => panic!(),
            })
            .collect();
        assert_eq!(dests, [ws(2), ws(9), ws(3)]);
        assert_eq!(plan[0].fallback.len(), 1);
        assert!(matches!(plan[0].fallback[0].dest, PlannedDest::Peer(p) if p == ws(1)));
        assert_eq!(plan[0].fallback[0].lost_flow, Some(480));
    }
}
