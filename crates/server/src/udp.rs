//! The server's side of batched UDP I/O: datagrams as the dispatcher sends them
//! ([`Outgoing`]; received ones are read from their slots, `udp_receiver::take_datagram`). The system calls themselves - recvmmsg(2) and sendmmsg(2), one call for up to
//! [`BATCH`](herald_sys::BATCH) datagrams (seed 000: per-datagram syscalls and socket-lock
//! contention dominate a UDP SIP server's cost) - live in herald-sys. A receiver thread blocks
//! in recvmmsg itself (module `udp_receiver`): no readiness event loop, so a wake-up costs one
//! receive call instead of epoll_wait, recvmmsg and a final EAGAIN.

use bytes::Bytes;
pub(crate) use herald_sys::{enable_rx_metadata, wait_writable};
use herald_sys::{Outbound, RecvBatch, SendBatch, Wait};
use std::io;
use std::net::{SocketAddr, UdpSocket};

/// Reads up to [`BATCH`](herald_sys::BATCH) datagrams into `b`'s slots (`RecvBatch::get`).
/// Returns how many were read. On a blocking socket it waits for the first one, up to the
/// socket's SO_RCVTIMEO, and then takes only what is already queued; on a non-blocking one it
/// returns at once. `WouldBlock` when there were none.
pub(crate) fn recv_batch(sock: &UdpSocket, b: &mut RecvBatch) -> io::Result<usize> {
    b.recv(sock, Wait::IfBlocking)
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

/// [`send_batch`] from `headers`, prepared once and kept by a sender that flushes often (an
/// [`Egress`](crate::egress::Egress)).
pub(crate) fn send_batch_with(
    headers: &mut SendBatch,
    sock: &UdpSocket,
    items: &[Outgoing],
) -> (usize, Option<io::Error>) {
    headers.send(sock, items, Wait::Never)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                Ok(n) => got.extend(
                    (0..n)
                        .filter_map(|i| bufs.get(i))
                        .map(|d| (d.source, d.payload.to_vec(), d.truncated, d.kernel_ns, d.drops)),
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
            assert!(std::time::Instant::now() < deadline, "no datagram");
        }
        let after = herald_sys::realtime_ns();
        let (src, payload, truncated, kernel_ns, drops) = &got[0];
        let ts = kernel_ns.expect("SCM_TIMESTAMPNS");
        assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
        assert_eq!(*drops, None, "no drops yet, so no SO_RXQ_OVFL message");
        assert_eq!((*src, &payload[..], *truncated), (Some(tx.local_addr().unwrap()), &b"x"[..], false));
    }
}
