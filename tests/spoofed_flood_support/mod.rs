//! A spoofed-source UDP flood from a raw socket (tests/spoofed_flood.rs).
//!
//! The socket is `AF_INET`/`SOCK_RAW`/`IPPROTO_RAW` (which implies `IP_HDRINCL`): the test
//! writes the IPv4 and UDP headers itself, so every datagram can claim another source address,
//! as a real flood with forged sources does. Such a socket can only be opened by root, and only
//! inside a network namespace the test made: [`flood`] runs on a thread that first enters the
//! phones' namespace with `setns(2)` (which moves only the calling thread), so the datagrams
//! leave through the test's own veth pair and nowhere else.
//!
//! The flood is bounded twice: by a datagram count and by a wall-clock duration.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What to send, where, how fast and for how long.
#[derive(Clone, Debug)]
pub struct Flood {
    /// The namespace to send from (`ip netns` name: `/run/netns/<name>`).
    pub netns: String,
    /// Herald's address and SIP port.
    pub target: (Ipv4Addr, u16),
    /// The domain the requests name (herald's address: its own domain, so that REGISTER is
    /// challenged as a registration and INVITE from a local user as a call).
    pub domain: String,
    /// Forged sources are drawn from `prefix`/16.
    pub prefix: [u8; 2],
    /// Datagrams per second.
    pub rate: u32,
    /// Stop after this long ...
    pub duration: Duration,
    /// ... or after this many datagrams, whichever comes first.
    pub max_datagrams: u64,
    pub seed: u64,
}

/// What a flood sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sent {
    pub datagrams: u64,
    /// `sendto` failures (e.g. ENOBUFS when the veth queue is full).
    pub errors: u64,
    pub elapsed: Duration,
}

/// xorshift64*: reproducible sources, ports, tags and branches from `Flood::seed`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Enters the network namespace `name` on the calling thread only.
fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns(2) on a descriptor we own; it changes only this thread's namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn raw_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned by the returned OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One unauthenticated request from `src`: REGISTER (challenged with 401) or INVITE from a
/// local user to an unknown one (challenged with 407). Unique Call-ID, tag and branch each, so
/// that none is a retransmission of another.
fn sip_request(rng: &mut Rng, domain: &str, src: Ipv4Addr, sport: u16, invite: bool) -> String {
    let (id, tag, branch, user) = (rng.next(), rng.next() as u32, rng.next(), rng.next() % 100_000);
    let (method, ruri, to) = if invite {
        ("INVITE", format!("sip:nobody{user}@{domain}"), format!("sip:nobody{user}@{domain}"))
    } else {
        ("REGISTER", format!("sip:{domain}"), format!("sip:flood{user}@{domain}"))
    };
    format!(
        "{method} {ruri} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {src}:{sport};branch=z9hG4bK{branch:016x}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:flood{user}@{domain}>;tag={tag:08x}\r\n\
         To: <{to}>\r\n\
         Call-ID: {id:016x}@flood\r\n\
         CSeq: 1 {method}\r\n\
         Contact: <sip:flood{user}@{src}:{sport}>\r\n\
         Expires: 3600\r\n\
         Content-Length: 0\r\n\r\n"
    )
}

/// IPv4 + UDP headers in front of `payload`. The kernel fills in the IPv4 checksum (and the
/// id, left 0) for an `IP_HDRINCL` socket; the UDP checksum is 0, "none", which IPv4 allows
/// (RFC 768).
fn datagram(src: Ipv4Addr, sport: u16, dst: (Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let total = 20 + 8 + payload.len();
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, libc::IPPROTO_UDP as u8, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.0.octets());
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dst.1.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// Sends the flood from the calling thread (which it moves into `f.netns` for good: run it on
/// a thread of its own). Paced in 1 ms steps: after each step the count sent catches up with
/// `rate × elapsed`, so a slow step is made up for without ever exceeding the rate on average.
pub fn flood(f: &Flood) -> io::Result<Sent> {
    enter_netns(&f.netns)?;
    let sock = raw_socket()?;
    let mut rng = Rng(f.seed | 1);
    let dst = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0, // ignored by raw sockets
        sin_addr: libc::in_addr { s_addr: u32::from(f.target.0).to_be() },
        sin_zero: [0; 8],
    };
    let start = Instant::now();
    let mut sent = Sent::default();
    while sent.datagrams < f.max_datagrams {
        let elapsed = start.elapsed();
        if elapsed >= f.duration {
            break;
        }
        let due = (elapsed.as_secs_f64() * f64::from(f.rate)) as u64;
        while sent.datagrams < due.min(f.max_datagrams) {
            let r = rng.next();
            // Never .0 or .255 in the last octet: plain host addresses.
            let src = Ipv4Addr::new(f.prefix[0], f.prefix[1], (r >> 8) as u8, 1 + (r as u8 % 254));
            let sport = 1024 + (r >> 16) as u16 % 60_000;
            let invite = sent.datagrams % 2 == 1;
            let payload = sip_request(&mut rng, &f.domain, src, sport, invite);
            let p = datagram(src, sport, f.target, payload.as_bytes());
            // SAFETY: sendto(2) with a live buffer and a sockaddr_in of the right length.
            let n = unsafe {
                libc::sendto(
                    sock.as_raw_fd(),
                    p.as_ptr().cast(),
                    p.len(),
                    0,
                    (&dst as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            };
            if n < 0 {
                sent.errors += 1;
            }
            sent.datagrams += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    sent.elapsed = start.elapsed();
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagram_headers() {
        let p = datagram(Ipv4Addr::new(10, 77, 1, 2), 4000, (Ipv4Addr::new(10, 98, 3, 1), 5060), b"abc");
        assert_eq!(p.len(), 31);
        assert_eq!(&p[2..4], &31u16.to_be_bytes());
        assert_eq!(p[9], 17);
        assert_eq!(&p[12..16], &[10, 77, 1, 2]);
        assert_eq!(&p[16..20], &[10, 98, 3, 1]);
        assert_eq!(&p[22..24], &5060u16.to_be_bytes());
        assert_eq!(&p[24..26], &11u16.to_be_bytes());
        assert_eq!(&p[28..], b"abc");
    }

    #[test]
    fn flood_requests_are_well_formed_and_unique() {
        let mut rng = Rng(7);
        let mut call_ids = std::collections::HashSet::new();
        for invite in [false, true, false, true] {
            let text = sip_request(&mut rng, "10.98.3.1", Ipv4Addr::new(10, 77, 1, 2), 4000, invite);
            let m = herald_sip::Message::parse(bytes::Bytes::from(text), &herald_sip::Limits::default()).unwrap();
            let want = if invite { herald_sip::Method::Invite } else { herald_sip::Method::Register };
            assert_eq!(m.method(), Some(want));
            assert!(call_ids.insert(m.call_id().unwrap().to_owned()));
        }
    }
}
