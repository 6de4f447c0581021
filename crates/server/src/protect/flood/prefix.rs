//! The unit addresses are counted in (`[flood] trusted` prefixes are `herald_core::auth::PeerPrefix`).

use std::net::IpAddr;

/// IPv4-mapped IPv6 addresses (dual-stack sockets) count as the IPv4 address they carry.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The unit every per-source count and ban applies to: an IPv4 address, or the /64 an IPv6
/// address belongs to. A /64 is one subnet (RFC 4291 §2.5.1, RFC 7421): a single host commonly
/// holds one whole (SLAAC privacy addresses, RFC 8981, change by themselves), so counting IPv6
/// per address would let one machine be thousands of sources (issue 16: 27 addresses of one /64
/// guessed a password with no ban).
pub(super) fn source_net(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(a) => IpAddr::V6((u128::from(a) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}
