//! What tests/gateways.rs starts: SIPp gateways on fixed loopback ports (so that one can be
//! killed and started again where herald's `[[gateway_set]]` expects it), their INVITE counts
//! (SIPp `-trace_counts`), SIPp callers with a From user per call, and a herald configuration
//! with gateway sets and `[[route]]` prefixes.

use crate::common::{port_block, port_taken, tail, wait_bound, BLOCK};
use std::fs::{self, File};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp").join(name)
}

/// A block of ports ([`port_block`]) held for the whole test: its last port stays bound, so
/// that another test process (which takes only blocks with every port free) cannot take the
/// block while its gateway is down or when nothing is meant to answer there.
pub struct Reserved {
    pub port: u16,
    _hold: UdpSocket,
}

impl Reserved {
    pub fn block() -> Reserved {
        let port = port_block();
        let hold = UdpSocket::bind(("127.0.0.1", port + BLOCK - 1))
            .unwrap_or_else(|e| panic!("hold port {}: {e}", port + BLOCK - 1));
        Reserved { port, _hold: hold }
    }

    /// `sip:127.0.0.1:PORT` with nothing listening: a dead destination.
    pub fn uri(&self) -> String {
        format!("sip:127.0.0.1:{}", self.port)
    }
}

/// A SIPp UAS playing a gateway (tests/sipp/gateway.xml or gateway_busy.xml): its SIP port
/// stays the same across [`Gateway::kill`] and [`Gateway::restart`]. Killed on drop.
pub struct Gateway {
    pub name: String,
    pub port: u16,
    scenario: &'static str,
    dir: PathBuf,
    child: Option<Child>,
    /// Keeps this gateway's port block across a kill and a restart.
    _block: Reserved,
    /// INVITEs counted by the processes that ran before this one (a restart starts at 0).
    earlier: u64,
    runs: u32,
}

impl Gateway {
    /// Starts `scenario` on a fresh block of ports (SIP, control, media), files in `dir/name/`.
    pub fn start(dir: &Path, name: &str, scenario: &'static str) -> Gateway {
        let block = Reserved::block();
        let port = block.port;
        let dir = dir.join(name);
        fs::create_dir_all(&dir).unwrap();
        let mut g = Gateway { name: name.into(), port, scenario, dir, child: None, earlier: 0, runs: 0, _block: block };
        g.spawn();
        g
    }

    /// `sip:127.0.0.1:PORT`, as the configuration names it.
    pub fn uri(&self) -> String {
        format!("sip:127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        self.runs += 1;
        let run = self.dir.join(format!("run{}", self.runs));
        fs::create_dir_all(&run).unwrap();
        let (p, cp, mp) = (self.port.to_string(), (self.port + 1).to_string(), (self.port + 2).to_string());
        let child = Command::new("sipp")
            .current_dir(&run)
            .args([
                "-sf",
                scenario(self.scenario).to_str().unwrap(),
                "-i",
                "127.0.0.1",
                "-p",
                &p,
                "-cp",
                &cp,
                "-mp",
                &mp,
            ])
            // Counts dumped every second (and at exit), errors kept for failure messages.
            .args(["-nostdin", "-trace_counts", "-fd", "1", "-trace_err", "-error_file", "errors.log"])
            // A Call-ID seen before is a new call here (SIPp's default keeps a dead call's Call-ID
            // 33 s and ignores what comes for it): the Call-ID hash test calls the same IDs twice.
            .args(["-deadcall_wait", "100"])
            .stdin(Stdio::null())
            .stdout(File::create(run.join("screen.txt")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sipp (package sip-tester): {e}"));
        self.child = Some(child);
        wait_bound(self.port, false);
        // The port bound may be another's: SIPp then exits at once, saying so.
        std::thread::sleep(Duration::from_millis(100));
        if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
            panic!("{}: sipp exited ({st}) on port {}: {}", self.name, self.port, self.errors());
        }
    }

    /// The INVITEs this gateway has received, all its runs together, as of SIPp's last dump
    /// (once a second: call [`Gateway::settle`] first for an exact figure).
    pub fn invites(&self) -> u64 {
        self.earlier + self.current_invites()
    }

    fn current_invites(&self) -> u64 {
        let run = self.dir.join(format!("run{}", self.runs));
        let Some(counts) = fs::read_dir(&run)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with("_counts.csv"))
        else {
            return 0;
        };
        let text = fs::read_to_string(counts).unwrap_or_default();
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { return 0 };
        let Some(last) = lines.next_back() else { return 0 };
        let col = head.split(';').position(|c| c.ends_with("_INVITE_Recv")).expect("an INVITE column");
        last.split(';').nth(col).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    }

    /// Waits until SIPp has dumped its counts after the last call ended.
    pub fn settle() {
        std::thread::sleep(Duration::from_millis(1300));
    }

    /// SIGKILL: the port stops answering at once (ICMP port unreachable).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.earlier += self.current_invites();
        let deadline = Instant::now() + Duration::from_secs(5);
        while port_taken(self.port, false) {
            assert!(Instant::now() < deadline, "{}: port {} still bound after the kill", self.name, self.port);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the gateway again on the same port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill");
        self.spawn();
    }

    /// The last lines of SIPp's errors, for failure messages.
    pub fn errors(&self) -> String {
        tail(&self.dir.join(format!("run{}", self.runs)).join("errors.log"), 20)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One `[[gateway_set]]` of the test configuration.
pub struct Set<'a> {
    pub name: &'a str,
    pub algorithm: &'a str,
    /// (gateway URI, weight, priority)
    pub destinations: Vec<(String, u32, u32)>,
    /// `[[route]]` user prefix that sends calls to this set.
    pub prefix: &'a str,
    /// Extra lines for the set's sub-tables (`[gateway_set.probing]` ...), written after it.
    pub extra: &'a str,
}

/// The TOML herald gets (in place of the tests' default `[flood]`/`[auth]` sections): the load's
/// loopback address trusted, no authentication, one `[[route]]` per set and the sets.
pub fn herald_toml(sets: &[Set]) -> String {
    let mut t = String::from("[flood]\ntrusted = [\"127.0.0.0/8\"]\n[auth]\nenabled = false\n");
    for s in sets {
        t += &format!(
            "[[route]]\nname = \"to-{}\"\nuser_prefix = \"{}\"\ngateway_set = \"{}\"\nallow_unauthenticated = true\n",
            s.name, s.prefix, s.name
        );
    }
    for s in sets {
        t += &format!("[[gateway_set]]\nname = \"{}\"\nalgorithm = \"{}\"\n", s.name, s.algorithm);
        for (uri, weight, priority) in &s.destinations {
            t += &format!("[[gateway_set.destinations]]\nuri = \"{uri}\"\nweight = {weight}\npriority = {priority}\n");
        }
        t += s.extra;
    }
    t
}

/// What a SIPp caller (tests/sipp/gateway_caller.xml) does: `calls` calls to the user `number`
/// at `rate` per second, each From user taken in turn from `from`, Call-IDs from `call_ids`
/// (SIPp's -cid_str: `%u` is the call number) when given.
pub struct Calls<'a> {
    pub number: &'a str,
    pub from: &'a [&'a str],
    pub calls: u32,
    pub rate: u32,
    pub call_ids: Option<&'a str>,
}

/// Runs a SIPp caller to `herald` as `c` says and returns the run.
pub fn call(dir: &Path, name: &str, herald: std::net::SocketAddr, c: &Calls) -> crate::common::SippRun {
    let Calls { number, from: from_users, calls, rate, call_ids } = *c;
    let users = dir.join(format!("{name}_users.csv"));
    let mut text = String::from("SEQUENTIAL\n");
    for u in from_users {
        text += &format!("{u};\n");
    }
    fs::write(&users, text).unwrap();
    let (h, n, r) = (herald.to_string(), calls.to_string(), rate.to_string());
    let mut args = vec![h.as_str(), "-s", number, "-inf", users.to_str().unwrap(), "-m", &n, "-r", &r];
    args.extend(["-timeout", "60", "-recv_timeout", "10000"]);
    if let Some(cid) = call_ids {
        args.extend(["-cid_str", cid]);
    }
    crate::common::Sipp::start(dir, name, "gateway_caller.xml", &args).wait(Duration::from_secs(90))
}

/// A bare INVITE from `sock` to `number` at herald (no SDP: what is asked here is routing).
pub fn invite(herald: std::net::SocketAddr, sock: &UdpSocket, number: &str, call_id: &str) -> String {
    let local = sock.local_addr().unwrap();
    format!(
        "INVITE sip:{number}@{herald} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {local};branch=z9hG4bK-{call_id};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:caller@{local}>;tag=t-{call_id}\r\n\
         To: <sip:{number}@{herald}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:caller@{local}>\r\n\
         Content-Length: 0\r\n\r\n"
    )
}
