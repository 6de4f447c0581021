//! SIP over WebSocket, client side (RFC 6455, RFC 7118): what `--transport ws` and `wss` put on
//! the plain or TLS stream to the proxy. tungstenite does the protocol: the opening handshake
//! (offering the `sip` subprotocol, RFC 7118 §4.1, and failing unless the server accepts it,
//! RFC 6455 §4.1), masking every client frame (§5.3), reassembling fragments, answering pings
//! and close frames (§5.5). It runs sans-IO over an in-memory [`Pipe`]: the endpoint hands it
//! the bytes it read and sends the bytes it wrote, so it fits the generator's one ppoll loop like
//! the Content-Length framing of SIP over TCP.
//!
//! Each SIP message goes out as one text message (RFC 7118 §5.1 allows text or binary; browser
//! phones such as JsSIP send text, so the proxy does what it does for them), and each whole
//! message received, text or binary, is one SIP message.

use super::framing::Incoming;
use bytes::{Buf, Bytes, BytesMut};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use tungstenite::client::IntoClientRequest;
use tungstenite::error::Error;
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::http::HeaderValue;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::frame::CloseFrame;
use tungstenite::protocol::{WebSocket, WebSocketConfig};
use tungstenite::{Message, Utf8Bytes};

/// How much tungstenite reads from the pipe at a time.
const READ_BUFFER: usize = 2048;

/// The subprotocol of SIP over WebSocket (RFC 7118 §4.1).
pub const SUBPROTOCOL: &str = "sip";

/// The bytes between tungstenite and the endpoint: reads take from `input` (WouldBlock when it is
/// empty, so tungstenite stops where the received bytes end), writes append to `output`.
#[derive(Debug, Default)]
pub struct Pipe {
    input: BytesMut,
    output: Vec<u8>,
}

impl Read for Pipe {
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

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum State {
    /// The upgrade request is out; the 101 has not come yet. Messages sent meanwhile wait.
    Upgrading {
        handshake: MidHandshake<ClientHandshake<Pipe>>,
        waiting: Vec<Bytes>,
    },
    Open(WebSocket<Pipe>),
    /// Failed or closed: nothing more is read or sent.
    Done,
}

/// One WebSocket connection to the proxy, client side.
pub struct WsClient {
    state: State,
}

impl WsClient {
    /// Starts the opening handshake for `host` (the Host header and request URI, RFC 6455 §4.1):
    /// the GET with `Upgrade: websocket` and `Sec-WebSocket-Protocol: sip` is written to
    /// `output`. `max_message`: the largest message (and frame) accepted from the server.
    pub fn connect(host: &str, secure: bool, max_message: usize, output: &mut Vec<u8>) -> Result<WsClient, String> {
        let scheme = if secure { "wss" } else { "ws" };
        let mut request = format!("{scheme}://{host}/").into_client_request().map_err(|e| format!("WebSocket: {e}"))?;
        request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static(SUBPROTOCOL));
        // tungstenite zeroes `read_buffer_size` bytes of its buffer for every read from the pipe
        // (two or more per batch of frames): a SIP message's size, not 16 KiB, keeps that cheap.
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER)
            .write_buffer_size(0)
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let handshake =
            ClientHandshake::start(Pipe::default(), request, Some(config)).map_err(|e| format!("WebSocket: {e}"))?;
        let mut client = WsClient { state: State::Upgrading { handshake, waiting: Vec::new() } };
        // The first step writes the request into the pipe and stops at reading the answer.
        client.progress(output)?;
        Ok(client)
    }

    /// The server has not answered the upgrade yet.
    pub fn is_upgrading(&self) -> bool {
        matches!(self.state, State::Upgrading { .. })
    }

    /// Queues one SIP message as one text message (masked, RFC 6455 §5.3) on `output`; before
    /// the upgrade is answered it waits. False when the connection is over.
    pub fn send(&mut self, message: Bytes, output: &mut Vec<u8>) -> bool {
        match &mut self.state {
            State::Upgrading { waiting, .. } => {
                waiting.push(message);
                true
            }
            State::Open(ws) => {
                let sent = ws.send(as_message(message)).is_ok();
                output.append(&mut ws.get_mut().output);
                sent
            }
            State::Done => false,
        }
    }

    /// Takes the received bytes in `input`: the answer to the upgrade, then frames. Every whole
    /// message is one [`Incoming`] from `peer`; what tungstenite answers itself (pongs, the reply
    /// to a close frame) goes on `output`. Err: the connection is over, and why (the upgrade was
    /// refused, the server broke the protocol or closed).
    pub fn receive(
        &mut self,
        input: &mut BytesMut,
        peer: SocketAddr,
        out: &mut Vec<Incoming>,
        output: &mut Vec<u8>,
    ) -> Result<(), String> {
        let pipe = match &mut self.state {
            State::Upgrading { handshake, .. } => handshake.get_mut().get_mut(),
            State::Open(ws) => ws.get_mut(),
            State::Done => return Err("WebSocket: connection closed".into()),
        };
        if pipe.input.is_empty() {
            std::mem::swap(&mut pipe.input, input);
        } else {
            pipe.input.extend_from_slice(input);
            input.clear();
        }
        self.progress(output)?;
        let State::Open(ws) = &mut self.state else { return Ok(()) };
        let result = loop {
            match ws.read() {
                Ok(Message::Text(text)) => out.push(Incoming { bytes: text.into(), from: peer, kernel_ns: None }),
                Ok(Message::Binary(bytes)) => out.push(Incoming { bytes, from: peer, kernel_ns: None }),
                // Pings are answered by tungstenite (the pong goes out with the flush below).
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Ok(Message::Close(frame)) => {
                    // tungstenite queued the reply (RFC 6455 §5.5.1); it goes out below.
                    let why = frame.map_or("no status".into(), |f| format!("{} {}", u16::from(f.code), f.reason));
                    break Err(format!("WebSocket: closed by the peer ({why})"));
                }
                Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                Err(Error::ConnectionClosed | Error::AlreadyClosed) => {
                    break Err("WebSocket: connection closed".into());
                }
                Err(e) => break Err(format!("WebSocket: {e}")),
            }
        };
        let _ = ws.flush();
        output.append(&mut ws.get_mut().output);
        if result.is_err() {
            self.state = State::Done;
        }
        result
    }

    /// Ends the connection politely at the end of a run: a close frame with status 1000
    /// (RFC 6455 §5.5.1, §7.1.2: the endpoint that is done sends one) goes on `output`, and
    /// nothing more is read or sent. A connection still upgrading or already over sends nothing.
    pub fn close(&mut self, output: &mut Vec<u8>) {
        if let State::Open(ws) = &mut self.state {
            // Err only when a close was already sent or received: nothing to add then.
            let _ = ws.close(Some(CloseFrame { code: CloseCode::Normal, reason: "".into() }));
            let _ = ws.flush();
            output.append(&mut ws.get_mut().output);
        }
        self.state = State::Done;
    }

    /// Runs the handshake as far as the received bytes go; when it completes, the messages that
    /// waited go out.
    fn progress(&mut self, output: &mut Vec<u8>) -> Result<(), String> {
        let State::Upgrading { .. } = self.state else { return Ok(()) };
        let State::Upgrading { handshake, waiting } = std::mem::replace(&mut self.state, State::Done) else {
            unreachable!("matched above")
        };
        match handshake.handshake() {
            Ok((mut ws, _response)) => {
                // tungstenite checked the status (101), Upgrade, Connection, the accept key and
                // that the subprotocol is the one offered; RFC 7118 §4.1 needs it present too,
                // and tungstenite fails a response without one when one was offered.
                output.append(&mut ws.get_mut().output);
                for message in waiting {
                    if ws.send(as_message(message)).is_err() {
                        return Err("WebSocket: send failed".into());
                    }
                }
                output.append(&mut ws.get_mut().output);
                self.state = State::Open(ws);
                Ok(())
            }
            Err(HandshakeError::Interrupted(mut handshake)) => {
                output.append(&mut handshake.get_mut().get_mut().output);
                self.state = State::Upgrading { handshake, waiting };
                Ok(())
            }
            Err(HandshakeError::Failure(e)) => Err(format!("WebSocket upgrade refused: {e}")),
        }
    }
}

/// A SIP message as a WebSocket message: text when it is UTF-8 (always, for the messages this
/// generator writes), else binary.
fn as_message(bytes: Bytes) -> Message {
    match Utf8Bytes::try_from(bytes.clone()) {
        Ok(text) => Message::Text(text),
        Err(_) => Message::Binary(bytes),
    }
}
