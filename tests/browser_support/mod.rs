//! Browser phones for tests/browser_ws.rs: headless Chromium running JsSIP (vendored, see
//! README.md here) against a real `herald serve` with WebSocket listeners.
//!
//! * [`control`]: the test's HTTP server: serves the page, collects the phones' reports, queues
//!   commands for them.
//! * [`chromium`]: one headless Chromium per phone, killed on drop.
//! * [`herald`]: herald with `ws` and `wss` listeners and digest authentication.
//! * [`Lab`]: the three together, with bounded waits that fail with everything a reader needs
//!   (the reports, each browser's log, herald's log).
//!
//! Files: `target/tmp/<test>/` (herald's config, users file, log and certificates, each
//! browser's log and profile, SIPp's files).

pub mod chromium;
pub mod control;
pub mod herald;

use crate::common::{log_excerpt, tail, test_dir};
use chromium::{spki_sha256, Chromium};
use control::{describe, Control, Event};
use herald::{WsHerald, DOMAIN};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Reports after which a phone cannot reach what a test waits for.
const FATAL: [&str; 4] = ["failed", "registrationFailed", "disconnected", "error"];

/// Which listener a phone connects to.
#[derive(Clone, Copy, Debug)]
pub enum Ws {
    Plain,
    Secure,
}

pub struct Lab {
    /// Dropped first: the browsers go before the servers they talk to.
    browsers: Vec<(String, Chromium)>,
    pub control: Control,
    pub herald: WsHerald,
    pub dir: PathBuf,
}

impl Lab {
    /// herald with `users` (name, password) in [`DOMAIN`], and the control server; no browser
    /// yet.
    pub fn new(test: &str, users: &[(&str, &str)]) -> Lab {
        require("chromium", "chromium");
        let dir = test_dir(test);
        let herald = WsHerald::start(&dir, users);
        Lab { browsers: Vec::new(), control: Control::start(), herald, dir }
    }

    /// Opens a browser phone `name` (a user of [`DOMAIN`] with `password`) on `ws`.
    pub fn open_phone(&mut self, name: &str, password: &str, ws: Ws) {
        let url = match ws {
            Ws::Plain => format!("ws://{}", self.herald.ws),
            Ws::Secure => format!("wss://{}", self.herald.wss),
        };
        let uri = format!("sip:{name}@{DOMAIN}");
        let page = self.control.phone_url(name, &[("ws", &url), ("uri", &uri), ("password", password)]);
        // herald's certificate is self-signed by a CA the test made: trusted by its key alone.
        let trusted = [spki_sha256(&self.herald.pki.cert)];
        self.browsers.push((name.to_owned(), Chromium::open(&self.dir, name, &page, &trusted)));
    }

    /// Queues a command for phone `name` (see phone.html: `{"call": URI}`, `{"hangup": true}`).
    pub fn command(&self, name: &str, command: Value) {
        self.control.command(name, command);
    }

    /// The first report `event` of phone `name` (its whole JSON object), waiting up to
    /// `timeout`. Fails at once if the phone reports something it cannot recover from.
    pub fn expect(&mut self, name: &str, event: &str, timeout: Duration) -> Value {
        self.herald.assert_running();
        let found = self.control.wait_for(timeout, |events: &[Event]| {
            let mine = || events.iter().filter(|e| e.phone == name);
            if let Some(e) = mine().find(|e| e.name() == event) {
                return Some(Ok(e.body.clone()));
            }
            mine().find(|e| FATAL.contains(&e.name())).map(|e| Err(format!("{name} reported {}", e.body)))
        });
        match found {
            Ok(Ok(body)) => body,
            Ok(Err(fatal)) => panic!("waiting for {name}'s {event}: {fatal}\n{}", self.diagnosis()),
            Err(e) => panic!("waiting for {name}'s {event}: {e}\n{}", self.diagnosis()),
        }
    }

    /// The SDP body phone `name` reported as `originator` ("local": sent, "remote": received)
    /// with `kind` ("offer" or "answer").
    pub fn sdp(&self, name: &str, originator: &str, kind: &str) -> String {
        let events = self.control.events();
        let found = events.iter().find(|e| {
            e.phone == name && e.name() == "sdp" && e.body["originator"] == originator && e.body["type"] == kind
        });
        match found {
            Some(e) => e.body["sdp"].as_str().unwrap().to_owned(),
            None => panic!("{name} reported no {originator} {kind}:\n{}", describe(&events)),
        }
    }

    /// Every report, each browser's log tail and herald's log, for a failure message.
    pub fn diagnosis(&self) -> String {
        let mut s = format!("reports:\n{}\n", describe(&self.control.events()));
        for (name, b) in &self.browsers {
            s += &format!("--- {name}'s Chromium log ({}):\n{}\n", b.log.display(), b.log_tail(60));
        }
        s + &format!("--- herald's log:\n{}", log_excerpt(&self.herald.log))
    }
}

/// Panics with the Debian package to install when `program` is not on the PATH.
pub fn require(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    assert!(found, "{program} not found: install the Debian package {package} (scripts/test.sh does)");
}

/// One message of a SIPp `-trace_msg` log, as SIPp received or sent it.
pub struct Traced {
    pub received: bool,
    pub text: String,
}

impl Traced {
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("")
    }

    /// The values of header `name` (case-insensitive, one per line as SIPp and herald write
    /// them), in order.
    pub fn header<'a>(&'a self, name: &str) -> Vec<&'a str> {
        let head = self.text.split("\r\n\r\n").next().unwrap_or("");
        let value = |line: &'a str| -> Option<&'a str> {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        };
        head.lines().skip(1).filter_map(value).collect()
    }

    /// The body: everything after the first empty line.
    pub fn body(&self) -> &str {
        let at = self.text.find("\r\n\r\n").map(|i| i + 4).or_else(|| self.text.find("\n\n").map(|i| i + 2));
        at.map_or("", |i| &self.text[i..])
    }
}

/// The messages of a SIPp `-trace_msg` log, in order, byte for byte: each is logged as
/// "----- <time>\nUDP message received [N] bytes :\n\n<N bytes>\n" or
/// "... message sent (N bytes):\n\n<N bytes>\n".
pub fn sipp_messages(path: &std::path::Path) -> Vec<Traced> {
    let log = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), tail(path, 5)));
    let mut out = Vec::new();
    for block in log.split("----------------------------------------------- ").skip(1) {
        let mut parts = block.splitn(3, '\n');
        let (_time, kind, rest) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let received = kind.contains("message received");
        if !received && !kind.contains("message sent") {
            continue;
        }
        let digits: String =
            kind.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
        let len: usize = digits.parse().unwrap_or_else(|_| panic!("{}: no length in {kind:?}", path.display()));
        let text = rest.strip_prefix('\n').unwrap_or(rest);
        let text = text.get(..len).unwrap_or_else(|| panic!("{}: {len} bytes announced in {kind:?}", path.display()));
        out.push(Traced { received, text: text.to_owned() });
    }
    out
}
