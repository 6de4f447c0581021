//! herald-sys: every system call herald makes that the standard library does not wrap, behind a
//! small safe API. It is the one crate of the workspace whose own code holds `unsafe` for the
//! kernel; the others declare `#![forbid(unsafe_code)]` (quinn keeps its syscalls in quinn-udp
//! the same way).
//!
//! What it owns:
//! * Batched UDP I/O (seed 000: per-datagram system calls dominate a UDP SIP server's cost):
//!   [`RecvBatch`] reads up to [`BATCH`] datagrams with one recvmmsg(2), each with its source,
//!   the local address it was sent to (IP_PKTINFO), the kernel's receive time (SO_TIMESTAMPNS),
//!   the socket's drop count (SO_RXQ_OVFL) and whether it was truncated; [`SendBatch`] sends a
//!   slice of datagrams with as few sendmmsg(2) calls as possible, from headers prepared once
//!   ([`send_batch`]: from headers made for that call).
//! * Socket creation for workers that share a port: [`reuseport_udp`] and
//!   [`reuseport_tcp_listener`] (SO_REUSEPORT, forced buffer sizes, IP_PKTINFO on wildcards), and
//!   the receive options [`enable_rx_metadata`] / [`enable_rx_timestamps`].
//! * Waiting on descriptors: [`poll`], [`wait_writable`]; timers as descriptors ([`timerfd`]).
//! * The process: CPU and wall clocks ([`thread_cpu_ns`], [`realtime_ns`], [`rusage_self`],
//!   [`clock_ticks_per_second`]), memory ([`page_size`]), the host
//!   ([`hostname`], [`interface_addresses`]) and Ctrl-C ([`catch_sigint`], [`sigint_seen`]).
//! * The global allocator, [`Mimalloc`]: mimalloc called without its aligned entry points where
//!   the alignment asked for is at most a word (module `alloc`: its aligned path cost ~2.7k
//!   instructions per proxied call), and transparent huge pages off for the process
//!   ([`set_thp_disabled`], prctl(2); module `thp` says why).
//! * Another process's scheduling and limits, for `herald tune`: a task's EEVDF slice
//!   ([`set_task_slice_ns`], sched_setattr(2)) and RLIMIT_NOFILE ([`nofile_limit`], [`set_nofile_limit`]).
//!
//! Every `unsafe` block says why it is sound. The recurring arguments: the libc structs involved
//! (`iovec`, `mmsghdr`, `sockaddr_storage`, `timespec`, `rusage`, ...) are plain old data for
//! which all-zero is a valid value; every pointer handed to the kernel points into memory that a
//! Rust borrow keeps alive and unmoved for the duration of the call; and everything read back is
//! read within the length the kernel reported, with `read_unaligned` where the kernel's layout
//! does not promise Rust's alignment. Descriptors come in as [`std::os::fd::AsFd`] borrows, so a
//! call cannot outlive the socket it uses.
//!
//! Raw system calls: recvmmsg and sendmmsg, and a stream's [`recv`], [`send`] and [`writev`], go
//! through syscall(2), not libc's wrappers. Those are pthread cancellation points, which bracket
//! every call with `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`: ~45
//! instructions a call, ~550 per proxied UDP call with its 12 batch calls (callgrind, issue 21).
//! herald never cancels a thread, so the brackets buy nothing; the kernel sees the same call, and
//! errors come back through errno as before.
//!
//! Linux only (recvmmsg, SO_RXQ_OVFL, SO_RCVBUFFORCE, IP_PKTINFO), as herald is.

// Every unsafe block carries its SAFETY argument, and an unsafe fn's body is no blanket licence.
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

mod alloc;
mod batch;
mod clock;
mod cmsg;
mod cvt;
mod host;
mod poll;
mod recv;
mod reuseport;
mod send;
mod signal;
mod sockaddr;
mod sockopt;
mod stream;
mod task;
mod thp;
mod timerfd;

pub use alloc::{keep_full_pages, Mimalloc};
pub use batch::{Wait, BATCH};
pub use clock::{clock_ticks_per_second, monotonic_ns, realtime_ns, rusage_self, thread_cpu_ns};
pub use host::{hostname, interface_addresses, page_size};
pub use poll::{poll, wait_writable};
pub use recv::{Datagram, RecvBatch};
pub use reuseport::{reuseport_tcp_listener, reuseport_udp};
pub use send::{send_batch, Outbound, SendBatch};
pub use signal::{catch_sigint, sigint_seen};
pub use sockopt::{enable_rx_metadata, enable_rx_timestamps};
pub use stream::{recv, send, writev};
pub use task::{nofile_limit, set_nofile_limit, set_task_slice_ns};
pub use thp::set_thp_disabled;
pub use timerfd::{read_timerfd, set_timerfd, timerfd};
