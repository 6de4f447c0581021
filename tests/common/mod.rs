//! Shared helpers for the root crate's integration tests that drive the real `herald` binary:
//! free port blocks in 16000-16999, a running `herald serve` (killed on drop), SIPp runs with
//! their exit status and last `-trace_stat` row, and private network namespaces.
//!
//! Every file under `target/tmp/<test>/` (herald log, SIPp screens, statistics and error logs)
//! stays after the run for inspection.

#![allow(dead_code)] // each test crate uses a different subset

pub mod routes;
pub mod sip_client;

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, UdpSocket};
use std::os::raw::c_int;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The only ports these tests bind on the shared loopback (other servers run on the machine).
pub const PORT_MIN: u16 = 16000;
pub const PORT_MAX: u16 = 16999;
/// Ports handed out together: SIPp uses base (SIP), base+1 (control), base+2 and base+4
/// (media); herald uses base and probes it from base+1.
pub const BLOCK: u16 = 10;

/// How long herald may take to answer its first OPTIONS.
const START_TIMEOUT: Duration = Duration::from_secs(20);

extern "C" {
    fn kill(pid: c_int, sig: c_int) -> c_int;
    fn setns(fd: c_int, nstype: c_int) -> c_int;
}
pub const SIGHUP: c_int = 1;
pub const SIGKILL: c_int = 9;
const SIGTERM: c_int = 15;
const SIGCONT: c_int = 18;
const SIGSTOP: c_int = 19;
const CLONE_NEWNET: c_int = 0x4000_0000;

/// A process stopped with SIGSTOP ([`sigstop`]); it is resumed (SIGCONT) when this is dropped,
/// however the test ends.
pub struct Stopped(u32);

/// Sends `signal` to process `pid` (a herald the test started: SIGHUP reloads it, SIGKILL is a
/// crash), asserting it was delivered.
pub fn signal(pid: u32, signal: c_int) {
    // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
    assert_eq!(unsafe { kill(pid as c_int, signal) }, 0, "signal {signal} to {pid}");
}

/// Stops process `pid` (SIGSTOP: it reads nothing until resumed).
pub fn sigstop(pid: u32) -> Stopped {
    // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
    assert_eq!(unsafe { kill(pid as c_int, SIGSTOP) }, 0);
    Stopped(pid)
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `sigstop`.
        unsafe {
            kill(self.0 as c_int, SIGCONT);
        }
    }
}

/// Sends SIGTERM to a child process.
pub fn sigterm(child: &Child) {
    // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
    unsafe {
        kill(child.id() as c_int, SIGTERM);
    }
}

/// Stops a child: SIGTERM (herald drains), SIGKILL if it is still there after 10 s.
pub fn stop_child(child: &mut Child) {
    sigterm(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Where a test keeps its files: `target/tmp/<name>/`, emptied first.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The first port of a block of [`BLOCK`] ports in 16000-16999 that no socket uses (UDP or
/// TCP, any state). Blocks are never handed out twice by one process; the start depends on the
/// process id so that two test binaries running at once do not race for the same block.
pub fn port_block() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(usize::MAX);
    let blocks = usize::from((PORT_MAX - PORT_MIN + 1) / BLOCK);
    let _ = NEXT.compare_exchange(usize::MAX, std::process::id() as usize % blocks, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..blocks * 2 {
        let i = NEXT.fetch_add(1, Ordering::SeqCst) % blocks;
        let base = PORT_MIN + i as u16 * BLOCK;
        let used = local_ports(&["tcp", "tcp6", "udp", "udp6"], None);
        if !(base..base + BLOCK).any(|p| used.contains(&p)) {
            return base;
        }
    }
    panic!("no free block of {BLOCK} ports in {PORT_MIN}-{PORT_MAX}");
}

/// Local ports of the sockets listed in `/proc/net/<table>` (this thread's namespace), only
/// those in `state` (hex, e.g. "0A" for a TCP listener) if given. Reading the tables instead of
/// trying to bind never takes a port away from the server that is about to bind it.
fn local_ports(tables: &[&str], state: Option<&str>) -> HashSet<u16> {
    let mut ports = HashSet::new();
    for t in tables {
        let text = fs::read_to_string(format!("/proc/thread-self/net/{t}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 3 && state.is_none_or(|s| f[3] == s) {
                if let Some(p) = f[1].rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok()) {
                    ports.insert(p);
                }
            }
        }
    }
    ports
}

/// True once something listens on `port` (TCP when `tcp`, else a UDP socket is bound to it).
pub fn port_taken(port: u16, tcp: bool) -> bool {
    if tcp {
        local_ports(&["tcp", "tcp6"], Some("0A")).contains(&port)
    } else {
        local_ports(&["udp", "udp6"], None).contains(&port)
    }
}

/// Waits until a server (SIPp) has bound `port`.
pub fn wait_bound(port: u16, tcp: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !port_taken(port, tcp) {
        assert!(Instant::now() < deadline, "nothing bound port {port} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An OPTIONS to herald itself, answered with 200 by a live herald.
pub fn options_request(herald: SocketAddr, local: SocketAddr, call_id: &str, transport: &str) -> String {
    format!(
        "OPTIONS sip:{herald} SIP/2.0\r\n\
         Via: SIP/2.0/{transport} {local};branch=z9hG4bK-{call_id};rport\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:probe@{local}>;tag=probe\r\n\
         To: <sip:{herald}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 OPTIONS\r\n\
         Content-Length: 0\r\n\r\n"
    )
}

/// The status code of a response, if `msg` is one.
pub fn status_of(msg: &[u8]) -> Option<u16> {
    let rest = msg.strip_prefix(b"SIP/2.0 ")?;
    std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()
}

/// The value of the first header called `name` or `compact` (case-insensitive), trimmed.
pub fn header_of<'a>(msg: &'a [u8], name: &str, compact: &str) -> Option<&'a str> {
    let head = &msg[..find(msg, b"\r\n\r\n").unwrap_or(msg.len())];
    head.split(|b| *b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|b| *b == b':')?;
        let n = std::str::from_utf8(&line[..colon]).ok()?.trim();
        (n.eq_ignore_ascii_case(name) || n.eq_ignore_ascii_case(compact))
            .then(|| std::str::from_utf8(&line[colon + 1..]).ok().map(str::trim))
            .flatten()
    })
}

/// Sends `req` over UDP from `socket` to `herald` (again every 500 ms, ten times at most) until a
/// final response with its Call-ID `call_id` comes back, and returns its status; panics with
/// `what` when none does.
pub fn udp_final_status(socket: &UdpSocket, herald: SocketAddr, req: &str, call_id: &str, what: &str) -> u16 {
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = vec![0u8; 65536];
    for _ in 0..10 {
        socket.send_to(req.as_bytes(), herald).unwrap();
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            if let Ok((n, _)) = socket.recv_from(&mut buf) {
                let msg = &buf[..n];
                if header_of(msg, "Call-ID", "i") == Some(call_id) {
                    if let Some(s) = status_of(msg).filter(|s| *s >= 200) {
                        return s;
                    }
                }
            }
        }
    }
    panic!("{what} not answered");
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Sends OPTIONS over UDP from `socket` until herald answers it with 200 (`Ok`) or `timeout`.
pub fn udp_options_ok(socket: &UdpSocket, herald: SocketAddr, call_id: &str, timeout: Duration) -> Result<(), String> {
    let local = socket.local_addr().unwrap();
    let req = options_request(herald, local, call_id, "UDP");
    socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65536];
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        if let Err(e) = socket.send_to(req.as_bytes(), herald) {
            last = format!("send: {e}");
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let resend = Instant::now() + Duration::from_millis(500);
        while Instant::now() < resend {
            match socket.recv_from(&mut buf) {
                Ok((n, _)) if header_of(&buf[..n], "Call-ID", "i") == Some(call_id) => match status_of(&buf[..n]) {
                    Some(200) => return Ok(()),
                    Some(s) if s >= 200 => return Err(format!("OPTIONS answered {s}")),
                    _ => {}
                },
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => last = format!("recv: {e}"),
            }
        }
    }
    Err(last)
}

/// How `herald serve` is started. The default: `herald serve --listen 127.0.0.1:PORT` alone.
#[derive(Clone, Debug, Default)]
pub struct HeraldConfig {
    /// `[server] drain_timeout_s`; `None`: the built-in default. The config always turns
    /// `[auth]` off: these tests exercise routing, and SIPp's plain scenarios do not answer
    /// challenges (tests/sipp_auth.rs covers authentication).
    pub drain_timeout_s: Option<u32>,
    /// Run in a new network namespace with only `lo` (see [`Herald::start`]).
    pub private_netns: bool,
}

/// More configuration for [`Herald::start_with`] (kept apart so that `HeraldConfig` literals
/// elsewhere stay valid).
#[derive(Clone, Debug, Default)]
pub struct HeraldExtras {
    /// `[metrics] listen = "127.0.0.1:<base + 5>"` (see [`Herald::metrics_url`]).
    pub metrics: bool,
    /// `[server] udp_buffer_bytes`.
    pub udp_buffer_bytes: Option<usize>,
    /// `[server] workers` (default: one per core).
    pub workers: Option<usize>,
    /// TOML appended to the configuration in place of the sections these tests otherwise get
    /// (`[flood] trusted` loopback, so that load tests from one address are not banned, and
    /// `[auth] enabled = false`). Must not repeat `[server]`, `[metrics]` or `[tls]`.
    pub toml: Option<String>,
    /// (certificate, private key) PEM files: also listen on TLS at 127.0.0.1:<base + 3>
    /// (`--listen-tls`, see [`Herald::tls_addr`]).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Top-level `domains` (written before the first table, as TOML requires).
    pub domains: Vec<String>,
}

/// A running `herald serve --listen 127.0.0.1:PORT`. Dropping it sends SIGTERM and waits (then
/// SIGKILL if it does not stop); [`Herald::stop`] does the same and returns the exit status.
pub struct Herald {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    pub log: PathBuf,
    /// `http://127.0.0.1:<port>/metrics` when started with [`HeraldExtras::metrics`].
    pub metrics_url: Option<String>,
    /// The TLS listener, when started with [`HeraldExtras::tls`].
    pub tls_addr: Option<SocketAddr>,
    drain: Duration,
}

impl Herald {
    /// Starts herald with its log (stderr) in `dir/herald.log`, the log level from
    /// `HERALD_TEST_LOG` (default info), and waits until it answers an OPTIONS over UDP.
    ///
    /// With `private_netns` herald runs under `unshare --net` (root needed), and the calling
    /// thread is moved into that namespace (`setns`) before probing, so that every socket the
    /// thread opens afterwards lives there too: use a thread of its own for that.
    pub fn start(dir: &Path, cfg: &HeraldConfig) -> Herald {
        Herald::start_with(dir, cfg, &HeraldExtras::default())
    }

    /// [`Herald::start`] with [`HeraldExtras`].
    pub fn start_with(dir: &Path, cfg: &HeraldConfig, extras: &HeraldExtras) -> Herald {
        let base = if cfg.private_netns { PORT_MIN } else { port_block() };
        let addr: SocketAddr = format!("127.0.0.1:{base}").parse().unwrap();
        let log = dir.join("herald.log");
        let mut args: Vec<String> = vec!["serve".into(), "--listen".into(), addr.to_string()];
        let mut toml = String::new();
        if !extras.domains.is_empty() {
            let quoted: Vec<String> = extras.domains.iter().map(|d| format!("\"{d}\"")).collect();
            toml += &format!("domains = [{}]\n", quoted.join(", "));
        }
        toml += "[server]\n";
        if let Some(d) = cfg.drain_timeout_s {
            toml += &format!("drain_timeout_s = {d}\n");
        }
        if let Some(b) = extras.udp_buffer_bytes {
            toml += &format!("udp_buffer_bytes = {b}\n");
        }
        if let Some(w) = extras.workers {
            toml += &format!("workers = {w}\n");
        }
        let metrics_url = extras.metrics.then(|| {
            toml += &format!("[metrics]\nlisten = \"127.0.0.1:{}\"\n", base + 5);
            format!("http://127.0.0.1:{}/metrics", base + 5)
        });
        let tls_addr = extras.tls.as_ref().map(|(cert, key)| {
            let tls: SocketAddr = format!("127.0.0.1:{}", base + 3).parse().unwrap();
            args.push("--listen-tls".into());
            args.push(tls.to_string());
            toml += &format!("[tls]\ncertificate = \"{}\"\nprivate_key = \"{}\"\n", cert.display(), key.display());
            tls
        });
        match &extras.toml {
            Some(t) => toml += t,
            // A load generator is one address sending hundreds of requests per second: what a
            // trunk or a load generator is, trusted ([flood] would ban a scanner doing that).
            None => toml += "[flood]\ntrusted = [\"127.0.0.0/8\", \"::1\"]\n[auth]\nenabled = false\n",
        }
        let conf = dir.join("herald.toml");
        fs::write(&conf, toml).unwrap();
        args.push("--config".into());
        args.push(conf.to_str().unwrap().into());
        let herald = env!("CARGO_BIN_EXE_herald");
        let mut cmd = if cfg.private_netns {
            let mut c = Command::new("unshare");
            c.args(["--net", "--", "sh", "-c", r#"ip link set lo up && exec "$0" "$@""#, herald]);
            c
        } else {
            Command::new(herald)
        };
        cmd.args(&args)
            .env("RUST_LOG", std::env::var("HERALD_TEST_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start herald: {e}"));
        let drain = Duration::from_secs(u64::from(cfg.drain_timeout_s.unwrap_or(32)));
        let mut h = Herald { child: Some(child), addr, dir: dir.to_owned(), log, metrics_url, tls_addr, drain };
        if cfg.private_netns {
            h.enter_netns();
        }
        let deadline = Instant::now() + START_TIMEOUT;
        let mut probe = None;
        loop {
            if let Some(st) = h.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("herald exited at start ({st}); log:\n{}", log_excerpt(&h.log));
            }
            // In a new namespace, 127.0.0.1 exists once `ip link set lo up` has run.
            let bound = match &probe {
                Some(p) => Ok(p),
                None => UdpSocket::bind(("127.0.0.1", base + 1)).map(|p| &*probe.insert(p)),
            };
            let answered = bound
                .map_err(|e| format!("bind: {e}"))
                .and_then(|p| udp_options_ok(p, addr, "herald-start-probe", Duration::from_millis(500)));
            match answered {
                Ok(()) => break,
                Err(e) if Instant::now() > deadline => {
                    panic!("herald did not answer OPTIONS within {START_TIMEOUT:?} ({e}); log:\n{}", h.log_text())
                }
                Err(_) => {}
            }
        }
        h
    }

    /// Moves the calling thread into herald's network namespace once `unshare` has made it.
    fn enter_netns(&mut self) {
        let pid = self.child.as_ref().unwrap().id();
        let own = fs::read_link("/proc/thread-self/ns/net").unwrap();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "`unshare --net` + herald exited ({st}): a private network namespace needs root \
                     (CAP_SYS_ADMIN), `unshare` and `ip`; log:\n{}",
                    self.log_text()
                );
            }
            // `unshare` execs `sh`, which execs herald: same pid, new namespace once unshared.
            if fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|ns| ns != own) {
                break;
            }
            assert!(Instant::now() < deadline, "herald's network namespace did not appear");
            std::thread::sleep(Duration::from_millis(5));
        }
        let ns = File::open(format!("/proc/{pid}/ns/net")).unwrap();
        // SAFETY: setns(2) on an open namespace file descriptor; it only changes this thread.
        let rc = unsafe { setns(ns.as_raw_fd(), CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns into herald's network namespace: {}", std::io::Error::last_os_error());
    }

    /// The process id of herald (of `unshare` before it execs herald, with `private_netns`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The exit status if herald has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().unwrap())
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits for the drain (plus a margin); SIGKILL after that. Returns the exit
    /// status, or `None` if herald had to be killed.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.terminate()
    }

    fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        sigterm(&child);
        let deadline = Instant::now() + self.drain + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// A SIPp process started by [`Sipp::start`]; killed on drop if still running.
pub struct Sipp {
    child: Option<Child>,
    pub name: String,
    pub port: u16,
    stat: PathBuf,
    errors: PathBuf,
    screen: PathBuf,
}

/// What a SIPp run left: its exit status and the fields of the last `-trace_stat` row.
#[derive(Debug)]
pub struct SippRun {
    pub name: String,
    pub status: ExitStatus,
    pub stats: HashMap<String, String>,
    pub errors: String,
}

impl Sipp {
    /// Starts `sipp` in `dir` with `tests/sipp/<scenario>`, on a fresh port block (SIP, control
    /// and media ports), statistics in `<name>.csv`, errors in `<name>_errors.log`, screen in
    /// `<name>.screen`, then `args` (remote host, -m, -r, -key, ...).
    pub fn start(dir: &Path, name: &str, scenario: &str, args: &[&str]) -> Sipp {
        let port = port_block();
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp").join(scenario);
        let stat = dir.join(format!("{name}.csv"));
        let errors = dir.join(format!("{name}_errors.log"));
        let screen = dir.join(format!("{name}.screen"));
        let (p, cp, mp) = (port.to_string(), (port + 1).to_string(), (port + 2).to_string());
        let mut cmd = Command::new("sipp");
        cmd.current_dir(dir)
            .args(["-sf", scenario.to_str().unwrap(), "-i", "127.0.0.1", "-p", &p, "-cp", &cp, "-mp", &mp])
            .args(["-nostdin", "-trace_stat", "-stf", stat.to_str().unwrap(), "-fd", "5"])
            .args(["-trace_err", "-error_file", errors.to_str().unwrap()]);
        if std::env::var_os("HERALD_SIPP_TRACE").is_some() {
            let msgs = dir.join(format!("{name}_messages.log"));
            cmd.args(["-trace_msg", "-message_file", msgs.to_str().unwrap()]);
        }
        cmd.args(args).stdin(Stdio::null()).stdout(File::create(&screen).unwrap()).stderr(Stdio::null());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run sipp (package sip-tester): {e}"));
        Sipp { child: Some(child), name: name.into(), port, stat, errors, screen }
    }

    /// Waits for SIPp to exit (killing it after `timeout`) and reads its results.
    pub fn wait(self, timeout: Duration) -> SippRun {
        self.wait_inner(None, timeout)
    }

    /// [`Sipp::wait`], failing at once with herald's log if herald exits meanwhile.
    pub fn wait_watching(self, herald: &mut Herald, timeout: Duration) -> SippRun {
        self.wait_inner(Some(herald), timeout)
    }

    fn wait_inner(mut self, mut herald: Option<&mut Herald>, timeout: Duration) -> SippRun {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if let Some(h) = herald.as_deref_mut() {
                if let Some(st) = h.exited() {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("herald exited ({st}) while sipp {} ran; log:\n{}", self.name, log_excerpt(&h.log));
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("sipp {} still running after {timeout:?}; screen:\n{}", self.name, tail(&self.screen, 40));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stats = last_stat_row(&self.stat);
        SippRun { name: self.name.clone(), status, stats, errors: tail(&self.errors, 60) }
    }
}

impl Drop for Sipp {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The last row of a SIPp `-trace_stat` file, by column name (`SuccessfulCall(C)`, ...).
pub fn last_stat_row(path: &Path) -> HashMap<String, String> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(head) = lines.next() else { return HashMap::new() };
    let Some(last) = lines.next_back() else { return HashMap::new() };
    head.split(';').zip(last.split(';')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect()
}

impl SippRun {
    /// A cumulative counter: `count("SuccessfulCall")` reads `SuccessfulCall(C)`.
    pub fn count(&self, field: &str) -> u64 {
        let key = format!("{field}(C)");
        let v = self.stats.get(&key).unwrap_or_else(|| panic!("{}: no {key} in the statistics: {self:?}", self.name));
        v.parse().unwrap_or_else(|_| panic!("{}: {key} = {v:?}", self.name))
    }

    /// Exit status 0, `calls` successful calls, none failed.
    pub fn assert_all_successful(&self, calls: u64) {
        let failed: Vec<String> = self
            .stats
            .iter()
            .filter(|(k, v)| k.starts_with("Failed") && k.ends_with("(C)") && v.as_str() != "0")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert!(
            self.status.success() && self.count("SuccessfulCall") == calls && self.count("FailedCall") == 0,
            "sipp {}: exit {:?}, SuccessfulCall {} (want {calls}), FailedCall {}, {failed:?}\nerrors:\n{}",
            self.name,
            self.status.code(),
            self.count("SuccessfulCall"),
            self.count("FailedCall"),
            self.errors
        );
    }
}

/// Spawns `herald serve --config CONFIG` with its stderr in `log`, the log level from
/// `HERALD_TEST_LOG` (default info), stdin and stdout null; the caller waits for it to be up.
pub fn spawn_serve(config: &Path, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", std::env::var("HERALD_TEST_LOG").unwrap_or_else(|_| "info".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// The interesting part of herald's log for a failure message: a panic with the lines after it
/// (up to the backtrace) and the last lines, or else the last 40 lines.
pub fn log_excerpt(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    match lines.iter().position(|l| l.contains("panicked at")) {
        Some(i) => {
            let panic: Vec<&str> =
                lines[i..].iter().take_while(|l| !l.starts_with("stack backtrace")).copied().collect();
            format!("{}\n...\n{}", panic.join("\n"), lines[lines.len().saturating_sub(3)..].join("\n"))
        }
        None => tail(path, 40),
    }
}

/// The last `lines` lines of a text file (lossy), for failure messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let mut s = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_end(&mut s);
    }
    let s = String::from_utf8_lossy(&s);
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `herald users add NAME --password-stdin PLACE...`, where PLACE says which users file: `--config
/// FILE` (the file and realm of that config) or `--realm REALM --file FILE`. Panics with the
/// command's stderr when it fails.
pub fn herald_users_add(name: &str, password: &str, place: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["users", "add", name, "--password-stdin"])
        .args(place)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), format!("{password}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "herald users add: {}", String::from_utf8_lossy(&out.stderr));
}

/// The sum of metric `name` (all label sets) at herald's Prometheus endpoint `url`.
pub fn metric(url: &str, name: &str) -> f64 {
    let s = herald_bench::scrape::fetch(url).unwrap_or_else(|e| panic!("scrape {url}: {e}"));
    s.sum(name, &[])
}
