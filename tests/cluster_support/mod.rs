//! tests/cluster.rs's world: a real `redis-server` (no persistence, in the test's directory)
//! and herald nodes on addresses of their own (127.0.0.1, 127.0.0.2) sharing it, each with its
//! own configuration file. Everything started here is stopped on drop.

#![allow(dead_code)] // not every helper is used by every step

pub mod phone;

use crate::common::{log_excerpt, spawn_serve, stop_child, udp_options_ok};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on 127.0.0.1:`port` keeping nothing on disk (`--save ''`, no AOF): a
/// restart loses every key, the worst case a node must recover from.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

impl Redis {
    pub fn start(dir: &Path, port: u16) -> Redis {
        let mut r = Redis { child: None, port, dir: dir.to_owned() };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let log = File::create(self.dir.join(format!("redis-{}.log", self.port))).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.to_str().unwrap(), "--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server (Debian package redis-server): {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.command(&["PING"]).as_deref() != Some("+PONG") {
            assert!(Instant::now() < deadline, "redis-server did not answer PING");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL: every key is lost), waits `down`, starts it on the same port.
    pub fn kill_and_restart(&mut self, down: Duration) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        std::thread::sleep(down);
        self.spawn();
    }

    /// One command in RESP, its reply's first line (`+PONG`, `:1`, `$12`…); `None` when the
    /// server does not answer.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req += &format!("${}\r\n{a}\r\n", a.len());
        }
        s.write_all(req.as_bytes()).ok()?;
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        text.lines().next().map(str::to_owned)
    }

    /// How many keys the server holds (`DBSIZE`).
    pub fn keys(&self) -> usize {
        self.command(&["DBSIZE"]).and_then(|r| r.strip_prefix(':').and_then(|n| n.parse().ok())).unwrap_or(0)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One herald node: UDP and TCP on `sip`, WebSocket on `ws`, `[location] mode = "redis"`.
pub struct Node {
    child: Option<Child>,
    pub name: String,
    pub sip: SocketAddr,
    pub ws: SocketAddr,
    pub config: PathBuf,
    pub log: PathBuf,
    pub metrics: SocketAddr,
    runs: u32,
}

/// What a node's configuration says.
pub struct NodeSpec<'a> {
    pub name: &'a str,
    pub sip: SocketAddr,
    pub ws: SocketAddr,
    pub metrics: SocketAddr,
    /// The other nodes' addresses.
    pub peers: &'a [&'a str],
    pub redis_url: &'a str,
    pub users_file: &'a Path,
}

pub const DOMAIN: &str = "herald.test";

impl Node {
    pub fn start(dir: &Path, spec: &NodeSpec) -> Node {
        let config = dir.join(format!("{}.toml", spec.name));
        let peers: Vec<String> = spec.peers.iter().map(|p| format!("\"{p}\"")).collect();
        fs::write(
            &config,
            format!(
                "domains = [\"{DOMAIN}\"]\n\
                 [server]\nworkers = 2\ndrain_timeout_s = 1\n\
                 [[listen]]\naddress = \"{sip}\"\ntransports = [\"udp\", \"tcp\"]\n\
                 [[listen]]\naddress = \"{ws}\"\ntransports = [\"ws\"]\n\
                 [metrics]\nlisten = \"{metrics}\"\n\
                 [auth]\nrealm = \"{DOMAIN}\"\nusers_file = \"{users}\"\nalgorithms = [\"MD5\"]\nregister = false\n\
                 [location]\nmode = \"redis\"\n\
                 [location.redis]\nurl = \"{url}\"\nnode = \"{name}\"\nnodes = [{peers}]\n\
                 timeout_ms = 500\nreconnect_max_ms = 500\n",
                sip = spec.sip,
                ws = spec.ws,
                metrics = spec.metrics,
                users = spec.users_file.display(),
                url = spec.redis_url,
                name = spec.name,
                peers = peers.join(", "),
            ),
        )
        .unwrap();
        let mut n = Node {
            child: None,
            name: spec.name.into(),
            sip: spec.sip,
            ws: spec.ws,
            config,
            log: dir.join(format!("{}.log", spec.name)),
            metrics: spec.metrics,
            runs: 0,
        };
        n.spawn();
        n
    }

    fn spawn(&mut self) {
        self.runs += 1;
        let log = self.log.with_extension(format!("{}.log", self.runs));
        let child = spawn_serve(&self.config, &log);
        self.child = Some(child);
        self.log = log;
        let probe = UdpSocket::bind((self.sip.ip(), 0)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("herald node {} exited at start ({st}); log:\n{}", self.name, log_excerpt(&self.log));
            }
            match udp_options_ok(&probe, self.sip, "cluster-start-probe", Duration::from_millis(300)) {
                Ok(()) => break,
                Err(e) => assert!(Instant::now() < deadline, "node {} did not answer OPTIONS: {e}", self.name),
            }
        }
    }

    /// SIGTERM (a drain of 1 s), then starts the node again with the same configuration.
    pub fn restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop_child(&mut c);
        }
        self.spawn();
    }

    /// Panics with the log if the node has exited.
    pub fn assert_running(&mut self) {
        if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
            panic!("herald node {} exited ({st}); log:\n{}", self.name, log_excerpt(&self.log));
        }
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.metrics)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop_child(&mut c);
        }
    }
}

/// Polls `f` every 150 ms (slow enough for `[flood]`'s default budget of a source) until it holds or `within` has passed; says what did not happen.
pub fn eventually(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(150));
    }
}
