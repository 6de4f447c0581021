//! How SIP messages ride one stream connection (plain TCP or the plaintext of TLS): delimited by
//! Content-Length (RFC 3261 §18.3, `--transport tcp` and `tls`), or one per WebSocket message
//! after an HTTP upgrade (RFC 7118, `ws` and `wss`). The endpoints move bytes between the socket
//! (or rustls) and these two buffers; the codec turns them into messages and back.

use super::framing::{cut_frames, Incoming};
use super::ws::WsClient;
use bytes::{Bytes, BytesMut};
use herald_sip::{Framing, Limits};
use std::net::SocketAddr;

pub enum StreamCodec {
    /// Content-Length framing (RFC 3261 §18.3).
    Sip,
    /// WebSocket (boxed: tungstenite's state is far larger than the other variant).
    Ws(Box<WsClient>),
}

impl StreamCodec {
    /// A WebSocket connection to `peer`: its upgrade request goes on `output` at once (over TLS,
    /// rustls holds it until its own handshake is done).
    pub fn ws(peer: SocketAddr, secure: bool, limits: &Limits, output: &mut Vec<u8>) -> Result<StreamCodec, String> {
        Ok(StreamCodec::Ws(Box::new(WsClient::connect(&peer.to_string(), secure, limits.max_message_size, output)?)))
    }

    /// How a message this codec delivers was delimited: a WebSocket message is a whole SIP
    /// message, as a datagram is (its Content-Length may be absent, RFC 7118 §5.1).
    pub fn framing(&self) -> Framing {
        match self {
            StreamCodec::Sip => Framing::Stream,
            StreamCodec::Ws(_) => Framing::Datagram,
        }
    }

    /// The connection is not ready for SIP yet (the WebSocket upgrade is unanswered).
    pub fn is_upgrading(&self) -> bool {
        matches!(self, StreamCodec::Ws(ws) if ws.is_upgrading())
    }

    /// Queues one SIP message on `output`. False when the connection is over.
    pub fn send(&mut self, message: Bytes, output: &mut Vec<u8>) -> bool {
        match self {
            StreamCodec::Sip => {
                output.extend_from_slice(&message);
                true
            }
            StreamCodec::Ws(ws) => ws.send(message, output),
        }
    }

    /// Queues on `output` what ends the connection at this layer: a WebSocket close frame;
    /// nothing for Content-Length framing (closing the stream says it all, RFC 3261 §18.3).
    pub fn close(&mut self, output: &mut Vec<u8>) {
        if let StreamCodec::Ws(ws) = self {
            ws.close(output);
        }
    }

    /// Cuts the messages out of the received bytes in `input` into `out`, queuing on `output`
    /// what the protocol answers by itself (a CRLF pong to a double-CRLF ping, RFC 5626 §3.5.1;
    /// WebSocket pongs and close replies). Err: nothing more on this connection can be trusted,
    /// and why; the endpoint closes it.
    pub fn receive(
        &mut self,
        input: &mut BytesMut,
        limits: &Limits,
        peer: SocketAddr,
        out: &mut Vec<Incoming>,
        output: &mut Vec<u8>,
    ) -> Result<(), String> {
        match self {
            StreamCodec::Sip => match cut_frames(input, limits, peer, out, output) {
                true => Ok(()),
                false => Err("stream framing lost (RFC 3261 §18.3)".into()),
            },
            StreamCodec::Ws(ws) => ws.receive(input, peer, out, output),
        }
    }
}
