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
use herald_sip::{Framing, Message, ParseError};
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

/// What one framing step produced. A return value that lives for one call: its size does not
/// matter, and boxing the message would cost an allocation per message.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// A ping, keep-alive or answered/dropped message: look for the next frame.
    More,
    NeedBytes,
    /// The framing is lost or a fatal error was answered: flush and close.
    Close,
    /// A message for the worker (its handler here, or its loop through the inbox).
    Deliver(Message),
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
        let from = peer(conn);
        handler::with_here(worker, |here| self.deliver(shared, worker, conn, &from, local, codec, now, here))
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
        from: &Peer,
        local: SocketAddr,
        codec: &mut C,
        now: Instant,
        mut here: Option<&mut dyn Handler>,
    ) -> Result<Option<InboxWait<'a>>, End> {
        let inbox = &shared.inboxes[worker];
        // Messages handed to the handler here, whose UDP output waits for a flush.
        let mut handled_here = false;
        let wait = loop {
            // Content-Length framing cuts nothing from no bytes: after the last message of a read,
            // the loop ends without asking (a codec with frames of its own may hold an empty one).
            if C::FRAMING == Framing::Stream && self.rbuf.is_empty() {
                break None;
            }
            let frame = codec.next_frame(&mut self.rbuf, &shared.limits, &mut self.progress);
            // To this worker's loop, in order (the connection's messages are handled by this
            // worker only). Streams wait for room (back-pressure) instead of dropping; the wait
            // is boxed, so that the task of every connection carries neither it nor the message.
            match next_message(shared, worker, conn, from, frame, &self.rbuf, C::FRAMING, now) {
                Step::More => continue,
                Step::NeedBytes => break None,
                Step::Close => {
                    self.closing = true;
                    break None;
                }
                Step::Deliver(msg) => {
                    // Module `handler`: nothing waits in the inbox, and not a new request (with
                    // overload control on). The inbox's item is built only for the inbox: a
                    // message handed here is moved once less (a copy of ~200 bytes, callgrind,
                    // issue 21).
                    if let Some(h) = here.as_deref_mut() {
                        if handler::may_skip_inbox(inbox, &msg, shared.config.overload.enabled) {
                            h.handle(*from, local, msg, now);
                            handled_here = true;
                            continue;
                        }
                    }
                    match inbox.try_send(InboxMessage { from: *from, local, msg }) {
                        Ok(()) => continue,
                        Err(mpsc::error::TrySendError::Full(item)) => {
                            break Some(Box::pin(inbox.send(item)) as InboxWait)
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            if let (true, Some(h)) = (handled_here, here) {
                                h.flush();
                            }
                            return Err(End::PeerClosed);
                        }
                    }
                }
            }
        };
        if let (true, Some(h)) = (handled_here, here) {
            h.flush();
        }
        Ok(wait)
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

/// Deals with one frame cut off the read buffer (`rbuf`: what is left of it), or with the
/// framing error that stopped the cut (RFC 3261 §18.3, RFC 5626 §3.5.1): pings are answered
/// here, messages go through the runtime's ingress (module `ingress`).
#[allow(clippy::too_many_arguments)]
fn next_message(
    shared: &Shared,
    worker: usize,
    conn: &Conn,
    from: &Peer,
    frame: Result<Option<Cut>, ParseError>,
    rbuf: &[u8],
    framing: Framing,
    now: Instant,
) -> Step {
    let cap = shared.config.limits.tcp_write_queue_bytes;
    let arrival = match frame {
        Ok(Some(Cut::Parsed(msg))) => ingress::receive_parsed(shared, worker, msg, from),
        Ok(Some(Cut::Frame(Frame::Message(bytes)))) => ingress::receive(shared, worker, bytes, from, framing, false),
        Ok(Some(Cut::Frame(Frame::Ping))) => {
            // RFC 5626 §3.5.1: a double-CRLF ping gets a single-CRLF pong.
            shared.stats.workers[worker].tcp_pings.bump();
            let _ = conn.push(Bytes::from_static(b"\r\n"), cap, now);
            return Step::More;
        }
        Ok(Some(Cut::Frame(Frame::KeepAlive))) => return Step::More,
        Ok(None) => return Step::NeedBytes,
        Err(e) => ingress::framing_lost(shared, worker, rbuf, &e, from),
    };
    match arrival {
        Arrival::Message(msg) => Step::Deliver(msg),
        Arrival::Answer { bytes, close } => {
            // On the connection's own write queue: the answer goes back the way it came.
            let _ = conn.push(bytes, cap, now);
            // A codec that frames messages itself (WebSocket) keeps its framing whatever one
            // message held: only a Content-Length stream loses it.
            if close && framing == Framing::Stream {
                Step::Close
            } else {
                Step::More
            }
        }
        Arrival::Dropped { close: true } => Step::Close,
        Arrival::Dropped { close: false } => Step::More,
    }
}
