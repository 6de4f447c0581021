//! A UDP endpoint of the generator: a non-blocking socket read with recvmmsg(2) and written with
//! sendmmsg(2) in batches, or fed by the router of a socket several event loops share.

use super::Incoming;
use crate::agent::router::Mailbox;
use bytes::{Bytes, BytesMut};
use herald_sys::{RecvBatch, Wait, BATCH};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

/// Queued datagrams beyond which sends fail instead of buffering more.
pub(super) const MAX_UDP_QUEUE: usize = 65_536;
/// Room beyond which a UDP endpoint's receive buffer is not kept for the next batch (a full
/// batch of 1-KiB datagrams takes 32 KiB; one of the largest datagrams, 2 MiB).
const MAX_KEPT_RECEIVE_BUFFER: usize = 1 << 20;

/// A UDP socket bound to `addr`, non-blocking, with large kernel buffers so that a burst does
/// not overflow the receive queue of the generator itself, and kernel receive stamps.
pub fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    let s2 = socket2::SockRef::from(&socket);
    let _ = s2.set_recv_buffer_size(8 << 20);
    let _ = s2.set_send_buffer_size(8 << 20);
    // Kernel receive stamps keep latencies exact although the loop reads a socket up to one
    // scheduling quantum after a datagram arrived (see the event loop's `step`).
    let _ = herald_sys::enable_rx_timestamps(&socket);
    Ok(socket)
}

pub struct UdpEndpoint {
    pub(super) socket: UdpSocket,
    pub(super) local: SocketAddr,
    pub(super) queue: Vec<(Bytes, SocketAddr)>,
    pub(super) input: Input,
    /// The buffer received datagrams are copied into and split from, kept from batch to batch:
    /// the messages of a batch are handled and dropped before the next one is read, so
    /// `reserve` finds the buffer unshared again and reuses it where a new one cost an
    /// allocation, and the first split of it a second one, per batch (~400 instructions a
    /// call at 50 calls/s, where a batch holds one or two datagrams; callgrind).
    pub(super) received: BytesMut,
}

/// Where a UDP endpoint's input comes from.
pub(super) enum Input {
    /// Its own reads of the socket.
    Socket(RecvBatch),
    /// What the router of a socket shared by several event loops posted for this one.
    Mailbox(Arc<Mailbox>),
}

impl UdpEndpoint {
    pub(super) fn flush(&mut self) {
        let mut sent_total = 0;
        loop {
            let (n, err) = herald_sys::send_batch(&self.socket, &self.queue[sent_total..], Wait::Never);
            sent_total += n;
            let Some(err) = err else { break };
            match err.kind() {
                io::ErrorKind::WouldBlock => break, // retried when poll says writable
                io::ErrorKind::Interrupted => continue,
                // A datagram the kernel refuses (e.g. ICMP-reported unreachable on a previous
                // send): drop it; the transaction timers account for the loss.
                _ => sent_total += 1,
            }
        }
        self.queue.drain(..sent_total);
    }

    /// Drains the socket: recvmmsg until a batch comes back less than full (then the queue is
    /// empty, so no extra call just to see EAGAIN).
    pub(super) fn receive(&mut self, out: &mut Vec<Incoming>) {
        let recv = match &mut self.input {
            Input::Socket(recv) => recv,
            Input::Mailbox(mailbox) => return mailbox.take(out),
        };
        loop {
            // EAGAIN (drained) or an error such as ECONNREFUSED from ICMP: try later.
            let Ok(n) = recv.recv(&self.socket, Wait::Never) else { return };
            // The batch's payloads copied into one buffer that each message is split from: no
            // allocation per datagram, and none per batch while the buffer is not shared (see
            // `received`). Sized by a guess (walking the batch once more to add up the lengths
            // parses its control messages again); a batch that outgrows it gets one more.
            let batch = &mut self.received;
            if batch.capacity() > MAX_KEPT_RECEIVE_BUFFER {
                // A burst of large datagrams grew it: not held for the rest of the run.
                *batch = BytesMut::new();
            }
            batch.reserve(n * 1024);
            for d in recv.iter() {
                if let Some(from) = d.source {
                    batch.extend_from_slice(d.payload);
                    out.push(Incoming { bytes: batch.split().freeze(), from, kernel_ns: d.kernel_ns });
                }
            }
            if n < BATCH {
                return;
            }
        }
    }
}
