//! The test's HTTP control server on 127.0.0.1 (a port the kernel picks): it serves the phone page
//! and JsSIP to the browsers, receives what each phone reports (`POST /event?phone=NAME`, a JSON
//! object with an `event` field) and hands out the commands the test queues for it
//! (`GET /command?phone=NAME`: 200 with one JSON command, or 204 when there is none).
//!
//! One thread accepts, one thread per connection answers; every response closes its connection
//! (`Connection: close`), so there is no keep-alive state to get wrong.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One report of a phone.
#[derive(Clone, Debug)]
pub struct Event {
    pub phone: String,
    pub body: Value,
}

impl Event {
    pub fn name(&self) -> &str {
        self.body["event"].as_str().unwrap_or("")
    }
}

#[derive(Default)]
struct State {
    events: Mutex<Vec<Event>>,
    arrived: Condvar,
    commands: Mutex<HashMap<String, VecDeque<Value>>>,
}

pub struct Control {
    pub addr: SocketAddr,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

/// The files the server hands out: the page and the vendored JsSIP bundle, read once at start.
struct Files {
    page: Vec<u8>,
    jssip: Vec<u8>,
}

impl Control {
    pub fn start() -> Control {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser_support");
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()));
        let files = Arc::new(Files { page: read("phone.html"), jssip: read("jssip.min.js") });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (state, files) = (state.clone(), files.clone());
                    std::thread::spawn(move || {
                        let _ = serve(conn, &state, &files);
                    });
                }
            })
        };
        Control { addr, state, stop, acceptor: Some(acceptor) }
    }

    /// The page URL of phone `name` with the given query parameters (values URL-encoded here).
    pub fn phone_url(&self, name: &str, params: &[(&str, &str)]) -> String {
        let mut q = format!("name={}", encode(name));
        for (k, v) in params {
            q += &format!("&{k}={}", encode(v));
        }
        format!("http://{}/phone.html?{q}", self.addr)
    }

    /// Queues `command` for phone `phone` (it polls every 100 ms).
    pub fn command(&self, phone: &str, command: Value) {
        self.state.commands.lock().unwrap().entry(phone.to_owned()).or_default().push_back(command);
    }

    /// Every report so far.
    pub fn events(&self) -> Vec<Event> {
        self.state.events.lock().unwrap().clone()
    }

    /// Waits until `find` picks a value out of the reports so far (it sees them all, in order,
    /// each time one arrives), or until `timeout`: `Err` with every report received.
    pub fn wait_for<T>(&self, timeout: Duration, mut find: impl FnMut(&[Event]) -> Option<T>) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        let mut events = self.state.events.lock().unwrap();
        loop {
            if let Some(found) = find(&events) {
                return Ok(found);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("nothing within {timeout:?}; reports so far:\n{}", describe(&events)));
            }
            events = self.state.arrived.wait_timeout(events, left).unwrap().0;
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// Reports, one a line, SDP bodies shortened, for failure messages.
pub fn describe(events: &[Event]) -> String {
    let line = |e: &Event| {
        let mut body = e.body.clone();
        if let Some(sdp) = body.get_mut("sdp") {
            *sdp = Value::from(format!("<{} bytes of SDP>", sdp.as_str().map_or(0, str::len)));
        }
        format!("  {}: {body}", e.phone)
    };
    events.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// Percent-encodes everything but unreserved characters (RFC 3986 §2.3).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of `key` in a query string whose values the page encoded with encodeURIComponent
/// (phone names here are plain words, so no decoding is needed).
fn query_value<'a>(target: &'a str, key: &str) -> Option<&'a str> {
    let query = target.split_once('?')?.1;
    query.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Answers one HTTP/1.1 request on `conn`, then closes it.
fn serve(conn: TcpStream, state: &State, files: &Files) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let phone = query_value(target, "phone").unwrap_or("").to_owned();
    let (status, kind, content): (&str, &str, Vec<u8>) = match (method, path) {
        ("GET", "/phone.html") => ("200 OK", "text/html; charset=utf-8", files.page.clone()),
        ("GET", "/jssip.min.js") => ("200 OK", "text/javascript; charset=utf-8", files.jssip.clone()),
        ("POST", "/event") => match serde_json::from_slice::<Value>(&body) {
            Ok(body) => {
                state.events.lock().unwrap().push(Event { phone, body });
                state.arrived.notify_all();
                ("204 No Content", "text/plain", Vec::new())
            }
            Err(e) => ("400 Bad Request", "text/plain", e.to_string().into_bytes()),
        },
        ("GET", "/command") => match state.commands.lock().unwrap().get_mut(&phone).and_then(VecDeque::pop_front) {
            Some(cmd) => ("200 OK", "application/json", cmd.to_string().into_bytes()),
            None => ("204 No Content", "text/plain", Vec::new()),
        },
        _ => ("404 Not Found", "text/plain", Vec::new()),
    };
    let mut conn = reader.into_inner();
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         Connection: close\r\n\r\n",
        content.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(&content)?;
    conn.flush()
}
