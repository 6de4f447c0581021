//! The socket of a stream connection as its codec sees it (module `task`'s loop owns it).

use std::io::{self, Read, Write};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The non-blocking socket as the codec sees it: `WouldBlock` when the kernel has nothing to
/// read or no room to write (tokio then waits for readiness again).
pub(super) struct Socket<'a> {
    stream: &'a TcpStream,
    /// A read returned less than it asked for: the kernel had no more then.
    drained: bool,
}

impl<'a> Socket<'a> {
    pub(super) fn new(stream: &'a TcpStream) -> Socket<'a> {
        Socket { stream, drained: false }
    }

    /// After a read that found the socket drained, forgets its read readiness, as tokio's own
    /// `AsyncRead` for `TcpStream` does after a short read: the loop then waits for the next
    /// epoll edge instead of reading again only to get `EAGAIN` - a system call and a turn of
    /// the loop per message (about 1k instructions each, callgrind, issue 21). Nothing is lost:
    /// epoll is edge-triggered and every arrival after that read is a new edge, which the
    /// worker's I/O driver records when it next turns; it turns on this thread only, between
    /// task polls, never between the read and this call. A closed peer stays readable (tokio
    /// keeps the closed state).
    pub(super) fn forget_readable_if_drained(&self) {
        if self.drained {
            let _ = self.stream.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
        }
    }
}

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // As `try_read`, through herald-sys's recv (no libc cancellation-point brackets).
        let n = self.stream.try_io(Interest::READABLE, || herald_sys::recv(self.stream, buf))?;
        self.drained |= n > 0 && n < buf.len();
        Ok(n)
    }
}

impl Write for Socket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.try_io(Interest::WRITABLE, || herald_sys::send(self.stream, buf))
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.stream.try_io(Interest::WRITABLE, || herald_sys::writev(self.stream, bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
