//! What a stream connection's socket bytes mean: the [`Codec`] between the socket, which the
//! connection loop (module `task`) owns, and the SIP stream, which the loop frames and hands on.

use crate::stats::WorkerStats;
use bytes::{Bytes, BytesMut};
use herald_sip::framing::{self, Cut, Progress};
use herald_sip::{Framing, Limits, ParseError};
use std::cell::RefCell;
use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use std::time::Instant;

/// Bytes read per system call.
pub(crate) const READ_CHUNK: usize = 4096;

/// Turns the bytes of one connection's socket into SIP bytes and SIP messages into socket bytes.
///
/// The connection loop (`task::serve`) is the same for every stream transport: it owns the
/// socket, waits for readiness, the write queue and the deadlines, cuts frames and hands them to
/// the runtime's ingress, counts and closes. A codec only transforms bytes, through the `Read`
/// and `Write` the loop gives it over the non-blocking socket (`WouldBlock`: nothing more now),
/// as rustls's own `read_tls`/`write_tls` do. Plain TCP ([`Plain`]) passes bytes through; TLS
/// (`tls::TlsCodec`) drives a rustls connection sans-IO.
///
/// WebSocket (RFC 7118, `ws::WsCodec`) is the third: it answers the HTTP upgrade while
/// [`Codec::handshaking`], unwraps frames in [`Codec::read`] (answering pings itself:
/// [`Codec::wants_write`]), cuts one SIP message per WebSocket message in [`Codec::next_frame`]
/// (RFC 7118 §5, hence [`Codec::FRAMING`]), wraps each queued message in a frame in
/// [`Codec::write`], pings an idle peer ([`Codec::deadline`]), ends the connection after a close
/// handshake ([`Codec::finished`]) and sends a close frame in [`Codec::close`]; WSS is the same
/// codec over a TLS codec it owns.
pub(crate) trait Codec {
    /// How the messages [`Codec::next_frame`] cuts are parsed: `Stream` (RFC 3261 §18.3: cut by
    /// Content-Length, which must be present) or `Datagram` (the codec's own frames delimit
    /// messages and Content-Length is optional, as over WebSocket: RFC 7118 §5.1).
    const FRAMING: Framing = Framing::Stream;

    /// The socket carries the SIP bytes as they are, with nothing of the codec's own: a sender
    /// may write a message straight to the socket while nothing is queued (`conns::Conn::push`).
    const SIP_AS_IS: bool = false;

    /// Reads what `wire` has now and appends the SIP bytes it carries to `sip`. `Ok(0)`: the
    /// peer closed the connection. `Err(WouldBlock)`: nothing to read (yet). Generic over the
    /// reader, not `dyn`: plain TCP's read then reaches the socket's without a virtual call
    /// (~15 instructions a read with the loop's delivery step inline, callgrind, issue 21).
    fn read<R: Read>(&mut self, wire: &mut R, sip: &mut BytesMut) -> io::Result<usize>;

    /// Writes queued SIP messages (`queued`, the first from byte `skip` on) towards `wire`,
    /// with whatever the codec must send itself. Returns how many SIP bytes it took (0: none
    /// now, wait for the socket). `Err(WouldBlock)` also means: wait for the socket.
    fn write(&mut self, queued: &[Bytes], skip: usize, wire: &mut dyn Write) -> io::Result<usize>;

    /// Cuts the next SIP message off the bytes read so far (RFC 3261 §18.3 stream framing,
    /// which parses the message on the way, unless the codec frames messages itself).
    /// `progress`: what the framing learnt of a message not yet whole, kept by the connection.
    fn next_frame(
        &mut self,
        sip: &mut BytesMut,
        limits: &Limits,
        progress: &mut Progress,
    ) -> Result<Option<Cut>, ParseError> {
        framing::next_cut_resumed(sip, limits, progress)
    }

    /// The codec holds bytes of its own for the socket (a handshake message, records, an
    /// alert): the loop waits for the socket to be writable and calls [`Codec::flush`].
    fn wants_write(&self) -> bool {
        false
    }

    /// Writes the codec's own bytes towards `wire`, as far as it takes them.
    fn flush(&mut self, _wire: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    /// A handshake is under way: no SIP flows yet, and the loop applies the handshake deadline.
    fn handshaking(&self) -> bool {
        false
    }

    /// How long the handshake may take (`[tls] handshake_timeout_s`), counted from the start.
    fn handshake_timeout(&self) -> Duration {
        Duration::ZERO
    }

    /// The connection ends: queue the codec's closing bytes (TLS close_notify), if any.
    fn close(&mut self) {}

    /// When the codec must act on its own (a WebSocket keep-alive ping, the end of its wait for
    /// the pong): the loop calls [`Codec::on_deadline`] then.
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// The codec's deadline has passed: it may queue bytes ([`Codec::wants_write`]); `Err` ends
    /// the connection (the peer is gone).
    fn on_deadline(&mut self, _now: Instant) -> io::Result<()> {
        Ok(())
    }

    /// The codec's own protocol has ended the connection (a WebSocket close handshake, or a
    /// close frame sent for a protocol error): the loop reads no more and ends the connection
    /// once the codec's bytes are out.
    fn finished(&self) -> bool {
        false
    }

    /// The counters of this codec's handshakes, completed and failed (none: no handshake).
    fn handshake_counters(_stats: &WorkerStats) -> Option<(&AtomicU64, &AtomicU64)>
    where
        Self: Sized,
    {
        None
    }
}

/// Plain TCP: the socket's bytes are the SIP stream.
pub(crate) struct Plain;

impl Codec for Plain {
    const SIP_AS_IS: bool = true;

    fn read<R: Read>(&mut self, wire: &mut R, sip: &mut BytesMut) -> io::Result<usize> {
        append(wire, sip)
    }

    /// Several queued messages per system call, written from the queue itself (no copy).
    fn write(&mut self, queued: &[Bytes], skip: usize, wire: &mut dyn Write) -> io::Result<usize> {
        let mut slices = [IoSlice::new(&[]); WRITE_BATCH];
        let n = queued.len().min(WRITE_BATCH);
        for (i, b) in queued[..n].iter().enumerate() {
            slices[i] = IoSlice::new(if i == 0 { &b[skip..] } else { b });
        }
        wire.write_vectored(&slices[..n])
    }
}

/// Messages gathered into one vectored write.
pub(crate) const WRITE_BATCH: usize = 16;

/// One read from `src` appended to `sip`. An empty buffer is not allocated until bytes have
/// arrived (a spurious wake-up or a closed peer costs nothing), and then only as large as needed:
/// an idle connection keeps no read buffer.
///
/// The read goes into a scratch buffer of the thread's, zeroed once when the thread first reads,
/// and only the bytes that came are copied on: zeroing a fresh 4 KiB for every read (a `[0; N]`
/// or `BytesMut::resize`; filling spare capacity without zeroing needs `unsafe`, which this crate
/// forbids) was about 34k instructions per WebSocket call under callgrind, more than the copy.
/// The scratch buffer is borrowed only for the one `read` call, which does not await.
pub(crate) fn append<R: Read + ?Sized>(src: &mut R, sip: &mut BytesMut) -> io::Result<usize> {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => append_via(src, sip, &mut scratch[..]),
        // A `Read` that itself appends through this function (none does today): a buffer of its own.
        Err(_) => append_via(src, sip, &mut [0u8; READ_CHUNK]),
    })
}

fn append_via<R: Read + ?Sized>(src: &mut R, sip: &mut BytesMut, scratch: &mut [u8]) -> io::Result<usize> {
    let n = src.read(scratch)?;
    if n > 0 {
        if sip.is_empty() {
            // Allocated to fit and filled in one step (no room check, no length update after).
            *sip = BytesMut::from(&scratch[..n]);
        } else {
            sip.extend_from_slice(&scratch[..n]);
        }
    }
    Ok(n)
}

thread_local! {
    /// The read buffer of [`append`], one per thread (a worker's connections take turns).
    static SCRATCH: RefCell<Box<[u8; READ_CHUNK]>> = RefCell::new(Box::new([0u8; READ_CHUNK]));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its chunks one read at a time, then `WouldBlock`.
    struct Chunks(Vec<&'static [u8]>);

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let c = self.0.remove(0);
            buf[..c.len()].copy_from_slice(c);
            Ok(c.len())
        }
    }

    #[test]
    fn append_keeps_every_byte_in_order_and_allocates_only_for_bytes() {
        let mut sip = BytesMut::new();
        let mut src = Chunks(vec![b"INVITE sip:a", b"", b" SIP/2.0\r\n"]);
        assert_eq!(append(&mut src, &mut sip).unwrap(), 12);
        assert_eq!(sip.capacity(), 12, "the first read allocates what came");
        // The peer closed (0): nothing appended; a later read goes on where it was.
        assert_eq!(append(&mut src, &mut sip).unwrap(), 0);
        assert_eq!(append(&mut src, &mut sip).unwrap(), 10);
        assert_eq!(&sip[..], b"INVITE sip:a SIP/2.0\r\n");
        assert_eq!(append(&mut src, &mut sip).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(&sip[..], b"INVITE sip:a SIP/2.0\r\n");
        // Nothing read into an empty buffer: still no allocation.
        let mut idle = BytesMut::new();
        assert!(append(&mut Chunks(vec![b""]), &mut idle).is_ok_and(|n| n == 0));
        assert_eq!(idle.capacity(), 0);
        // A whole chunk, then more behind it.
        static BIG: [u8; READ_CHUNK] = [b'x'; READ_CHUNK];
        let mut full = BytesMut::new();
        let mut src = Chunks(vec![&BIG, b"y"]);
        assert_eq!(append(&mut src, &mut full).unwrap(), READ_CHUNK);
        assert_eq!(append(&mut src, &mut full).unwrap(), 1);
        assert_eq!(full.len(), READ_CHUNK + 1);
        assert_eq!(full[READ_CHUNK], b'y');
    }
}
