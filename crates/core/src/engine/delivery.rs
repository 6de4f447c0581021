//! Where a request for a registered contact is delivered, guessing NAT from the registration
//! (RFC 3261 §16.5 leaves it to the location service; RFC 5626 is what phones would need to
//! say so themselves).

use super::context::PlannedDest;
use super::hop::{hop_for, Hop};
use crate::peer::Peer;
use herald_sip::uri::Uri;
use std::net::IpAddr;

/// Where a request for a registered contact goes.
/// * Registered over a stream: over that connection (the phone may not accept new ones, and
///   behind NAT it cannot).
/// * Over UDP from behind NAT (the contact is a private address, RFC 1918 / RFC 6598 / RFC 4193,
///   that is not where the REGISTER came from): to the registration's source, like Kamailio's
///   `fix_nated_register`.
/// * Otherwise to the contact URI itself, so third-party registrations work.
pub(super) fn delivery(contact: &str, source: Peer) -> PlannedDest {
    if source.transport.is_reliable() {
        return PlannedDest::Peer(source);
    }
    let natted = match Uri::parse(contact.as_bytes()).ok().as_ref().and_then(hop_for) {
        Some(Hop::Peer(p)) => is_private(p.addr.ip()) && p.addr.ip() != source.addr.ip(),
        _ => false,
    };
    if natted {
        PlannedDest::Peer(source)
    } else {
        PlannedDest::Uri(contact.to_owned())
    }
}

/// A private address: RFC 1918 (IPv4 private networks), RFC 6598 shared address space
/// (100.64.0.0/10, carrier-grade NAT), or an RFC 4193 unique local IPv6 address.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || (o[0] == 100 && (64..128).contains(&o[1]))
        }
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}
