//! Batched receive: one recvmmsg(2) for up to [`BATCH`] datagrams, into slots that are allocated
//! once and reused for every call.

use crate::batch::{Wait, BATCH};
use crate::cmsg::{self, CONTROL_BYTES};
use crate::cvt::cvt;
use crate::sockaddr;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};

/// The receive slots of one reader, reused for every batch: the payload slots, the source
/// address and control buffers, and the headers that point at them. Nothing is allocated or
/// zeroed per call; a call only re-arms the headers (lengths, flags). Building and
/// zeroing these ~8.5 KB per call instead cost the bench generator more instructions than
/// parsing the messages it read (callgrind: 24k per call).
pub struct RecvBatch {
    /// Boxed: the headers point into it, so it must not move when the batch does (and its
    /// ~10 KB are not copied then either).
    slots: Box<Slots>,
    /// `BATCH` payload slots of `slot` bytes each.
    data: Vec<u8>,
    slot: usize,
    /// Ask for source addresses and control messages (false: payloads only).
    meta: bool,
    /// Datagrams the last call read.
    len: usize,
    /// The headers from here on are armed: the kernel wrote none of them since `rearm` last
    /// reset them (see [`RecvBatch::rearm`]).
    armed_from: usize,
}

struct Slots {
    names: [libc::sockaddr_storage; BATCH],
    control: [[u64; CONTROL_BYTES / 8]; BATCH],
    iov: [libc::iovec; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

// SAFETY: the raw pointers inside `iov` and `hdrs` (which make the type !Send by default) point
// only into this RecvBatch's own heap buffers and are never dereferenced by Rust code; the batch
// owns everything it points at, so it may move between threads like the buffers themselves.
unsafe impl Send for RecvBatch {}

/// One datagram of the last batch, borrowed from its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// What was read: at most the slot size.
    pub payload: &'a [u8],
    /// Who sent it; `None` for a payload-only batch or a non-IP source.
    pub source: Option<SocketAddr>,
    /// The datagram was longer than its slot; the rest was discarded by the kernel.
    pub truncated: bool,
    /// The address it was sent to (IP_PKTINFO / IPV6_PKTINFO: wildcard sockets whose option is
    /// on, see [`crate::reuseport_udp`]).
    pub local: Option<IpAddr>,
    /// When the kernel received it, CLOCK_REALTIME ns (SO_TIMESTAMPNS, when enabled).
    pub kernel_ns: Option<u64>,
    /// The socket's drop count when it was queued (SO_RXQ_OVFL; sent only once non-zero).
    pub drops: Option<u32>,
}

impl RecvBatch {
    /// Slots for `BATCH` datagrams of up to `slot` bytes each, with their source addresses and
    /// control messages. A slot one byte larger than the largest datagram accepted whole makes an
    /// over-limit datagram show as [`Datagram::truncated`].
    pub fn new(slot: usize) -> RecvBatch {
        RecvBatch::with_meta(slot, true)
    }

    /// Slots that receive payloads only: no source address, no control messages (what a
    /// measurement of the bare system call wants; [`RecvBatch::iter`] then yields `source: None`).
    pub fn payload_only(slot: usize) -> RecvBatch {
        RecvBatch::with_meta(slot, false)
    }

    fn with_meta(slot: usize, meta: bool) -> RecvBatch {
        // A zero-byte slot could read nothing, not even to say a datagram was truncated.
        let slot = slot.max(1);
        // sockaddr_storage, iovec and mmsghdr are plain old data: all-zero (null pointers, zero
        // lengths) is a valid value of each.
        let slots = Box::new(Slots {
            // SAFETY: plain old data, as above.
            names: unsafe { zeroed() },
            control: [[0; CONTROL_BYTES / 8]; BATCH],
            // SAFETY: plain old data, as above.
            iov: unsafe { zeroed() },
            // SAFETY: plain old data, as above.
            hdrs: unsafe { zeroed() },
        });
        let mut batch = RecvBatch { slots, data: vec![0; slot * BATCH], slot, meta, len: 0, armed_from: BATCH };
        batch.point();
        batch.rearm();
        batch
    }

    /// The slot size given at creation.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Reads up to [`BATCH`] datagrams with one recvmmsg(2), replacing the last batch. Returns
    /// how many; `WouldBlock` when there were none (with [`Wait::IfBlocking`] on a blocking
    /// socket: when SO_RCVTIMEO passed first).
    pub fn recv(&mut self, socket: &impl AsFd, wait: Wait) -> io::Result<usize> {
        self.recv_at_most(socket, BATCH, wait)
    }

    /// [`RecvBatch::recv`] of at most `max` datagrams (capped at [`BATCH`]).
    pub fn recv_at_most(&mut self, socket: &impl AsFd, max: usize, wait: Wait) -> io::Result<usize> {
        let max = max.min(BATCH);
        self.len = 0;
        self.rearm();
        let flags = match wait {
            Wait::Never => libc::MSG_DONTWAIT,
            Wait::IfBlocking => libc::MSG_WAITFORONE,
        };
        // SAFETY: the first `max` headers describe memory owned by `self` (`point`: one slot of
        // `slot` bytes, a sockaddr_storage and CONTROL_BYTES of control buffer each, or null
        // with the zero length `rearm` gave them), and `&mut self` keeps all of it alive and
        // unaliased until the call returns; the kernel writes at most the lengths the headers
        // give. The descriptor is borrowed, so it is open for the whole call. The arguments are
        // recvmmsg(2)'s, in its order (see "Raw system calls" in the crate docs).
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                libc::c_long::from(socket.as_fd().as_raw_fd()),
                self.slots.hdrs.as_mut_ptr(),
                max as libc::c_ulong,
                libc::c_long::from(flags),
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        let n = cvt(n).inspect_err(|_| {
            // Nothing was read, so nothing written back; the first header is re-armed all the
            // same, should a failure ever come after a partial write-back.
            self.armed_from = self.armed_from.max(1);
        })?;
        self.len = n as usize;
        // The kernel wrote back the headers of the datagrams it returned, and at most the one
        // after them (the receive that ended the call fails before writing anything back).
        self.armed_from = (self.len + 1).min(max);
        Ok(self.len)
    }

    /// Points every header at its slot, once: the payload slot (in `data`), the source address
    /// and control buffers and the iovec (in the box). Both are heap allocations that never move
    /// or resize while the batch lives, wherever the RecvBatch itself moves, and Rust code never
    /// writes to them through a reference afterwards (it only reads what the kernel wrote), so the
    /// pointers stay valid for every later call.
    fn point(&mut self) {
        let slot = self.slot;
        let Slots { names, control, iov, hdrs } = &mut *self.slots;
        for (v, chunk) in iov.iter_mut().zip(self.data.chunks_exact_mut(slot)) {
            *v = libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: slot };
        }
        let iov = iov.as_mut_ptr();
        for (i, ((h, name), ctrl)) in hdrs.iter_mut().zip(names.iter_mut()).zip(control.iter_mut()).enumerate() {
            let h = &mut h.msg_hdr;
            h.msg_iov = iov.wrapping_add(i);
            h.msg_iovlen = 1;
            if self.meta {
                h.msg_name = (name as *mut libc::sockaddr_storage).cast();
                h.msg_control = ctrl.as_mut_ptr().cast();
            }
        }
    }

    /// Resets what the kernel overwrites in a header it wrote back: the buffer lengths and the
    /// flags. (Only these: setting up all the pointers again on every call cost a measurable
    /// 15 ns per call.) Only the headers the last call may have written: the others are armed
    /// still. Re-arming all [`BATCH`] of them before every call cost ~100 instructions per
    /// receive, ~580 per proxied call whose six datagrams arrive one by one (callgrind,
    /// issue 21).
    ///
    /// A read of one datagram, the usual one at a moderate load, leaves two headers to re-arm:
    /// those are written straight, without the loop, whose set-up for a compiler-unrolled walk
    /// cost more than the six stores (~30 instructions a read, callgrind, issue 21).
    fn rearm(&mut self) {
        let (namelen, controllen) =
            if self.meta { (size_of::<libc::sockaddr_storage>(), CONTROL_BYTES) } else { (0, 0) };
        let arm = |h: &mut libc::mmsghdr| {
            h.msg_hdr.msg_namelen = namelen as libc::socklen_t;
            h.msg_hdr.msg_controllen = controllen as _;
            h.msg_hdr.msg_flags = 0;
        };
        let hdrs = &mut self.slots.hdrs;
        match self.armed_from {
            0 => {}
            1 => arm(&mut hdrs[0]),
            2 => {
                arm(&mut hdrs[0]);
                arm(&mut hdrs[1]);
            }
            n => hdrs[..n].iter_mut().for_each(arm),
        }
        self.armed_from = 0;
    }

    /// How many datagrams the last call read.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The datagrams of the last call, in the order the socket queued them.
    pub fn iter(&self) -> impl Iterator<Item = Datagram<'_>> + '_ {
        (0..self.len).map(move |i| self.datagram(i))
    }

    /// Datagram `i` of the last call (`None` past its end).
    ///
    /// Inline, as [`RecvBatch::datagram`]: built in the caller's frame, the datagram's fields go
    /// straight to where the caller keeps them; returned from a call of its own, the value was
    /// written out and copied again (~80 instructions a datagram, callgrind, issue 21).
    #[inline]
    pub fn get(&self, i: usize) -> Option<Datagram<'_>> {
        (i < self.len).then(|| self.datagram(i))
    }

    #[inline]
    fn datagram(&self, i: usize) -> Datagram<'_> {
        let h = &self.slots.hdrs[i];
        let len = (h.msg_len as usize).min(self.slot);
        let payload = &self.data[i * self.slot..i * self.slot + len];
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        if !self.meta {
            return Datagram { payload, source: None, truncated, local: None, kernel_ns: None, drops: None };
        }
        // SAFETY: the kernel filled header `i` in the last call (i < len): msg_control still
        // points at control[i], alive in `self`, and msg_controllen is what the kernel wrote,
        // at most CONTROL_BYTES; the buffer is u64-aligned, as cmsghdr needs.
        let meta = unsafe { cmsg::parse(&h.msg_hdr) };
        Datagram {
            payload,
            source: sockaddr::from_storage(&self.slots.names[i]),
            truncated,
            local: meta.local,
            kernel_ns: meta.kernel_ns,
            drops: meta.drops,
        }
    }
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("slot", &self.slot).field("meta", &self.meta).field("len", &self.len).finish()
    }
}
