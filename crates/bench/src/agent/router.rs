//! One UDP socket, several event loops (`--single-socket --threads N`): the load of one peer
//! 4-tuple (one address and port, as from an SBC or trunk) from more than one core.
//!
//! Why a router: with one socket the kernel hands a datagram to whichever thread reads it, and
//! SO_REUSEPORT does not help (it spreads by the 4-tuple's hash, and every datagram from the
//! proxy carries the same 4-tuple, so all of them would reach one socket). So one thread reads
//! the socket ([`Router::run`]) and hands each message to the event loop that owns it, by the run
//! id every one of our Call-IDs carries (`c{slot}.{generation}.{run}@bench` for calls,
//! `r{user}.{run}@bench` for registrations, [`run_of`]): an event loop's calls, its callee's
//! dialogs for them and its registrations all carry its own run id. Each event loop sends from
//! the shared socket itself (sendmmsg on one descriptor from several threads is safe; each
//! datagram is sent whole) and reads what the router posted to its [`Mailbox`], whose wake-up
//! socket it polls like any other.
//!
//! Bounded: a mailbox holds at most [`MAILBOX_LIMIT`] messages; past it the router drops what
//! it reads for that loop, as a full socket buffer would (the transactions' retransmissions
//! recover, or the calls fail and are counted).

use super::find::find_byte;
use super::framing::Incoming;
use bytes::BytesMut;
use herald_sys::{RecvBatch, Wait};
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Messages waiting for one event loop at most.
pub const MAILBOX_LIMIT: usize = 65_536;

/// Receive slot size: the largest UDP payload.
const SLOT: usize = 65_535;

/// What the router posted for one event loop, and the socket pair that wakes it.
pub struct Mailbox {
    queue: Mutex<Vec<Incoming>>,
    /// Written by the router when the queue stops being empty.
    bell: UnixDatagram,
    /// Polled and drained by the event loop.
    ear: UnixDatagram,
    /// Messages dropped because the queue was full.
    pub dropped: AtomicU64,
}

impl Mailbox {
    pub fn new() -> io::Result<Mailbox> {
        let (bell, ear) = UnixDatagram::pair()?;
        bell.set_nonblocking(true)?;
        ear.set_nonblocking(true)?;
        Ok(Mailbox { queue: Mutex::new(Vec::new()), bell, ear, dropped: AtomicU64::new(0) })
    }

    /// The descriptor that is readable while messages wait.
    pub fn fd(&self) -> RawFd {
        self.ear.as_raw_fd()
    }

    /// Appends `items` (emptying it), up to the limit; rings when the queue was empty.
    fn post(&self, items: &mut Vec<Incoming>) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let was_empty = queue.is_empty();
        let room = MAILBOX_LIMIT.saturating_sub(queue.len());
        if items.len() > room {
            self.dropped.fetch_add((items.len() - room) as u64, Ordering::Relaxed);
            items.truncate(room);
        }
        queue.append(items);
        drop(queue);
        if was_empty {
            // A full bell buffer already holds a ring: nothing is lost by a failed send.
            let _ = self.bell.send(&[1]);
        }
    }

    /// Moves every waiting message into `out` and silences the bell.
    pub fn take(&self, out: &mut Vec<Incoming>) {
        let mut ring = [0u8; 64];
        while self.ear.recv(&mut ring).is_ok() {}
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut queue);
    }
}

/// The reader of the shared socket.
pub struct Router {
    socket: UdpSocket,
    /// Each event loop's run id and mailbox; a message no run id names goes to the first.
    owners: Vec<(u32, Arc<Mailbox>)>,
    stop: AtomicBool,
}

impl Router {
    pub fn new(socket: UdpSocket, owners: Vec<(u32, Arc<Mailbox>)>) -> Router {
        Router { socket, owners, stop: AtomicBool::new(false) }
    }

    /// Ends [`Router::run`] within its poll interval.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Reads the socket and posts every datagram to its owner until stopped.
    pub fn run(&self) {
        let mut recv = RecvBatch::new(SLOT);
        let mut posts: Vec<Vec<Incoming>> = self.owners.iter().map(|_| Vec::new()).collect();
        while !self.stop.load(Ordering::Relaxed) {
            let mut fds = [libc::pollfd { fd: self.socket.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            if herald_sys::poll(&mut fds, Duration::from_millis(50)).unwrap_or(0) == 0 {
                continue;
            }
            while let Ok(n) = recv.recv(&self.socket, Wait::Never) {
                let mut batch = BytesMut::with_capacity(n * 1024);
                for d in recv.iter() {
                    let Some(from) = d.source else { continue };
                    let owner = self.owner(d.payload);
                    batch.extend_from_slice(d.payload);
                    posts[owner].push(Incoming { bytes: batch.split().freeze(), from, kernel_ns: d.kernel_ns });
                }
                if n < herald_sys::BATCH {
                    break;
                }
            }
            for (items, (_, mailbox)) in posts.iter_mut().zip(&self.owners) {
                if !items.is_empty() {
                    mailbox.post(items);
                }
            }
        }
    }

    /// The event loop that owns a datagram: the one whose run id its Call-ID carries.
    fn owner(&self, payload: &[u8]) -> usize {
        let run = call_id_of(payload).and_then(run_of);
        run.and_then(|run| self.owners.iter().position(|(id, _)| *id == run)).unwrap_or(0)
    }
}

/// The Call-ID of a message (`Call-ID` or `i`, any case; RFC 3261 §7.3.3, §20.8), found by
/// walking its header lines: only a routing key here (the loop that gets the message parses
/// it), so a message without one simply goes to the first loop.
fn call_id_of(message: &[u8]) -> Option<&str> {
    let mut pos = find_byte(message, 0, b'\n')? + 1;
    while !message[pos..].starts_with(b"\r\n") {
        let end = find_byte(message, pos, b'\n')?;
        let line = &message[pos..end];
        let value = match line.iter().position(|&b| b == b':') {
            Some(7) if line[..7].eq_ignore_ascii_case(b"Call-ID") => Some(&line[8..]),
            Some(1) if line[0].eq_ignore_ascii_case(&b'i') => Some(&line[2..]),
            _ => None,
        };
        if let Some(value) = value {
            return std::str::from_utf8(value).ok().map(|v| v.trim_matches([' ', '\t', '\r']));
        }
        pos = end + 1;
    }
    None
}

/// The run id of one of our Call-IDs: the last dot-separated field before `@bench`, in hex.
pub fn run_of(call_id: &str) -> Option<u32> {
    let local = call_id.strip_suffix("@bench")?;
    let (_, run) = local.rsplit_once('.')?;
    u32::from_str_radix(run, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::net::SocketAddr;

    #[test]
    fn the_call_id_is_found_in_either_form() {
        assert_eq!(call_id_of(b"SIP/2.0 200 OK\r\nVia: x\r\nCall-ID: a@b \r\n\r\n"), Some("a@b"));
        assert_eq!(call_id_of(b"BYE sip:x SIP/2.0\r\ncall-id:a@b\r\n\r\n"), Some("a@b"));
        assert_eq!(call_id_of(b"BYE sip:x SIP/2.0\r\nI: c\r\n\r\nCall-ID: body"), Some("c"));
        assert_eq!(call_id_of(b"BYE sip:x SIP/2.0\r\nVia: x\r\n\r\nCall-ID: in the body"), None);
        assert_eq!(call_id_of(b"BYE sip:x SIP/2.0\r\nVia: x"), None);
        assert_eq!(call_id_of(b""), None);
    }

    #[test]
    fn call_ids_name_their_run() {
        assert_eq!(run_of("c12.3.ff@bench"), Some(0xff));
        assert_eq!(run_of("r4.1a2b@bench"), Some(0x1a2b));
        assert_eq!(run_of("c12.3.ff@elsewhere"), None);
        assert_eq!(run_of("nodot@bench"), None);
        assert_eq!(run_of("c1.2.xyz@bench"), None);
    }

    #[test]
    fn messages_go_to_the_loop_whose_run_id_they_carry() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let boxes: Vec<Arc<Mailbox>> = (0..3).map(|_| Arc::new(Mailbox::new().unwrap())).collect();
        let owners = vec![(0xa, boxes[0].clone()), (0xb, boxes[1].clone()), (0xc, boxes[2].clone())];
        let router = Router::new(socket.try_clone().unwrap(), owners);
        let msg = |call_id: &str| format!("SIP/2.0 200 OK\r\nCall-ID: {call_id}\r\nCSeq: 1 BYE\r\n\r\n");
        assert_eq!(router.owner(msg("c1.0.b@bench").as_bytes()), 1);
        assert_eq!(router.owner(msg("r7.c@bench").as_bytes()), 2);
        // Not ours, not a message: the first loop counts it as a stray.
        assert_eq!(router.owner(msg("someone-else").as_bytes()), 0);
        assert_eq!(router.owner(b"garbage"), 0);
        // Through the socket: read, routed, posted, and the owner's bell rings.
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to: SocketAddr = socket.local_addr().unwrap();
        for id in ["c1.0.b@bench", "c2.0.b@bench", "c3.0.c@bench"] {
            peer.send_to(msg(id).as_bytes(), to).unwrap();
        }
        std::thread::scope(|s| {
            s.spawn(|| router.run());
            let mut got = Vec::new();
            for _ in 0..200 {
                let mut fds = [libc::pollfd { fd: boxes[1].fd(), events: libc::POLLIN, revents: 0 }];
                herald_sys::poll(&mut fds, Duration::from_millis(10)).unwrap();
                boxes[1].take(&mut got);
                if got.len() == 2 {
                    break;
                }
            }
            router.stop();
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].bytes, Bytes::from(msg("c1.0.b@bench")));
            assert_eq!(got[0].from, peer.local_addr().unwrap());
        });
        let mut third = Vec::new();
        boxes[2].take(&mut third);
        assert_eq!(third.len(), 1);
        let mut none = Vec::new();
        boxes[0].take(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn a_full_mailbox_drops_and_counts() {
        let mailbox = Mailbox::new().unwrap();
        let from: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let one = || Incoming { bytes: Bytes::from_static(b"x"), from, kernel_ns: None };
        let mut items: Vec<Incoming> = (0..MAILBOX_LIMIT + 5).map(|_| one()).collect();
        mailbox.post(&mut items);
        assert_eq!(mailbox.dropped.load(Ordering::Relaxed), 5);
        let mut out = Vec::new();
        mailbox.take(&mut out);
        assert_eq!(out.len(), MAILBOX_LIMIT);
    }
}
