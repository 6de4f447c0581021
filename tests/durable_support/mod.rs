//! A UDP registration client and a tiny UAS for tests/durable.rs: many REGISTERs at a paced
//! rate with the time each 200 came back, REGISTER queries, and a callee that answers INVITEs.

use crate::common::{header_of, status_of};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// One socket that registers users `user0..`, each with the contact `sip:userN@<socket>`, and
/// later answers the INVITEs that reach those contacts.
pub struct Phones {
    pub socket: UdpSocket,
    pub local: SocketAddr,
    buf: Vec<u8>,
}

/// When each user's REGISTER got its 200 (index = user number).
pub type Answered = Vec<Option<Instant>>;

impl Phones {
    pub fn new() -> Phones {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let local = socket.local_addr().unwrap();
        Phones { socket, local, buf: vec![0; 65536] }
    }

    pub fn register_request(&self, user: usize, cseq: u32, expires: Option<u32>) -> String {
        let local = self.local;
        let (contact, kind) = match expires {
            Some(e) => (format!("Contact: <sip:user{user}@{local}>;expires={e}\r\n"), format!("e{e}")),
            None => (String::new(), "q".to_string()), // a query (RFC 3261 §10.2.3)
        };
        format!(
            "REGISTER sip:127.0.0.1 SIP/2.0\r\n\
             Via: SIP/2.0/UDP {local};branch=z9hG4bK-d{user}-{cseq}-{kind}\r\n\
             Max-Forwards: 70\r\n\
             From: <sip:user{user}@127.0.0.1>;tag=f{user}\r\n\
             To: <sip:user{user}@127.0.0.1>\r\n\
             Call-ID: durable-{user}\r\n\
             CSeq: {cseq} REGISTER\r\n\
             {contact}\
             Content-Length: 0\r\n\r\n"
        )
    }

    /// Every datagram waiting now: (user, status, Contact count) of REGISTER answers.
    fn drain(&mut self, mut on_answer: impl FnMut(usize, u16, usize)) {
        loop {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, _)) => {
                    let msg = &self.buf[..n];
                    let (Some(status), Some(call_id)) = (status_of(msg), header_of(msg, "Call-ID", "i")) else {
                        continue;
                    };
                    let Some(user) = call_id.strip_prefix("durable-").and_then(|u| u.parse().ok()) else { continue };
                    let text = String::from_utf8_lossy(msg);
                    let contacts = text.lines().filter(|l| l.to_ascii_lowercase().starts_with("contact:")).count();
                    on_answer(user, status, contacts);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }

    /// Registers users `0..n` at `rate` per second (CSeq `cseq`, `expires` seconds). `stop`
    /// is asked after every answer with the count of 200s so far; once it says so, nothing more
    /// is sent and the answers already on their way are read for 200 ms. Returns when each
    /// user's 200 came back.
    pub fn register_all(
        &mut self,
        herald: SocketAddr,
        n: usize,
        rate: f64,
        (cseq, expires): (u32, u32),
        mut stop: impl FnMut(usize) -> bool,
    ) -> Answered {
        let mut answered: Answered = vec![None; n];
        let mut ok = 0;
        let started = Instant::now();
        let mut sent = 0;
        let mut stopped = false;
        let deadline = started + Duration::from_secs_f64(n as f64 / rate) + Duration::from_secs(10);
        while Instant::now() < deadline {
            let due = ((started.elapsed().as_secs_f64() * rate) as usize).min(n);
            while !stopped && sent < due {
                let req = self.register_request(sent, cseq, Some(expires));
                let _ = self.socket.send_to(req.as_bytes(), herald);
                sent += 1;
            }
            self.drain(|user, status, _| {
                if status == 200 && user < n && answered[user].is_none() {
                    answered[user] = Some(Instant::now());
                    ok += 1;
                    stopped |= stop(ok);
                }
            });
            if stopped || ok == n {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let tail = Instant::now() + Duration::from_millis(200);
        while Instant::now() < tail {
            self.drain(|user, status, _| {
                if status == 200 && user < n && answered[user].is_none() {
                    answered[user] = Some(Instant::now());
                }
            });
            std::thread::sleep(Duration::from_millis(5));
        }
        answered
    }

    /// How many bindings herald holds for each of `users` (REGISTER queries, paced at `rate`,
    /// unanswered ones asked again).
    pub fn query(&mut self, herald: SocketAddr, users: &[usize], rate: f64) -> HashMap<usize, usize> {
        let mut got = HashMap::new();
        for round in 0..5u32 {
            let left: Vec<usize> = users.iter().copied().filter(|u| !got.contains_key(u)).collect();
            if left.is_empty() {
                break;
            }
            let started = Instant::now();
            let mut sent = 0;
            let end = started + Duration::from_secs_f64(left.len() as f64 / rate) + Duration::from_millis(500);
            while Instant::now() < end {
                let due = ((started.elapsed().as_secs_f64() * rate) as usize).min(left.len());
                while sent < due {
                    let req = self.register_request(left[sent], 1000 + round, None);
                    let _ = self.socket.send_to(req.as_bytes(), herald);
                    sent += 1;
                }
                self.drain(|user, status, contacts| {
                    if status == 200 {
                        got.insert(user, contacts);
                    }
                });
                if sent == left.len() && left.iter().all(|u| got.contains_key(u)) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        got
    }

    /// Answers the next INVITE that reaches this socket with 200 OK (within `timeout`); `true`
    /// if one came.
    pub fn answer_invite(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) if self.buf[..n].starts_with(b"INVITE ") => {
                    let text = String::from_utf8_lossy(&self.buf[..n]).into_owned();
                    let mut resp = String::from("SIP/2.0 200 OK\r\n");
                    for line in text.split("\r\n").take_while(|l| !l.is_empty()).skip(1) {
                        let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
                        match name.as_str() {
                            "via" | "v" | "from" | "f" | "call-id" | "i" | "cseq" | "record-route" => {
                                resp += line;
                                resp += "\r\n";
                            }
                            "to" | "t" => resp += &format!("{line};tag=callee\r\n"),
                            _ => {}
                        }
                    }
                    resp += &format!("Contact: <sip:callee@{}>\r\nContent-Length: 0\r\n\r\n", self.local);
                    self.socket.send_to(resp.as_bytes(), from).unwrap();
                    return true;
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => panic!("recv: {e}"),
            }
        }
        false
    }
}

/// Calls `user` (registered by `callee`) through herald from a fresh socket; the callee
/// answers. Returns the final status the caller got (or `None` within `timeout`).
pub fn call(herald: SocketAddr, callee: &mut Phones, user: usize, timeout: Duration) -> Option<u16> {
    let caller = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = caller.local_addr().unwrap();
    caller.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let invite = format!(
        "INVITE sip:user{user}@127.0.0.1 SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-call{user};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:caller@127.0.0.1>;tag=caller\r\n\
         To: <sip:user{user}@127.0.0.1>\r\n\
         Call-ID: durable-call-{user}\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:caller@{local}>\r\n\
         Content-Length: 0\r\n\r\n"
    );
    caller.send_to(invite.as_bytes(), herald).unwrap();
    let deadline = Instant::now() + timeout;
    let mut answered = false;
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline {
        if !answered {
            answered = callee.answer_invite(Duration::from_millis(20));
        }
        if let Ok((n, _)) = caller.recv_from(&mut buf) {
            match status_of(&buf[..n]) {
                Some(s) if s >= 200 => return Some(s),
                _ => {}
            }
        }
    }
    None
}
