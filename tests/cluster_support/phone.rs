//! Small SIP user agents over UDP, TCP and WebSocket (tungstenite), enough to register, be
//! called (answer an INVITE, take the ACK, answer the BYE) and to call with a digest answer.
//! Messages are text; headers are read by name, full names only (herald writes full names).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message as WsMessage, WebSocket};

/// A connection to one herald node over one transport.
pub enum Conn {
    Udp { sock: UdpSocket, node: SocketAddr },
    Tcp { stream: TcpStream, buf: Vec<u8> },
    Ws { ws: Box<WebSocket<TcpStream>> },
}

impl Conn {
    pub fn udp(ip: &str, node: SocketAddr) -> Conn {
        let sock = UdpSocket::bind((ip, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        Conn::Udp { sock, node }
    }

    pub fn tcp(node: SocketAddr) -> Conn {
        let stream = TcpStream::connect(node).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        Conn::Tcp { stream, buf: Vec::new() }
    }

    pub fn ws(node: SocketAddr) -> Conn {
        let stream = TcpStream::connect(node).unwrap();
        let mut req = format!("ws://{node}/").into_client_request().unwrap();
        req.headers_mut().insert("Sec-WebSocket-Protocol", "sip".parse().unwrap());
        let (ws, resp) = tungstenite::client(req, stream).expect("WebSocket upgrade");
        assert_eq!(resp.status(), 101);
        ws.get_ref().set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        Conn::Ws { ws: Box::new(ws) }
    }

    /// `transport` for a Via, and the address for its sent-by.
    pub fn via(&self) -> (&'static str, String) {
        match self {
            Conn::Udp { sock, .. } => ("UDP", sock.local_addr().unwrap().to_string()),
            Conn::Tcp { stream, .. } => ("TCP", stream.local_addr().unwrap().to_string()),
            Conn::Ws { .. } => ("WS", "df7jal23ls0d.invalid".into()),
        }
    }

    pub fn local(&self) -> SocketAddr {
        match self {
            Conn::Udp { sock, .. } => sock.local_addr().unwrap(),
            Conn::Tcp { stream, .. } => stream.local_addr().unwrap(),
            Conn::Ws { ws } => ws.get_ref().local_addr().unwrap(),
        }
    }

    pub fn send(&mut self, msg: &str) {
        match self {
            Conn::Udp { sock, node } => {
                sock.send_to(msg.as_bytes(), *node).unwrap();
            }
            Conn::Tcp { stream, .. } => stream.write_all(msg.as_bytes()).unwrap(),
            Conn::Ws { ws } => ws.send(WsMessage::text(msg.to_owned())).unwrap(),
        }
    }

    /// The next SIP message, or `None` after `wait`.
    pub fn recv(&mut self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(m) = self.try_recv() {
                return Some(m);
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    fn try_recv(&mut self) -> Option<String> {
        match self {
            Conn::Udp { sock, .. } => {
                let mut buf = vec![0u8; 65536];
                match sock.recv_from(&mut buf) {
                    Ok((n, _)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
                    Err(e) => panic!("udp recv: {e}"),
                }
            }
            Conn::Tcp { stream, buf } => {
                if let Some(m) = frame(buf) {
                    return Some(m);
                }
                let mut chunk = [0u8; 8192];
                match stream.read(&mut chunk) {
                    Ok(0) => panic!("herald closed the TCP connection"),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => panic!("tcp read: {e}"),
                }
                frame(buf)
            }
            Conn::Ws { ws } => match ws.read() {
                Ok(WsMessage::Text(t)) => Some(t.to_string()),
                Ok(WsMessage::Binary(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                Ok(_) => None,
                Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    None
                }
                Err(e) => panic!("ws read: {e}"),
            },
        }
    }
}

/// One whole message off the front of a TCP buffer (RFC 3261 §18.3: Content-Length framing);
/// CRLF keep-alives are skipped.
fn frame(buf: &mut Vec<u8>) -> Option<String> {
    while buf.starts_with(b"\r\n") {
        buf.drain(..2);
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = header(&head, "Content-Length").and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    if buf.len() < end + len {
        return None;
    }
    let msg = String::from_utf8_lossy(&buf[..end + len]).into_owned();
    buf.drain(..end + len);
    Some(msg)
}

/// The first value of header `name`.
pub fn header<'a>(msg: &'a str, name: &'static str) -> Option<&'a str> {
    headers(msg, name).next()
}

/// Every value of header `name`, in order (one per header line).
pub fn headers<'a>(msg: &'a str, name: &'static str) -> impl Iterator<Item = &'a str> + 'a {
    msg.split("\r\n\r\n").next().unwrap_or("").lines().skip(1).filter_map(move |l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

pub fn status(msg: &str) -> Option<u16> {
    msg.strip_prefix("SIP/2.0 ")?.get(..3)?.parse().ok()
}

pub fn method(msg: &str) -> Option<&str> {
    let first = msg.lines().next()?;
    (!first.starts_with("SIP/2.0")).then(|| first.split(' ').next()).flatten()
}

/// A response to request `req` with `code`, its Vias, From, To (tagged), Call-ID, CSeq and
/// Record-Route copied (RFC 3261 §8.2.6.2, §12.1.1), and a Contact.
pub fn response(req: &str, code: u16, reason: &str, to_tag: &str, contact: &str) -> String {
    let mut out = format!("SIP/2.0 {code} {reason}\r\n");
    for name in ["Via", "Record-Route"] {
        for v in headers(req, name) {
            out += &format!("{name}: {v}\r\n");
        }
    }
    let to = header(req, "To").unwrap();
    let to = if to.contains("tag=") { to.to_owned() } else { format!("{to};tag={to_tag}") };
    out += &format!(
        "From: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {}\r\nContact: <{contact}>\r\nContent-Length: 0\r\n\r\n",
        header(req, "From").unwrap(),
        header(req, "Call-ID").unwrap(),
        header(req, "CSeq").unwrap(),
    );
    out
}

/// `Contact: <URI>` → URI.
pub fn contact_uri(msg: &str) -> Option<String> {
    let c = header(msg, "Contact")?;
    let start = c.find('<')? + 1;
    Some(c[start..start + c[start..].find('>')?].to_owned())
}

/// A parameter of a challenge (`realm="x"` or `algorithm=MD5`).
fn challenge_param(challenge: &str, name: &str) -> Option<String> {
    let at = challenge.find(&format!("{name}="))? + name.len() + 1;
    let rest = &challenge[at..];
    Some(match rest.strip_prefix('"') {
        Some(q) => q[..q.find('"')?].to_owned(),
        None => rest.split([',', ' ']).next()?.to_owned(),
    })
}

/// The Proxy-Authorization value answering the challenge of `resp` for `method` `uri`.
pub fn digest_answer(resp: &str, method: &str, uri: &str, user: &str, password: &str) -> String {
    let ch = header(resp, "Proxy-Authenticate").expect("a challenge");
    let realm = challenge_param(ch, "realm").unwrap();
    let nonce = challenge_param(ch, "nonce").unwrap();
    let opaque = challenge_param(ch, "opaque");
    let qop = challenge_param(ch, "qop").is_some();
    herald_credentials::Answer {
        algorithm: herald_credentials::Algorithm::Md5,
        sess: false,
        user,
        realm: &realm,
        nonce: &nonce,
        uri,
        nc: qop.then_some(1),
        cnonce: "0a4f113b",
        opaque: opaque.as_deref(),
    }
    .header_value(method, password)
}
