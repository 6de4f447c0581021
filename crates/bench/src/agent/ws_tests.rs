//! The WebSocket client (RFC 6455, RFC 7118) against a tungstenite server context, in memory:
//! the upgrade it asks for and what it makes of the answers, its frames as a server reads them
//! (masked, one text message per SIP message), and what the server may send (text, binary,
//! fragments, pings, close).

use super::framing::Incoming;
use super::ws::WsClient;
use bytes::{Bytes, BytesMut};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use tungstenite::handshake::derive_accept_key;
use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, Frame};
use tungstenite::protocol::{Role, WebSocketContext};
use tungstenite::Message;

const LIMIT: usize = 65_535;
const OPTIONS: &str = "OPTIONS sip:svc@example.com SIP/2.0\r\nVia: SIP/2.0/WS a.invalid;branch=z9hG4bK1\r\n\
    Max-Forwards: 70\r\nFrom: <sip:a@example.com>;tag=1\r\nTo: <sip:svc@example.com>\r\nCall-ID: c1\r\n\
    CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n";

fn peer() -> SocketAddr {
    "127.0.0.1:5066".parse().unwrap()
}

/// The server's side of the connection: what it reads (the client's bytes) and writes.
#[derive(Default)]
struct Wire {
    from_client: io::Cursor<Vec<u8>>,
    to_client: Vec<u8>,
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.from_client.read(buf)? {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.to_client.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The 101 a server answers to `request`, with `protocol` as the chosen subprotocol.
fn switching(request: &[u8], protocol: Option<&str>) -> Vec<u8> {
    let text = std::str::from_utf8(request).unwrap();
    let key = text.lines().find_map(|l| l.strip_prefix("Sec-WebSocket-Key: ")).expect("a key").trim();
    let protocol = protocol.map(|p| format!("Sec-WebSocket-Protocol: {p}\r\n")).unwrap_or_default();
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n{protocol}\r\n",
        derive_accept_key(key.as_bytes())
    )
    .into_bytes()
}

/// Feeds `bytes` to the client; returns the messages it cut and what it wrote back.
fn feed(client: &mut WsClient, bytes: &[u8]) -> (Result<(), String>, Vec<Incoming>, Vec<u8>) {
    let (mut input, mut out, mut output) = (BytesMut::from(bytes), Vec::new(), Vec::new());
    let result = client.receive(&mut input, peer(), &mut out, &mut output);
    (result, out, output)
}

/// A client whose upgrade was accepted, and the server context talking to it.
fn open() -> (WsClient, WebSocketContext) {
    let mut request = Vec::new();
    let mut client = WsClient::connect("127.0.0.1:5066", false, LIMIT, &mut request).unwrap();
    let (result, out, _) = feed(&mut client, &switching(&request, Some("sip")));
    assert_eq!(result, Ok(()));
    assert!(out.is_empty() && !client.is_upgrading());
    (client, WebSocketContext::new(Role::Server, None))
}

/// What the server reads from the client's `bytes`.
fn server_reads(server: &mut WebSocketContext, bytes: Vec<u8>) -> Vec<Message> {
    let mut wire = Wire { from_client: io::Cursor::new(bytes), ..Default::default() };
    let mut got = Vec::new();
    loop {
        match server.read(&mut wire) {
            Ok(m) => got.push(m),
            Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return got,
            Err(e) => panic!("the server could not read the client's frames: {e}"),
        }
    }
}

/// What the server writes for `messages`.
fn server_writes(server: &mut WebSocketContext, messages: Vec<Message>) -> Vec<u8> {
    let mut wire = Wire::default();
    for m in messages {
        server.write(&mut wire, m).unwrap();
    }
    server.flush(&mut wire).unwrap();
    wire.to_client
}

#[test]
fn the_upgrade_asks_for_the_sip_subprotocol() {
    let mut request = Vec::new();
    let client = WsClient::connect("127.0.0.1:5066", false, LIMIT, &mut request).unwrap();
    let text = String::from_utf8(request).unwrap();
    assert!(text.starts_with("GET / HTTP/1.1\r\n"), "{text}");
    for line in
        ["Host: 127.0.0.1:5066", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: sip"]
    {
        assert!(text.contains(&format!("{line}\r\n")), "{line} missing in {text}");
    }
    assert!(text.ends_with("\r\n\r\n"));
    assert!(client.is_upgrading());
}

#[test]
fn refused_or_wrong_upgrades_fail_with_the_reason() {
    const BAD_KEY: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: bm90IHRoZSBrZXk=\r\nSec-WebSocket-Protocol: sip\r\n\r\n";
    type Answer = fn(&[u8]) -> Vec<u8>;
    let answers: [(Answer, &str); 4] = [
        (|_| b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec(), "400 Bad Request"),
        // RFC 7118 §4.1: a server that does not choose `sip` has not agreed to carry SIP.
        (|r| switching(r, None), "SubProtocol"),
        (|r| switching(r, Some("chat")), "SubProtocol"),
        (|_| BAD_KEY.to_vec(), "Key mismatch"),
    ];
    for (answer, reason) in answers {
        let mut request = Vec::new();
        let mut client = WsClient::connect("127.0.0.1:5066", false, LIMIT, &mut request).unwrap();
        let (result, out, _) = feed(&mut client, &answer(&request));
        let err = result.unwrap_err();
        assert!(err.starts_with("WebSocket upgrade refused") && err.contains(reason), "{err}");
        assert!(out.is_empty());
        assert!(
            !client.send(Bytes::from_static(OPTIONS.as_bytes()), &mut Vec::new()),
            "a failed connection sends nothing"
        );
    }
}

#[test]
fn each_message_is_one_masked_text_frame() {
    let (mut client, mut server) = open();
    let mut output = Vec::new();
    assert!(client.send(Bytes::from_static(OPTIONS.as_bytes()), &mut output));
    assert!(client.send(Bytes::from_static(b"second"), &mut output));
    // RFC 6455 §5.2: FIN and opcode 1 (text); §5.3: a client sets the mask bit.
    assert_eq!(output[0], 0x81);
    assert_eq!(output[1] & 0x80, 0x80, "masked");
    assert!(!output.windows(7).any(|w| w == b"OPTIONS"), "the payload is masked, not in the clear");
    let got = server_reads(&mut server, output);
    assert_eq!(got, vec![Message::text(OPTIONS), Message::text("second")]);
}

#[test]
fn whole_messages_come_out_however_the_bytes_arrive() {
    let (mut client, mut server) = open();
    let first = Frame::message(Bytes::from_static(b"OPTIONS sip:a SIP/2.0\r\n"), OpCode::Data(Data::Text), false);
    let mut wire = Wire::default();
    // A fragmented message (RFC 6455 §5.4) between a binary message and a ping.
    server.write(&mut wire, Message::Binary(Bytes::from_static(b"binary"))).unwrap();
    server.write(&mut wire, Message::Frame(first)).unwrap();
    server.write(&mut wire, Message::Ping(Bytes::from_static(b"p"))).unwrap();
    let last = Frame::message(Bytes::from_static(b"Content-Length: 0\r\n\r\n"), OpCode::Data(Data::Continue), true);
    server.write(&mut wire, Message::Frame(last)).unwrap();
    server.write(&mut wire, Message::text(OPTIONS)).unwrap();
    server.flush(&mut wire).unwrap();
    let mut messages = Vec::new();
    let mut answered = Vec::new();
    // One byte at a time: the client keeps what is incomplete.
    for b in wire.to_client {
        let (result, out, output) = feed(&mut client, &[b]);
        assert_eq!(result, Ok(()));
        messages.extend(out.into_iter().map(|m| (m.bytes, m.from)));
        answered.extend(output);
    }
    let expected = [&b"binary"[..], b"OPTIONS sip:a SIP/2.0\r\nContent-Length: 0\r\n\r\n", OPTIONS.as_bytes()];
    assert_eq!(messages.iter().map(|(b, _)| &b[..]).collect::<Vec<_>>(), expected);
    assert!(messages.iter().all(|(_, from)| *from == peer()));
    // The ping was answered with a pong carrying its payload (§5.5.3).
    assert_eq!(server_reads(&mut server, answered), vec![Message::Pong(Bytes::from_static(b"p"))]);
}

#[test]
fn messages_sent_during_the_upgrade_wait_for_it() {
    let mut request = Vec::new();
    let mut client = WsClient::connect("127.0.0.1:5066", false, LIMIT, &mut request).unwrap();
    let mut output = Vec::new();
    assert!(client.send(Bytes::from_static(OPTIONS.as_bytes()), &mut output));
    assert!(output.is_empty(), "nothing but the upgrade before the 101");
    // The 101 and a first frame in one read.
    let mut server = WebSocketContext::new(Role::Server, None);
    let mut answer = switching(&request, Some("sip"));
    answer.extend(server_writes(&mut server, vec![Message::text("hello")]));
    let (result, out, output) = feed(&mut client, &answer);
    assert_eq!(result, Ok(()));
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].bytes[..], b"hello");
    assert_eq!(server_reads(&mut server, output), vec![Message::text(OPTIONS)]);
}

#[test]
fn a_close_from_the_server_is_answered_and_ends_the_connection() {
    let (mut client, mut server) = open();
    let close = CloseFrame { code: CloseCode::Away, reason: "shutting down".into() };
    let bytes = server_writes(&mut server, vec![Message::Close(Some(close.clone()))]);
    let (result, _, output) = feed(&mut client, &bytes);
    let err = result.unwrap_err();
    assert!(err.contains("closed by the peer (1001 shutting down)"), "{err}");
    // RFC 6455 §5.5.1: the client answers with a close frame (FIN, opcode 8, masked) echoing
    // the status, which completes the server's close handshake.
    assert_eq!((output[0], output[1] & 0x80), (0x88, 0x80));
    let mut wire = Wire { from_client: io::Cursor::new(output), ..Default::default() };
    assert_eq!(server.read(&mut wire).unwrap(), Message::Close(Some(close)));
    assert!(matches!(server.read(&mut wire), Err(tungstenite::Error::ConnectionClosed)));
    assert!(!client.send(Bytes::from_static(b"late"), &mut Vec::new()));
}

#[test]
fn a_message_over_the_limit_or_an_unmasked_protocol_error_ends_the_connection() {
    let (mut client, mut server) = open();
    let big = server_writes(&mut server, vec![Message::Binary(Bytes::from(vec![b'x'; LIMIT + 1]))]);
    let err = feed(&mut client, &big).0.unwrap_err();
    assert!(err.contains("Space limit exceeded") || err.contains("too long"), "{err}");

    // A server must not mask its frames (RFC 6455 §5.1).
    let (mut client, _) = open();
    let mut masked = Frame::message(Bytes::from_static(b"x"), OpCode::Data(Data::Binary), true);
    masked.header_mut().mask = Some([1, 2, 3, 4]);
    let mut bytes = Vec::new();
    masked.format(&mut bytes).unwrap();
    let err = feed(&mut client, &bytes).0.unwrap_err();
    assert!(err.starts_with("WebSocket: "), "{err}");
}

#[test]
fn the_end_of_a_run_sends_a_normal_close_frame_and_nothing_after() {
    let (mut client, mut server) = open();
    let mut output = Vec::new();
    client.close(&mut output);
    let mut wire = Wire { from_client: io::Cursor::new(output), ..Default::default() };
    match server.read(&mut wire) {
        Ok(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Normal),
        other => panic!("expected a close frame with 1000, got {other:?}"),
    }
    // The close frame was the last thing the client wrote (the server has no more to read).
    assert!(matches!(server.read(&mut wire), Err(tungstenite::Error::ConnectionClosed)));
    // Closed: a later message is refused, and a second close writes nothing.
    let mut after = Vec::new();
    assert!(!client.send(Bytes::from_static(b"OPTIONS sip:x SIP/2.0\r\n\r\n"), &mut after));
    client.close(&mut after);
    assert!(after.is_empty());
}
