//! The read side of a stream connection, the same for every codec (RFC 3261 §18.3): cut the
//! bytes read into messages, answer pings (RFC 5626 §3.5.1) and malformed messages, hand the
//! rest in order to the owning worker, and keep the deadline of a message that is not whole yet.

use super::codec::Codec;
use super::handler::{self, Handler};
use crate::conns::Conn;
use crate::ingress::{self, Arrival};
use crate::runtime::InboxMessage;
use crate::shared::Shared;
use crate::stats::Bump;
use bytes::{Bytes, BytesMut};
use herald_core::Peer;
use herald_sip::framing::{Cut, Frame, Progress};
use herald_sip::{Framing, Message};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::mpsc;

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum End {
    PeerClosed,
    Idle,
    /// A message began but did not arrive whole in time (slow sender).
    Incomplete,
    Overflow,
    FramingLost,
    /// The codec's handshake (TLS) failed or did not finish in time.
    Handshake(String),
    Error(io::Error),
}

/// What one framing step asks of the read loop. The message itself is handed on where it is
/// classified ([`Sink::take`]): returning it through this step and handing it on from the loop
/// moved its 88 bytes twice more per message, with a return value of a hundred bytes (~30
/// instructions a message, callgrind, issue 21).
enum Step<'a> {
    /// A ping, keep-alive, answered/dropped or delivered message: look for the next frame.
    More,
    NeedBytes,
    /// The framing is lost or a fatal error was answered: flush and close.
    Close,
    /// The worker's inbox is full: the wait for room, with the message.
    Wait(InboxWait<'a>),
    /// The worker's inbox is closed (shutting down).
    Gone,
}

/// The read state of one connection.
pub(crate) struct Framer {
    /// Bytes read and not yet framed. Empty (unallocated) on an idle connection.
    pub rbuf: BytesMut,
    /// What the framing learnt of the partial message at the front of `rbuf`.
    progress: Progress,
    /// When the partial message at the front of `rbuf` must be complete.
    partial_at: Option<Instant>,
    /// The framing is lost: the connection flushes its answer and closes.
    pub closing: bool,
    incomplete: Duration,
}

impl Framer {
    pub(crate) fn new(shared: &Shared) -> Framer {
        Framer {
            rbuf: BytesMut::new(),
            progress: Progress::default(),
            partial_at: None,
            closing: false,
            incomplete: Duration::from_secs(shared.config.limits.tcp_incomplete_message_timeout_s),
        }
    }

    /// The earlier of the idle deadline and the incomplete-message deadline.
    pub(crate) fn deadline(&self, idle_at: Instant) -> Instant {
        self.partial_at.map_or(idle_at, |p| p.min(idle_at))
    }

    /// A message has been arriving for longer than `tcp_incomplete_message_timeout_s`: a slow
    /// sender (slowloris) trickling a byte now and then resets the idle deadline but never this.
    pub(crate) fn timed_out(&self, now: Instant) -> bool {
        self.partial_at.is_some_and(|t| t <= now)
    }

    /// Frames and delivers what the last read appended to `rbuf`, with `deliver` (the
    /// connection's [`Framer::deliver_here`]). `Err(Stop::End)` ends the connection;
    /// `Err(Stop::Full)`: the worker's inbox is full, and [`Framer::consume_rest`] waits for room
    /// and delivers the rest.
    ///
    /// Not async: a read whose messages all go to the handler or into the inbox at once (nearly
    /// all) builds no future, whose arguments and state the connection's task otherwise wrote on
    /// every read (~40 instructions a read, callgrind, issue 21).
    pub(crate) fn consume<'a>(
        &mut self,
        deliver: impl FnOnce(&mut Framer) -> Result<Option<InboxWait<'a>>, End>,
    ) -> Result<(), Stop<'a>> {
        let before = self.rbuf.len();
        match deliver(self) {
            Ok(None) => {
                self.settle(before);
                Ok(())
            }
            Ok(Some(wait)) => Err(Stop::Full(Backlog { wait, before })),
            Err(end) => Err(Stop::End(end)),
        }
    }

    /// [`Framer::consume`] after it found the inbox full: waits for room, as often as it takes,
    /// and delivers the rest with `deliver` (the connection's [`Framer::deliver_here`]).
    pub(crate) async fn consume_rest<'a>(
        &mut self,
        backlog: Backlog<'a>,
        mut deliver: impl FnMut(&mut Framer) -> Result<Option<InboxWait<'a>>, End>,
    ) -> Result<(), End> {
        let Backlog { mut wait, before } = backlog;
        loop {
            if wait.await.is_err() {
                return Err(End::PeerClosed);
            }
            match deliver(self)? {
                Some(next) => wait = next,
                None => break,
            }
        }
        self.settle(before);
        Ok(())
    }

    /// [`Framer::deliver`] with the worker's handler on this thread; `now`: when the bytes were
    /// read (the instant their messages are handled at and their answers written). The handler
    /// is looked up once per read, not once per message and again for the flush (a
    /// thread-local's borrow each, ~50 instructions a message, callgrind, issue 21); never held
    /// across a wait.
    pub(crate) fn deliver_here<'a, C: Codec>(
        &mut self,
        shared: &'a Shared,
        worker: usize,
        conn: &Conn,
        local: SocketAddr,
        codec: &mut C,
        now: Instant,
    ) -> Result<Option<InboxWait<'a>>, End> {
        handler::with_here(worker, |here| self.deliver(shared, worker, conn, peer(conn), local, codec, now, here))
    }

    /// After a read's messages are delivered: an idle connection drops its buffer, and a
    /// message left partial gets its deadline (`before`: the buffer's length after the read).
    fn settle(&mut self, before: usize) {
        if self.rbuf.is_empty() || self.closing {
            // Idle connections keep no buffer.
            self.rbuf = BytesMut::new();
            self.progress = Progress::default();
            self.partial_at = None;
        } else if self.partial_at.is_none() || self.rbuf.len() < before {
            // A partial message is waiting: it began with this read, or right after the
            // message(s) this read completed (read the clock again: handing those to a full
            // inbox may have waited).
            self.partial_at = Some(Instant::now() + self.incomplete);
        }
    }

    /// Cuts and delivers messages off `rbuf` until it needs more bytes, the framing is lost, or
    /// the worker's inbox is full: then the wait for room, to be awaited before the next call.
    /// `here`: the worker's handler on this thread (module `handler`), if installed; what it
    /// was handed is flushed before this returns.
    #[allow(clippy::too_many_arguments)]
    fn deliver<'a, C: Codec>(
        &mut self,
        shared: &'a Shared,
        worker: usize,
        conn: &Conn,
        from: Peer,
        local: SocketAddr,
        codec: &mut C,
        now: Instant,
        here: Option<&mut dyn Handler>,
    ) -> Result<Option<InboxWait<'a>>, End> {
        let mut sink = Sink {
            inbox: &shared.inboxes[worker],
            here,
            handled: false,
            overload: shared.config.overload.enabled,
            from,
            local,
            now,
        };
        let wait = loop {
            // Content-Length framing cuts nothing from no bytes: after the last message of a read,
            // the loop ends without asking (a codec with frames of its own may hold an empty one).
            if C::FRAMING == Framing::Stream && self.rbuf.is_empty() {
                break None;
            }
            match next_message(shared, worker, conn, codec, &mut self.rbuf, &mut self.progress, &mut sink) {
                Step::More => continue,
                Step::NeedBytes => break None,
                Step::Close => {
                    self.closing = true;
                    break None;
                }
                Step::Wait(wait) => break Some(wait),
                Step::Gone => {
                    sink.flush();
                    return Err(End::PeerClosed);
                }
            }
        };
        sink.flush();
        Ok(wait)
    }
}

/// Where the messages of one read go, in order (the connection's messages are handled by this
/// worker only): to the worker's handler on this thread while that keeps every guarantee of the
/// inbox (module `handler`), else to its inbox. Streams wait for room in a full inbox
/// (back-pressure) instead of dropping; the wait is boxed, so that the task of every connection
/// carries neither it nor the message.
struct Sink<'h, 'a> {
    inbox: &'a mpsc::Sender<InboxMessage>,
    /// The worker's handler on this thread, if installed.
    here: Option<&'h mut dyn Handler>,
    /// Messages were handed to `here`, whose UDP output waits for a flush.
    handled: bool,
    /// `[overload] enabled`.
    overload: bool,
    from: Peer,
    local: SocketAddr,
    /// When the bytes were read.
    now: Instant,
}

impl<'a> Sink<'_, 'a> {
    /// Hands `msg` on: [`Step::More`], or the wait for room in a full inbox, or [`Step::Gone`].
    /// Inline: called from one place, once per message.
    #[inline]
    fn take(&mut self, msg: Message) -> Step<'a> {
        // Module `handler`: nothing waits in the inbox, and not a new request (with overload
        // control on). The inbox's item is built only for the inbox: a message handed here is
        // moved once less (a copy of ~200 bytes, callgrind, issue 21).
        if let Some(h) = self.here.as_deref_mut() {
            if handler::may_skip_inbox(self.inbox, &msg, self.overload) {
                h.handle(self.from, self.local, msg, self.now);
                self.handled = true;
                return Step::More;
            }
        }
        match self.inbox.try_send(InboxMessage { from: self.from, local: self.local, msg }) {
            Ok(()) => Step::More,
            Err(mpsc::error::TrySendError::Full(item)) => Step::Wait(Box::pin(self.inbox.send(item))),
            Err(mpsc::error::TrySendError::Closed(_)) => Step::Gone,
        }
    }

    /// Sends what the handler's messages queued (before the task waits for anything).
    fn flush(&mut self) {
        if let (true, Some(h)) = (self.handled, self.here.as_deref_mut()) {
            h.flush();
        }
    }
}

/// Why [`Framer::consume`] stopped short.
pub(crate) enum Stop<'a> {
    /// The connection ends.
    End(End),
    /// The worker's inbox is full: [`Framer::consume_rest`] goes on.
    Full(Backlog<'a>),
}

/// What [`Framer::consume_rest`] goes on from: the wait for room in the inbox, and the read
/// buffer's length after the read.
pub(crate) struct Backlog<'a> {
    wait: InboxWait<'a>,
    before: usize,
}

/// A connection's wait for room in its worker's inbox (back-pressure), with the message.
pub(crate) type InboxWait<'a> =
    Pin<Box<dyn Future<Output = Result<(), mpsc::error::SendError<InboxMessage>>> + Send + 'a>>;

/// The connection's peer, as messages from it are handed on.
fn peer(conn: &Conn) -> Peer {
    Peer { transport: conn.transport, addr: conn.peer, conn: Some(conn.id) }
}

/// Cuts one frame off the read buffer and deals with it, or with the framing error that stopped
/// the cut (RFC 3261 §18.3, RFC 5626 §3.5.1): pings are answered here, messages go through the
/// runtime's ingress (module `ingress`) to `sink`. The frame is cut here, not handed in: a
/// message then goes from the cut to its classification without a copy between.
fn next_message<'a, C: Codec>(
    shared: &Shared,
    worker: usize,
    conn: &Conn,
    codec: &mut C,
    rbuf: &mut BytesMut,
    progress: &mut Progress,
    sink: &mut Sink<'_, 'a>,
) -> Step<'a> {
    let from = &sink.from;
    let cap = shared.config.limits.tcp_write_queue_bytes;
    let arrival = match codec.next_frame(rbuf, &shared.limits, progress) {
        Ok(Some(Cut::Parsed(msg))) => ingress::receive_parsed(shared, worker, msg, from),
        Ok(Some(Cut::Frame(Frame::Message(bytes)))) => ingress::receive(shared, worker, bytes, from, C::FRAMING, false),
        Ok(Some(Cut::Frame(Frame::Ping))) => {
            // RFC 5626 §3.5.1: a double-CRLF ping gets a single-CRLF pong.
            shared.stats.workers[worker].tcp_pings.bump();
            let _ = conn.push(Bytes::from_static(b"\r\n"), cap, sink.now);
            return Step::More;
        }
        Ok(Some(Cut::Frame(Frame::KeepAlive))) => return Step::More,
        Ok(None) => return Step::NeedBytes,
        Err(e) => ingress::framing_lost(shared, worker, rbuf, &e, from),
    };
    match arrival {
        Arrival::Message(msg) => sink.take(msg),
        Arrival::Answer { bytes, close } => {
            // On the connection's own write queue: the answer goes back the way it came.
            let _ = conn.push(bytes, cap, sink.now);
            // A codec that frames messages itself (WebSocket) keeps its framing whatever one
            // message held: only a Content-Length stream loses it.
            if close && C::FRAMING == Framing::Stream {
                Step::Close
            } else {
                Step::More
            }
        }
        Arrival::Dropped { close: true } => Step::Close,
        Arrival::Dropped { close: false } => Step::More,
    }
}
