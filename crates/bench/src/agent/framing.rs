//! Stream framing shared by the plain TCP and the TLS endpoints (RFC 3261 §18.3: Content-Length
//! frames a stream), and what every endpoint hands the event loop: [`Incoming`] messages.

use bytes::{Bytes, BytesMut};
use herald_sip::framing::{next_frame, Frame};
use herald_sip::Limits;
use std::net::SocketAddr;

/// Stream bytes waiting to be written beyond which sends fail instead of buffering more.
pub const MAX_TCP_BUFFER: usize = 32 << 20;
/// Read size of stream sockets (TCP, and the plaintext drained from TLS).
pub const STREAM_CHUNK: usize = 16 * 1024;

/// One received message and where it came from.
#[derive(Debug)]
pub struct Incoming {
    pub bytes: Bytes,
    pub from: SocketAddr,
    /// When the kernel received it (SO_TIMESTAMPNS: CLOCK_REALTIME, ns since the epoch); None
    /// on TCP or when the kernel attached no stamp.
    pub kernel_ns: Option<u64>,
}

/// Cuts the complete messages at the front of `input` (RFC 3261 §18.3: Content-Length frames a
/// stream) into `out`, answering RFC 5626 §3.5.1 double-CRLF pings with a CRLF pong queued on
/// `output`. False when framing is lost: nothing after that point of the stream can be trusted,
/// and the caller closes the connection.
pub fn cut_frames(
    input: &mut BytesMut,
    limits: &Limits,
    peer: SocketAddr,
    out: &mut Vec<Incoming>,
    output: &mut Vec<u8>,
) -> bool {
    loop {
        match next_frame(input, limits) {
            Ok(Some(Frame::Message(bytes))) => out.push(Incoming { bytes, from: peer, kernel_ns: None }),
            Ok(Some(Frame::Ping)) => output.extend_from_slice(b"\r\n"),
            Ok(Some(Frame::KeepAlive)) => {}
            Ok(None) => return true,
            Err(_) => {
                input.clear();
                return false;
            }
        }
    }
}
