//! Address prefixes (`[flood] trusted`) and the unit addresses are counted in.

use std::net::IpAddr;

/// An address prefix such as `10.0.0.0/8` or `::1/128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Parses `ADDR` or `ADDR/LEN`.
    pub fn parse(text: &str) -> Result<Prefix, String> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| format!("'{text}' is not an IP address or prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("'{text}': prefix length must be 0 to {max}"))?,
            None => max,
        };
        Ok(Prefix { addr, len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (canonical(self.addr), ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                masked(u32::from(p) as u128, 32, self.len) == masked(u32::from(a) as u128, 32, self.len)
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                masked(u128::from(p), 128, self.len) == masked(u128::from(a), 128, self.len)
            }
            _ => false,
        }
    }
}

fn masked(bits: u128, width: u8, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        bits >> (width - len.min(width))
    }
}

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
