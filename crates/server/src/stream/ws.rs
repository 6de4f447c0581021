//! SIP over WebSocket (RFC 7118) as a [`Codec`]: tungstenite's protocol layer driven sans-IO,
//! over another codec (plain TCP for `ws`, TLS for `wss`) that owns the socket's bytes.
//!
//! The glue: the inner codec's bytes collect in `input`; until the upgrade is answered they are
//! the HTTP request (module `ws_upgrade`), then they are frames that a `tungstenite`
//! [`WebSocketContext`] reads through an in-memory [`Pipe`] (unmasking, fragments, control
//! frames, the close handshake and the size limits are tungstenite's). It is handed whole
//! frames only ([`whole_frames`] reads their headers), so that a message that has begun to
//! arrive is visible here and held to `tcp_incomplete_message_timeout_s` like a TCP one. Each whole WebSocket
//! message is one SIP message (RFC 7118 §5), appended to the loop's SIP buffer with its length
//! remembered for [`Codec::next_frame`]. What tungstenite writes (pongs, close frames, our pings)
//! and the data frames of queued SIP messages (a header from tungstenite's [`FrameHeader`] and the
//! message itself, not copied) go out, in order, through the inner codec.
//!
//! Memory: an idle connection holds no input, no output queue and no lengths (all released when
//! empty); tungstenite's context keeps its read buffer ([`READ_BUFFER`] bytes) for the life of
//! the connection.

use super::codec::Codec;
use super::ws_upgrade::{self, Upgrade};
use crate::shared::Shared;
use crate::stats::{Bump, WorkerStats};
use bytes::{Buf, Bytes, BytesMut};
use herald_sip::framing::{Cut, Frame, Progress};
use herald_sip::{Framing, Limits, ParseError};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tungstenite::error::Error;
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, FrameHeader};
use tungstenite::protocol::{Role, WebSocketConfig, WebSocketContext};
use tungstenite::Message;

/// tungstenite's read buffer, allocated with the context and kept: it reads a frame in chunks
/// of this size from the in-memory input (a larger one only costs memory per connection).
const READ_BUFFER: usize = 512;
/// Frames waiting for the inner codec at most before [`Codec::write`] takes no more messages.
const OUT_MAX: usize = 64 * 1024;

/// One WebSocket connection, server side, over `inner`.
pub(crate) struct WsCodec<I> {
    inner: I,
    shared: Arc<Shared>,
    worker: usize,
    /// Bytes from the inner codec not yet taken (the upgrade request, then frames).
    input: BytesMut,
    /// `None` until the upgrade is accepted.
    ws: Option<WebSocketContext>,
    /// Bytes for the inner codec, in order; `out_skip` bytes of the front one already taken.
    out: VecDeque<Bytes>,
    out_skip: usize,
    /// What tungstenite wrote through the pipe, until moved to `out`.
    control: Vec<u8>,
    /// Lengths of the SIP messages appended to the loop's buffer and not yet cut.
    lens: VecDeque<usize>,
    /// The close handshake is done or a close frame was sent: nothing more is read or sent.
    finished: bool,
    /// When to ping (or, while `awaiting_pong`, when the peer is taken for dead).
    keepalive: Option<Instant>,
    awaiting_pong: bool,
    /// When the message that has begun to arrive (a partial frame in `input`, or a fragmented
    /// message) must be complete (`[limits] tcp_incomplete_message_timeout_s`, as over TCP).
    partial_until: Option<Instant>,
    /// A fragmented message has begun (RFC 6455 §5.4) and its final fragment has not come.
    fragmented: bool,
    /// The inner codec's handshake (TLS) is under way.
    inner_handshaking: bool,
}

impl<I: Codec> WsCodec<I> {
    pub(crate) fn new(inner: I, shared: Arc<Shared>, worker: usize) -> WsCodec<I> {
        WsCodec {
            inner_handshaking: inner.handshaking(),
            inner,
            shared,
            worker,
            input: BytesMut::new(),
            ws: None,
            out: VecDeque::new(),
            out_skip: 0,
            control: Vec::new(),
            lens: VecDeque::new(),
            finished: false,
            keepalive: None,
            awaiting_pong: false,
            partial_until: None,
            fragmented: false,
        }
    }

    fn stats(&self) -> &WorkerStats {
        &self.shared.stats.workers[self.worker]
    }

    fn ping_interval(&self) -> Option<Duration> {
        self.shared.config.websocket.ping_interval()
    }

    /// Counts the end of the inner codec's handshake, once.
    fn inner_progress(&mut self, failed: bool) {
        if !self.inner_handshaking || (!failed && self.inner.handshaking()) {
            return;
        }
        self.inner_handshaking = false;
        if let Some((done, fail)) = I::handshake_counters(&self.shared.stats.workers[self.worker]) {
            if failed { fail } else { done }.bump();
        }
    }

    /// Answers the upgrade once its request is whole. `Err`: refused (the answer is queued).
    fn upgrade(&mut self) -> io::Result<()> {
        match ws_upgrade::answer(&self.input, &self.shared.config.websocket.allowed_origins) {
            Upgrade::Partial => Ok(()),
            Upgrade::Refused { response, why } => {
                self.input = BytesMut::new();
                self.out.push_back(response.into());
                self.finished = true;
                Err(io::Error::new(io::ErrorKind::InvalidData, why))
            }
            Upgrade::Accepted { response, used } => {
                self.input.advance(used);
                self.out.push_back(response.into());
                let limits = &self.shared.config;
                let max = limits.websocket.message_limit(limits.limits.max_message_size);
                let config = WebSocketConfig::default()
                    .read_buffer_size(READ_BUFFER)
                    .write_buffer_size(0)
                    .max_message_size(Some(max))
                    .max_frame_size(Some(max));
                self.ws = Some(WebSocketContext::new(Role::Server, Some(config)));
                self.keepalive = self.ping_interval().map(|i| Instant::now() + i);
                Ok(())
            }
        }
    }

    /// Reads every whole message out of `input` into `sip`; a protocol error or a size over the
    /// limit sends the close frame RFC 6455 §7.4.1 names, and the connection ends.
    fn receive(&mut self, sip: &mut BytesMut) {
        let Some(ws) = self.ws.as_mut() else { return };
        let max = ws.get_config().max_frame_size.unwrap_or(usize::MAX);
        // tungstenite gets whole frames only: a partial one stays in `input`, where its age is
        // known (a slow sender must not hold a connection with a frame that never completes).
        let whole = whole_frames(&self.input, max, &mut self.fragmented);
        let mut frames = self.input.split_to(whole);
        let mut fail = None;
        loop {
            let mut pipe = Pipe { input: &mut frames, output: &mut self.control };
            match ws.read(&mut pipe) {
                Ok(Message::Text(text)) => deliver(Bytes::from(text), sip, &mut self.lens),
                Ok(Message::Binary(bytes)) => deliver(bytes, sip, &mut self.lens),
                // tungstenite queues the pong (§5.5.3) and the close reply (§5.5.1) itself.
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Ok(Message::Close(_)) => self.shared.stats.workers[self.worker].ws_closed_by_peer.bump(),
                Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(Error::ConnectionClosed | Error::AlreadyClosed) => {
                    self.finished = true;
                    break;
                }
                Err(Error::Capacity(e)) => {
                    fail = Some((CloseCode::Size, e.to_string()));
                    break;
                }
                Err(Error::Utf8(e)) => {
                    fail = Some((CloseCode::Invalid, e));
                    break;
                }
                Err(e) => {
                    fail = Some((CloseCode::Protocol, e.to_string()));
                    break;
                }
            }
        }
        if let Some((code, why)) = fail {
            let stats = &self.shared.stats.workers[self.worker];
            if code == CloseCode::Size { &stats.ws_closed_too_big } else { &stats.ws_closed_protocol_error }.bump();
            tracing::debug!(worker = self.worker, %code, error = %why, "closing a WebSocket connection");
            let frame = CloseFrame { code, reason: truncated(&why).into() };
            let _ = ws.close(&mut Pipe { input: &mut BytesMut::new(), output: &mut self.control }, Some(frame));
            self.finished = true;
        }
        if self.finished {
            self.input = BytesMut::new();
        } else if self.input.is_empty() {
            self.input = BytesMut::new(); // an idle connection keeps no buffer
        }
        if self.input.is_empty() && !self.fragmented {
            self.partial_until = None;
        } else if self.partial_until.is_none() {
            let limit = Duration::from_secs(self.shared.config.limits.tcp_incomplete_message_timeout_s);
            self.partial_until = Some(Instant::now() + limit);
        }
        self.take_control();
    }

    /// Moves what tungstenite wrote to the output queue.
    fn take_control(&mut self) {
        if !self.control.is_empty() {
            self.out.push_back(Bytes::from(std::mem::take(&mut self.control)));
        }
    }

    /// Hands the output queue to the inner codec as far as it takes it now.
    fn push_out(&mut self, wire: &mut dyn Write) -> io::Result<()> {
        while !self.out.is_empty() {
            let skip = self.out_skip;
            match self.inner.write(self.out.make_contiguous(), skip, wire) {
                Ok(0) => break,
                Ok(mut n) => {
                    while n > 0 {
                        let left = self.out[0].len() - self.out_skip;
                        if n < left {
                            self.out_skip += n;
                            break;
                        }
                        n -= left;
                        self.out.pop_front();
                        self.out_skip = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if self.out.is_empty() {
            self.out = VecDeque::new(); // an idle connection keeps no queue
        }
        Ok(())
    }
}

/// How many bytes at the front of `input` make whole frames, read from their headers (RFC 6455
/// §5.2), following whether a fragmented message is open. A frame announced over `max` counts
/// as whole, and so does what is not a frame header: tungstenite refuses both.
fn whole_frames(input: &[u8], max: usize, fragmented: &mut bool) -> usize {
    let mut at = 0;
    loop {
        let mut cursor = std::io::Cursor::new(&input[at..]);
        let (header, len) = match FrameHeader::parse(&mut cursor) {
            Ok(Some(h)) => h,
            Ok(None) => return at,
            Err(_) => return input.len(),
        };
        if len > max as u64 {
            return input.len();
        }
        let end = at as u64 + cursor.position() + len;
        if end > input.len() as u64 {
            return at;
        }
        match header.opcode {
            OpCode::Data(Data::Continue) => *fragmented &= !header.is_final,
            OpCode::Data(_) => *fragmented = !header.is_final,
            OpCode::Control(_) => {}
        }
        at = end as usize;
    }
}

/// One whole WebSocket message: one SIP message (RFC 7118 §5).
fn deliver(message: Bytes, sip: &mut BytesMut, lens: &mut VecDeque<usize>) {
    sip.extend_from_slice(&message);
    lens.push_back(message.len());
}

/// A close frame's reason fits in a control frame (RFC 6455 §5.5: 125 bytes, 2 of them the code).
fn truncated(why: &str) -> String {
    let mut end = why.len().min(120);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    why[..end].to_string()
}

impl<I: Codec> Codec for WsCodec<I> {
    /// Content-Length is optional over WebSocket (RFC 7118 §5.1): each message is delimited.
    const FRAMING: Framing = Framing::Datagram;

    fn read<R: Read>(&mut self, wire: &mut R, sip: &mut BytesMut) -> io::Result<usize> {
        let n = match self.inner.read(wire, &mut self.input) {
            Ok(n) => n,
            Err(e) => {
                if e.kind() != io::ErrorKind::WouldBlock {
                    self.inner_progress(true);
                }
                return Err(e);
            }
        };
        if n == 0 || self.finished {
            self.input = BytesMut::new();
            return Ok(n);
        }
        self.inner_progress(false);
        if self.ws.is_none() {
            if self.inner.handshaking() {
                return Ok(n);
            }
            self.upgrade()?;
            if self.ws.is_none() {
                return Ok(n);
            }
        }
        // Anything from the peer shows it is there: the next ping waits a whole interval again.
        self.awaiting_pong = false;
        self.keepalive = self.ping_interval().map(|i| Instant::now() + i);
        self.receive(sip);
        Ok(n)
    }

    /// Each queued SIP message becomes one unfragmented frame: text when it is UTF-8 (every
    /// browser API delivers it as a string), binary otherwise (RFC 7118 §5).
    fn write(&mut self, queued: &[Bytes], skip: usize, wire: &mut dyn Write) -> io::Result<usize> {
        let mut taken = 0;
        let mut pending: usize = self.out.iter().map(Bytes::len).sum::<usize>() - self.out_skip;
        for (i, item) in queued.iter().enumerate() {
            let message = if i == 0 { item.slice(skip..) } else { item.clone() };
            taken += message.len();
            if self.finished {
                continue; // closed: nothing more can be sent, the messages are dropped
            }
            if pending >= OUT_MAX {
                taken -= message.len();
                break;
            }
            let data = if std::str::from_utf8(&message).is_ok() { Data::Text } else { Data::Binary };
            let header = FrameHeader { opcode: OpCode::Data(data), ..FrameHeader::default() };
            let mut head = Vec::with_capacity(10);
            header.format(message.len() as u64, &mut head).map_err(io::Error::other)?;
            pending += head.len() + message.len();
            self.out.push_back(head.into());
            if !message.is_empty() {
                self.out.push_back(message);
            }
        }
        self.flush(wire)?;
        Ok(taken)
    }

    /// One message per WebSocket message; an empty one or bare CRLFs are a keep-alive, and a
    /// double CRLF the RFC 5626 §3.5.1 ping that SIP.js sends (answered with a CRLF message).
    fn next_frame(
        &mut self,
        sip: &mut BytesMut,
        _limits: &Limits,
        _progress: &mut Progress,
    ) -> Result<Option<Cut>, ParseError> {
        let Some(len) = self.lens.pop_front() else { return Ok(None) };
        if self.lens.is_empty() {
            self.lens = VecDeque::new();
        }
        // The last message of what was read is taken whole (see `herald_sip::framing`: a split
        // moves the buffer to shared storage first, an allocation per message).
        let message = if len == sip.len() { std::mem::take(sip) } else { sip.split_to(len) }.freeze();
        Ok(Some(Cut::Frame(match &message[..] {
            b"\r\n\r\n" => Frame::Ping,
            m if m.iter().all(|b| matches!(b, b'\r' | b'\n')) => Frame::KeepAlive,
            _ => Frame::Message(message),
        })))
    }

    fn wants_write(&self) -> bool {
        !self.out.is_empty() || self.inner.wants_write()
    }

    fn flush(&mut self, wire: &mut dyn Write) -> io::Result<()> {
        self.push_out(wire)?;
        self.inner.flush(wire)
    }

    fn handshaking(&self) -> bool {
        self.ws.is_none()
    }

    fn handshake_timeout(&self) -> Duration {
        self.inner.handshake_timeout() + Duration::from_secs(self.shared.config.websocket.handshake_timeout_s)
    }

    /// A close frame (1000) unless one was exchanged already, then the inner codec's closing
    /// bytes after ours (TLS close_notify last).
    fn close(&mut self) {
        // The inner handshake did not finish (timed out, or the peer left in the middle).
        if self.inner.handshaking() {
            self.inner_progress(true);
        }
        if let (Some(ws), false) = (self.ws.as_mut(), self.finished) {
            let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
            let _ = ws.close(&mut Pipe { input: &mut BytesMut::new(), output: &mut self.control }, Some(frame));
            self.finished = true;
            self.take_control();
        }
        let _ = self.push_out(&mut Blocked);
        self.inner.close();
    }

    fn deadline(&self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        match (self.keepalive, self.partial_until) {
            (Some(k), Some(p)) => Some(k.min(p)),
            (k, p) => k.or(p),
        }
    }

    /// RFC 6455 §5.5.2: a ping to a peer that has sent nothing for an interval; no answer
    /// within another interval and the peer is gone (a browser that lost its network sends no
    /// close frame), so the connection ends.
    fn on_deadline(&mut self, now: Instant) -> io::Result<()> {
        if self.partial_until.is_some_and(|p| p <= now) {
            self.stats().tcp_incomplete_timeouts.bump();
            self.partial_until = None;
            return Err(io::Error::new(io::ErrorKind::TimedOut, "a WebSocket message did not arrive whole in time"));
        }
        if self.keepalive.is_none_or(|k| k > now) {
            return Ok(());
        }
        let (Some(interval), Some(ws)) = (self.ping_interval(), self.ws.as_mut()) else { return Ok(()) };
        if self.awaiting_pong {
            self.shared.stats.workers[self.worker].ws_closed_dead.bump();
            self.keepalive = None;
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer to a WebSocket ping within {}s", interval.as_secs()),
            ));
        }
        let mut pipe = Pipe { input: &mut BytesMut::new(), output: &mut self.control };
        if ws.write(&mut pipe, Message::Ping(Bytes::new())).is_ok() {
            self.stats().ws_pings_sent.bump();
        }
        self.take_control();
        self.awaiting_pong = true;
        self.keepalive = Some(now + interval);
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn handshake_counters(stats: &WorkerStats) -> Option<(&AtomicU64, &AtomicU64)> {
        Some((&stats.ws_handshakes, &stats.ws_handshake_failures))
    }
}

/// The stream tungstenite reads frames from and writes control frames to: memory only.
struct Pipe<'a> {
    input: &'a mut BytesMut,
    output: &'a mut Vec<u8>,
}

impl Read for Pipe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.input.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input.advance(n);
        Ok(n)
    }
}

impl Write for Pipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A wire that takes nothing now: lets [`WsCodec::close`] hand its bytes to a TLS codec's
/// buffer (before close_notify) without a socket.
struct Blocked;

impl Write for Blocked {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::Plain;
    use super::super::tls::TlsCodec;
    use super::*;
    use std::mem::size_of;

    /// What the codec adds to a connection's task, split into tungstenite's context and
    /// herald's glue (the numbers of docs/design/serve.md; `-- --nocapture` prints them).
    #[test]
    fn the_glue_is_small_beside_the_libraries() {
        let (ctx, ws, wss, tls) = (
            size_of::<WebSocketContext>(),
            size_of::<WsCodec<Plain>>(),
            size_of::<WsCodec<TlsCodec>>(),
            size_of::<TlsCodec>(),
        );
        eprintln!(
            "WebSocketContext {ctx} B, WsCodec<Plain> {ws} B (glue {} B), TlsCodec {tls} B, WsCodec<TlsCodec> {wss} B",
            ws - ctx
        );
        assert!(ws - ctx <= 192, "herald's WebSocket glue is {} bytes", ws - ctx);
        assert!(wss <= ws + tls + 8);
    }
}
