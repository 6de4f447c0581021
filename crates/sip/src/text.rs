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
    // One push of the digits (ASCII, so `ascii_str` is a plain view): pushing them as chars
    // checked capacity and UTF-8 width once per digit.
    out.push_str(crate::scan::ascii_str(dec_digits(n, &mut [0u8; 20])));
}

/// The decimal digits of `n`, written at the end of `buf`.
fn dec_digits(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Appends `n` in lower-case hexadecimal, zero-padded to at least `width` digits.
pub fn push_hex(out: &mut String, n: u64, width: usize) {
    let significant = (64 - n.leading_zeros() as usize).div_ceil(4).max(1);
    let shown = significant.max(width.min(16));
    for _ in shown..width {
        out.push('0');
    }
    // All 16 digits at once in two words, pushed once: a digit at a time cost about 140
    // instructions per number, and these numbers are in every branch and tag herald writes.
    let digits = hex16(n);
    out.push_str(crate::scan::ascii_str(&digits[16 - shown..]));
}

/// Text its caller wrote in ASCII on the stack (digits, a branch) as `&str`: a few word compares
/// check it, where `std::str::from_utf8` cost about 90 instructions for a branch of 46 octets
/// (issue 21, twice per proxied call). Anything not ASCII is checked as UTF-8, and what is not
/// that either is "".
pub fn ascii(bytes: &[u8]) -> &str {
    crate::scan::ascii_str(bytes)
}

/// The 16 lower-case hex digits of `n`, zero-padded (`{:016x}`), for callers that compare or
/// write bytes without a `String`.
pub fn hex16(n: u64) -> [u8; 16] {
    let mut digits = [0u8; 16];
    digits[..8].copy_from_slice(&hex_word((n >> 32) as u32));
    digits[8..].copy_from_slice(&hex_word(n as u32));
    digits
}

/// The 8 lower-case hex digits of `v`, most significant first: the nibbles spread one per
/// byte, then each turned into its digit without a branch (a nibble of 10 or more gets the
/// distance from '9' to 'a' added).
fn hex_word(v: u32) -> [u8; 8] {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    (x + 0x3030_3030_3030_3030 + letters * (b'a' - b'9' - 1) as u64).to_be_bytes()
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
    out.push_str(ipv4_text(v4, &mut [0u8; 15]));
}

/// The dotted quad of `v4`, as `Display` prints it, written into `buf`.
pub fn ipv4_text(v4: Ipv4Addr, buf: &mut [u8; 15]) -> &str {
    let n = put_ipv4(buf, v4);
    crate::scan::ascii_str(&buf[..n])
}

/// Writes the dotted quad at the start of `buf` (at least 15 octets); returns its length.
fn put_ipv4(buf: &mut [u8], v4: Ipv4Addr) -> usize {
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
    n
}

/// Appends `host:port` for one of our addresses. An IPv4 one is built in one stack buffer and
/// pushed once (it is in every Via and Record-Route herald writes: three pushes cost twice as
/// much).
pub fn push_host_port(out: &mut String, addr: SocketAddr) {
    let SocketAddr::V4(v4) = addr else {
        push_host(out, addr.ip());
        out.push(':');
        push_dec(out, u64::from(addr.port()));
        return;
    };
    out.push_str(ipv4_port_text(*v4.ip(), Some(v4.port()), &mut [0u8; 21]));
}

/// `a.b.c.d[:port]` as `Display` prints the address and the port, written into `buf`.
pub fn ipv4_port_text(v4: Ipv4Addr, port: Option<u16>, buf: &mut [u8; 21]) -> &str {
    let mut n = put_ipv4(buf, v4);
    if let Some(port) = port {
        buf[n] = b':';
        n += 1;
        let mut port_buf = [0u8; 20];
        let port = dec_digits(u64::from(port), &mut port_buf);
        buf[n..n + port.len()].copy_from_slice(port);
        n += port.len();
    }
    crate::scan::ascii_str(&buf[..n])
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
        let mixed = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];
        for n in [0, 1, 9, 10, 15, 16, 99, 100, 255, 5060, 65535, 1 << 32, u64::MAX].into_iter().chain(mixed) {
            assert_eq!(with(|s| push_dec(s, n)), n.to_string());
            for width in [0, 1, 12, 16, 20] {
                assert_eq!(with(|s| push_hex(s, n, width)), format!("{n:0width$x}"), "{n} {width}");
            }
        }
    }

    #[test]
    fn hex_of_many_numbers_prints_as_format_does() {
        let mut n = 1u64;
        for _ in 0..10_000 {
            n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let shifted = n >> (n % 61);
            assert_eq!(with(|s| push_hex(s, n, 16)), format!("{n:016x}"));
            assert_eq!(hex16(n), *format!("{n:016x}").as_bytes());
            assert_eq!(with(|s| push_hex(s, shifted, 0)), format!("{shifted:x}"));
        }
    }

    #[test]
    fn addresses_print_as_display_does() {
        for a in [
            "127.0.0.1:5060",
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "10.20.30.4:17501",
            "1.2.3.4:9",
            "1.2.3.4:10",
            "1.2.3.4:99",
            "1.2.3.4:100",
            "1.2.3.4:999",
            "1.2.3.4:1000",
            "1.2.3.4:9999",
            "1.2.3.4:10000",
            "[::1]:5060",
            "[2001:db8::7]:5061",
        ] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(with(|s| push_host_port(s, addr)), a);
            if let SocketAddr::V4(v4) = addr {
                assert_eq!(ipv4_port_text(*v4.ip(), Some(v4.port()), &mut [0; 21]), a);
                assert_eq!(ipv4_port_text(*v4.ip(), None, &mut [0; 21]), v4.ip().to_string());
            }
        }
    }
}
