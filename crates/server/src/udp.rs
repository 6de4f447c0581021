//! The server's side of batched UDP I/O: datagrams as the dispatcher sees them ([`Received`],
//! [`Outgoing`]). The system calls themselves - recvmmsg(2) and sendmmsg(2), one call for up to
//! [`BATCH`](herald_sys::BATCH) datagrams (seed 000: per-datagram syscalls and socket-lock
//! contention dominate a UDP SIP server's cost) - live in herald-sys. A receiver thread blocks
//! in recvmmsg itself (module `udp_receiver`): no readiness event loop, so a wake-up costs one
//! receive call instead of epoll_wait, recvmmsg and a final EAGAIN.

use bytes::{Bytes, BytesMut};
pub(crate) use herald_sys::{enable_rx_metadata, wait_writable};
use herald_sys::{Outbound, RecvBatch, Wait};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};

/// One datagram as read.
#[derive(Debug)]
pub(crate) struct Received {
    pub src: SocketAddr,
    /// The destination address the datagram was sent to (IP_PKTINFO), for wildcard sockets.
    pub dst: Option<IpAddr>,
    pub bytes: Bytes,
    /// Longer than the receive slot: the rest was discarded by the kernel.
    pub truncated: bool,
    /// When the kernel received it, CLOCK_REALTIME ns (SO_TIMESTAMPNS, if enabled).
    pub kernel_ns: Option<u64>,
    /// The socket's drop count when it was queued (SO_RXQ_OVFL; sent only once non-zero).
    pub drops: Option<u32>,
}

/// Reads up to [`BATCH`](herald_sys::BATCH) datagrams into `b`'s slots (see [`received`]).
/// Returns how many were read. On a blocking socket it waits for the first one, up to the
/// socket's SO_RCVTIMEO, and then takes only what is already queued; on a non-blocking one it
/// returns at once. `WouldBlock` when there were none.
pub(crate) fn recv_batch(sock: &UdpSocket, b: &mut RecvBatch) -> io::Result<usize> {
    b.recv(sock, Wait::IfBlocking)
}

/// Datagram `i` of the last batch read into `b`, copied out of its slot (which the next read
/// reuses) by `kept`; `None` past the batch or for a datagram without an IP source. Taken one at
/// a time as they are handled, not gathered into a list first (~40 instructions a datagram,
/// callgrind, issue 21).
pub(crate) fn received(b: &RecvBatch, i: usize, kept: &mut KeptBuffer) -> Option<Received> {
    let d = b.get(i)?;
    Some(Received {
        src: d.source?,
        dst: d.local,
        bytes: kept.copy(d.payload),
        truncated: d.truncated,
        kernel_ns: d.kernel_ns,
        drops: d.drops,
    })
}

/// The buffer a receiver copies its requests into, one after another, each message split off
/// as a [`Bytes`] of its own: one allocation per [`KeptBuffer::CHUNK`] octets of requests
/// instead of one (and a free, often on another thread) per datagram, and a clone of the message
/// (the transaction keeping it) only counts a reference where a buffer of its own was first
/// promoted to a shared one with another allocation.
///
/// Memory: a message pins the whole chunk it was split from while it lives, and a transaction
/// keeps its request until it ends (up to 64*T1 = 32 s, RFC 3261 §17.2.1). So only requests of
/// at least [`KeptBuffer::SHARE_FROM`] octets share a chunk: every held message then pins at
/// most `CHUNK / SHARE_FROM` = 8 times its length (the worst case: each chunk held by one
/// request of `SHARE_FROM` octets, every other message split from it gone), and no more than
/// `CHUNK` octets, so what requests hold stays within eight times the `limits.max_held_bytes`
/// that counts their lengths, and within 2 KiB a transaction (`limits.max_transactions`). The
/// chunk being filled is the only one kept when no message holds it (a chunk whose messages are
/// all gone is reclaimed in place).
///
/// Responses get a buffer of their own, as shorter requests do: a response that is forwarded
/// upstream has our Via cut out of its received buffer in place when nothing else holds that
/// buffer (`strip_top_via_owned` in herald-core), which a shared chunk never is; it would be
/// copied again there instead.
#[derive(Debug, Default)]
pub(crate) struct KeptBuffer {
    chunk: BytesMut,
}

impl KeptBuffer {
    /// Octets allocated at a time for requests.
    pub(crate) const CHUNK: usize = 2048;
    /// The shortest request that shares a chunk (see [`KeptBuffer`]: the memory bound).
    pub(crate) const SHARE_FROM: usize = KeptBuffer::CHUNK / 8;

    /// `payload` copied into a buffer of its own or split from the current chunk.
    pub(crate) fn copy(&mut self, payload: &[u8]) -> Bytes {
        let len = payload.len();
        // A response's start line begins with its version (RFC 3261 §7.2); a request's with
        // its method.
        if !(KeptBuffer::SHARE_FROM..=KeptBuffer::CHUNK).contains(&len) || payload.starts_with(b"SIP/") {
            return Bytes::copy_from_slice(payload);
        }
        if self.chunk.capacity() < len && !self.chunk.try_reclaim(len) {
            // The old chunk goes with the last message split from it.
            self.chunk = BytesMut::with_capacity(KeptBuffer::CHUNK);
        }
        self.chunk.extend_from_slice(payload);
        self.chunk.split().freeze()
    }
}

/// One datagram waiting to be sent.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub to: SocketAddr,
    pub bytes: Bytes,
    /// Who asked for it (the engine shard, or `None` for the runtime itself): whom to tell when
    /// it cannot be sent. Not used here.
    pub origin: Option<usize>,
}

impl Outbound for Outgoing {
    fn payload(&self) -> &[u8] {
        &self.bytes
    }
    fn destination(&self) -> Option<SocketAddr> {
        Some(self.to)
    }
}

/// Sends `items` with as few sendmmsg calls as possible, never waiting for room. Returns how many
/// were sent; the first unsent one failed with the returned error (`WouldBlock`: the send buffer
/// is full).
pub(crate) fn send_batch(sock: &UdpSocket, items: &[Outgoing]) -> (usize, Option<io::Error>) {
    herald_sys::send_batch(sock, items, Wait::Never)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept buffer's copies are the payloads, octet for octet, whether split from a chunk or
    /// copied alone, while any mix of earlier copies is still held or gone; a shared chunk never
    /// grows past `CHUNK`, and only requests of `SHARE_FROM..=CHUNK` octets share one.
    #[test]
    fn kept_copies_are_the_payloads() {
        let mut kept = KeptBuffer::default();
        let mut held: Vec<(Bytes, Vec<u8>)> = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..20_000 {
            let r = next();
            let len = match r % 4 {
                0 => (r >> 8) as usize % 64,
                1 => KeptBuffer::SHARE_FROM - 2 + (r >> 8) as usize % 4,
                2 => KeptBuffer::CHUNK - 2 + (r >> 8) as usize % 4,
                _ => (r >> 8) as usize % (KeptBuffer::CHUNK + 100),
            };
            let mut payload: Vec<u8> = (0..len).map(|i| (round + i) as u8).collect();
            if r & 0x100 != 0 && len >= 4 {
                payload[..4].copy_from_slice(b"SIP/");
            }
            let copy = kept.copy(&payload);
            assert_eq!(&copy[..], &payload[..]);
            let shares = (KeptBuffer::SHARE_FROM..=KeptBuffer::CHUNK).contains(&len) && !payload.starts_with(b"SIP/");
            // A copy of its own is the only holder of its buffer: what lets a response be cut in
            // place when forwarded.
            assert_eq!(copy.is_unique(), !shares && len > 0, "len {len}");
            assert!(kept.chunk.capacity() <= KeptBuffer::CHUNK);
            held.push((copy, payload));
            // Let go of some, oldest and newest alike.
            if r & 0x200 != 0 {
                let i = (r >> 20) as usize % held.len();
                held.swap_remove(i);
            }
            if held.len() > 64 {
                held.drain(..32);
            }
            for (copy, payload) in held.iter().rev().take(3) {
                assert_eq!(&copy[..], &payload[..]);
            }
        }
        for (copy, payload) in &held {
            assert_eq!(&copy[..], &payload[..]);
        }
    }

    /// The kernel really attaches a receive timestamp once it is enabled (loopback), and what
    /// the receiver reads is what was sent, from whom.
    #[test]
    fn kernel_timestamps_arrive() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_metadata(&rx).unwrap();
        rx.set_nonblocking(true).unwrap();
        let before = herald_sys::realtime_ns();
        let out = [Outgoing { to: rx.local_addr().unwrap(), bytes: Bytes::from_static(b"x"), origin: None }];
        assert_eq!(send_batch(&tx, &out).0, 1);
        let mut bufs = RecvBatch::new(64);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.is_empty() {
            match recv_batch(&rx, &mut bufs) {
                Ok(n) => got.extend((0..n).filter_map(|i| received(&bufs, i, &mut KeptBuffer::default()))),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
            assert!(std::time::Instant::now() < deadline, "no datagram");
        }
        let after = herald_sys::realtime_ns();
        let ts = got[0].kernel_ns.expect("SCM_TIMESTAMPNS");
        assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
        assert_eq!(got[0].drops, None, "no drops yet, so no SO_RXQ_OVFL message");
        assert_eq!((got[0].src, &got[0].bytes[..], got[0].truncated), (tx.local_addr().unwrap(), &b"x"[..], false));
    }
}
