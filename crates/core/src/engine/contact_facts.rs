//! What a registered contact's URI says about delivering to it (`delivery`), read once per
//! contact text and kept: the parse and its readings (RFC 3263 §4 hop, RFC 7118 reachability,
//! the NAT test's address) cost ~1,000 instructions for every INVITE to a registered user
//! (issue 21), and a phone's contact is the same text from one REGISTER to the next.

use super::hop::{hop_for, transport_and_maddr, Hop};
use crate::nat::contact_address;
use crate::peer::{Peer, Transport};
use herald_sip::uri::{Host, SipUri, Uri};
use std::net::IpAddr;

/// The readings of one contact URI's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactFacts {
    /// Reached without the flow it was registered on ([`reachable_uri`]); a text herald does
    /// not parse counts as reachable, as the contact itself is then tried.
    pub reachable: bool,
    /// A sip/sips contact's IP host and port (the scheme's default when none): what the NAT
    /// test of a binding reads (`crate::nat::address_behind_nat`).
    pub address: Option<(IpAddr, u16)>,
    /// Where the contact goes by itself when its host is an IP address ([`hop_for`]).
    pub hop: Option<Peer>,
    /// The text is a Request-URI as written: it carries no `method` parameter or header
    /// component (RFC 3261 §19.1.1 Table 1), which `delivery` would otherwise remove.
    pub request_uri_as_written: bool,
}

impl ContactFacts {
    /// The facts of `contact`, parsed now.
    pub fn of(contact: &str) -> ContactFacts {
        let Ok(uri) = Uri::parse(contact.as_bytes()) else {
            return ContactFacts::UNPARSED;
        };
        let address = contact_address(&uri);
        let hop = match hop_for(&uri) {
            Some(Hop::Peer(p)) => Some(p),
            _ => None,
        };
        ContactFacts { reachable: reachable_uri(&uri), address, hop, request_uri_as_written: uri.fits_request_uri() }
    }

    /// A text herald does not parse: tried as it is.
    const UNPARSED: ContactFacts =
        ContactFacts { reachable: true, address: None, hop: None, request_uri_as_written: true };
}

/// Whether a contact URI can be reached without the flow it was registered on. Not when its
/// host is under `.invalid` (RFC 7118 §5: a WebSocket client "MUST" use a domain that does not
/// resolve, RFC 2606 §2, since it cannot accept connections), nor when its transport is `ws` or
/// `wss` (herald opens no WebSocket connections: RFC 7118 §5 has the client open them).
pub(super) fn reachable_uri(contact: &Uri<'_>) -> bool {
    let Uri::Sip(u) = contact else { return true };
    reachable_host_and_transport(u, transport_and_maddr(u).0)
}

/// [`reachable_uri`] of a sip/sips URI whose `transport` parameter is known.
pub(super) fn reachable_host_and_transport(u: &SipUri<'_>, transport: Option<&str>) -> bool {
    let invalid = match &u.host {
        Host::Name(name) => {
            let name = name.trim_end_matches('.');
            name.len() >= 8 && name[name.len() - 8..].eq_ignore_ascii_case(".invalid")
                || name.eq_ignore_ascii_case("invalid")
        }
        _ => false,
    };
    let ws = transport.and_then(Transport::parse).is_some_and(|t| matches!(t, Transport::Ws | Transport::Wss));
    !invalid && !ws
}

/// Contacts' facts by their text, in a few slots picked by where the store keeps the text (a
/// binding's contact stays at one address while it lives): a hit compares the text and copies
/// the facts. Bounded (`SLOTS` texts of at most `TEXT` octets, a longer one is read every time)
/// and allocation-free after its creation; a slot another contact takes is read again when
/// its own comes back, which costs what reading it without the cache costs, plus a short copy.
pub(super) struct ContactCache {
    slots: Box<[Slot]>,
}

const SLOTS: usize = 32;
const TEXT: usize = 96;

#[derive(Clone, Copy)]
struct Slot {
    /// Octets of `text` in use; 0: empty (an empty contact is never kept).
    len: u8,
    text: [u8; TEXT],
    facts: ContactFacts,
}

impl ContactCache {
    pub fn new() -> ContactCache {
        let empty = Slot { len: 0, text: [0; TEXT], facts: ContactFacts::UNPARSED };
        ContactCache { slots: vec![empty; SLOTS].into_boxed_slice() }
    }

    /// The facts of `contact` ([`ContactFacts::of`]), from its slot when it holds that text.
    pub fn facts(&mut self, contact: &str) -> ContactFacts {
        let text = contact.as_bytes();
        if text.is_empty() || text.len() > TEXT {
            return ContactFacts::of(contact);
        }
        // Heap blocks are 16-aligned: the bits above those pick the slot.
        let at = text.as_ptr() as usize;
        let slot = &mut self.slots[((at >> 4) ^ (at >> 10)) % SLOTS];
        if usize::from(slot.len) == text.len() && slot.text[..text.len()] == *text {
            return slot.facts;
        }
        let facts = ContactFacts::of(contact);
        slot.text[..text.len()].copy_from_slice(text);
        slot.len = text.len() as u8;
        slot.facts = facts;
        facts
    }
}

impl Default for ContactCache {
    fn default() -> ContactCache {
        ContactCache::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_slot_answers_only_for_its_own_text() {
        let texts = [
            "sip:alice@192.0.2.1:5070;transport=tcp",
            "sip:bob@10.0.0.7",
            "sips:carol@[2001:db8::1]",
            "sip:dave@x.invalid;transport=ws",
            "sip:erin@example.com",
            "tel:+15551234",
            "not a uri",
        ];
        let mut cache = ContactCache::new();
        // Every text at many addresses, twice over: hits, misses and slots taken by another.
        let owned: Vec<String> = (0..200).map(|i| texts[i % texts.len()].to_owned()).collect();
        for _ in 0..2 {
            for t in &owned {
                assert_eq!(cache.facts(t), ContactFacts::of(t), "{t}");
            }
        }
        let long = format!("sip:{}@192.0.2.9", "u".repeat(200));
        assert_eq!(cache.facts(&long), ContactFacts::of(&long));
    }

    #[test]
    fn facts_read_the_uri() {
        let f = ContactFacts::of("sip:bob@10.0.0.7");
        assert_eq!(f.address, Some(("10.0.0.7".parse().unwrap(), 5060)));
        assert!(f.reachable);
        assert_eq!(f.hop.map(|p| p.addr), Some("10.0.0.7:5060".parse().unwrap()));
        let ws = ContactFacts::of("sip:dave@x.invalid;transport=ws");
        assert!(!ws.reachable && ws.address.is_none() && ws.hop.is_none());
        assert_eq!(ContactFacts::of("sips:c@[2001:db8::1]").address, Some(("2001:db8::1".parse().unwrap(), 5061)));
        assert_eq!(ContactFacts::of("garbage"), ContactFacts::UNPARSED);
        assert!(f.request_uri_as_written && ws.request_uri_as_written);
        assert!(!ContactFacts::of("sip:user@example.com?Route=%3Csip:sip.example.com%3E").request_uri_as_written);
        assert!(!ContactFacts::of("sip:bob@10.0.0.7;method=INVITE").request_uri_as_written);
    }
}
