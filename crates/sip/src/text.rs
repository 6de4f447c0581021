//! Writing the numbers and addresses that go into every message herald builds (branches, Via
//! sent-by, Record-Route, CSeq, Content-Length) without `core::fmt`.
//!
//! The formatting machinery costs hundreds of instructions per argument (callgrind: about 25k
//! instructions per call through the proxy, half of it printing our own IPv4 address; 26k per
//! call in the load generator), where these few loops cost tens. The output is byte for byte
//! what `Display` and `{:x}` print.

use crate::uri::Host;
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Appends `n` in decimal.
pub fn push_dec(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // One push of the digits (ASCII, so `ascii_str` is a plain view): pushing them as chars
    // checked capacity and UTF-8 width once per digit.
    out.push_str(crate::scan::ascii_str(&digits[i..]));
}

/// Appends `n` in lower-case hexadecimal, zero-padded to at least `width` digits.
pub fn push_hex(out: &mut String, n: u64, width: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let significant = (64 - n.leading_zeros() as usize).div_ceil(4).max(1);
    for _ in significant..width {
        out.push('0');
    }
    for k in (0..significant).rev() {
        out.push(HEX[((n >> (4 * k)) & 0xf) as usize] as char);
    }
}

/// Appends the host part for one of our addresses: dotted IPv4, or an IPv6 reference in
/// brackets (RFC 3261 §25.1).
pub fn push_host(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => push_ipv4(out, v4),
        // Rare (IPv6 listeners) and intricate (zero compression): left to Display.
        IpAddr::V6(v6) => {
            let _ = write!(out, "[{v6}]");
        }
    }
}

/// Appends a bare address, IPv6 without brackets (a Via `received` value: RFC 3261 §18.2.1,
/// RFC 5118 §4.5 accepts both forms).
pub fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => push_ipv4(out, v4),
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends a parsed URI or Via host as `Display` prints it: names as written, IPv6 in brackets.
pub fn push_uri_host(out: &mut String, host: &Host<'_>) {
    match *host {
        Host::Name(n) => out.push_str(n),
        Host::Ipv4(v4) => push_ipv4(out, v4),
        Host::Ipv6(v6) => push_host(out, IpAddr::V6(v6)),
    }
}

/// Dotted quad, built in a stack buffer and pushed once (it goes into every Via, Record-Route
/// and `received` herald writes).
fn push_ipv4(out: &mut String, v4: Ipv4Addr) {
    let mut buf = [0u8; 15];
    let mut n = 0;
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            buf[n] = b'.';
            n += 1;
        }
        if octet >= 100 {
            buf[n] = b'0' + octet / 100;
            n += 1;
        }
        if octet >= 10 {
            buf[n] = b'0' + octet / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + octet % 10;
        n += 1;
    }
    out.push_str(crate::scan::ascii_str(&buf[..n]));
}

/// Appends `host:port` for one of our addresses.
pub fn push_host_port(out: &mut String, addr: SocketAddr) {
    push_host(out, addr.ip());
    out.push(':');
    push_dec(out, u64::from(addr.port()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut String)) -> String {
        let mut s = String::new();
        f(&mut s);
        s
    }

    #[test]
    fn hosts_and_bare_addresses_print_as_display_does() {
        for ip in ["0.0.0.0", "1.2.3.4", "10.0.100.255", "192.168.9.99", "255.255.255.255", "100.10.1.0"] {
            let v4: Ipv4Addr = ip.parse().unwrap();
            assert_eq!(with(|s| push_host(s, v4.into())), ip);
            assert_eq!(with(|s| push_ip(s, v4.into())), ip);
            assert_eq!(with(|s| push_uri_host(s, &Host::Ipv4(v4))), ip);
        }
        let v6: std::net::Ipv6Addr = "2001:db8::10".parse().unwrap();
        assert_eq!(with(|s| push_host(s, v6.into())), "[2001:db8::10]");
        assert_eq!(with(|s| push_ip(s, v6.into())), "2001:db8::10");
        assert_eq!(with(|s| push_uri_host(s, &Host::Ipv6(v6))), "[2001:db8::10]");
        assert_eq!(with(|s| push_uri_host(s, &Host::Name("Example.COM"))), "Example.COM");
    }

    #[test]
    fn numbers_print_as_display_does() {
        for n in [0, 1, 9, 10, 99, 100, 255, 5060, 65535, 1 << 32, u64::MAX] {
            assert_eq!(with(|s| push_dec(s, n)), n.to_string());
            for width in [0, 1, 12, 16] {
                assert_eq!(with(|s| push_hex(s, n, width)), format!("{n:0width$x}"), "{n} {width}");
            }
        }
    }

    #[test]
    fn addresses_print_as_display_does() {
        for a in [
            "127.0.0.1:5060",
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "10.20.30.4:17501",
            "[::1]:5060",
            "[2001:db8::7]:5061",
        ] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(with(|s| push_host_port(s, addr)), a);
        }
    }
}
