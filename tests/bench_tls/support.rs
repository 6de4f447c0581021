//! Helpers for tests/bench_tls.rs: Kamailio with its tls module listening on TLS only
//! (tests/bench_tls/proxy.cfg), ports from the block 18000-18099, and timed `herald bench` runs.
//! Running and reading `herald bench` comes from tests/bench_support, certificates from
//! tests/tls_support, the test directory from tests/common.

use crate::bench_support::{spawn_bench, wait_output};
use std::collections::HashSet;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const KAMAILIO: &str = "/usr/sbin/kamailio";
const TLS_MODULE: &str = "/usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so";
/// The ports these tests may bind (other test files use 16000-17659).
const PORT_MIN: u16 = 18000;
const PORT_MAX: u16 = 18099;

/// Installs Kamailio and its tls module with apt-get when missing (once per test binary: two
/// apt-get runs at once would fight over the dpkg lock).
pub fn ensure_kamailio_tls() {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let result = DONE.get_or_init(|| {
        if Path::new(KAMAILIO).exists() && Path::new(TLS_MODULE).exists() {
            return Ok(());
        }
        let sudo = !Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let apt = |args: &[&str]| {
            let mut cmd = if sudo { Command::new("sudo") } else { Command::new("apt-get") };
            if sudo {
                cmd.args(["-n", "apt-get"]);
            }
            cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive").status().is_ok_and(|s| s.success())
        };
        let install = ["install", "-y", "-qq", "kamailio", "kamailio-tls-modules"];
        // A stale package list is the usual reason an install fails: refresh it once and retry.
        let installed = apt(&install) || (apt(&["update", "-qq"]) && apt(&install));
        if !installed {
            return Err("apt-get install kamailio kamailio-tls-modules failed".into());
        }
        match Path::new(TLS_MODULE).exists() {
            true => Ok(()),
            false => Err(format!("{TLS_MODULE} still missing after apt-get")),
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A port in 18000-18099 that no socket uses (any state, TCP or UDP), never handed out twice by
/// one process; the start depends on the process id so that two test binaries do not collide.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let span = PORT_MAX - PORT_MIN + 1;
    let _ =
        NEXT.compare_exchange(0, 1 + (std::process::id() % u32::from(span)) as u16, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..span {
        let port = PORT_MIN + NEXT.fetch_add(1, Ordering::SeqCst) % span;
        if !local_ports(None).contains(&port) {
            return port;
        }
    }
    panic!("no free port in {PORT_MIN}-{PORT_MAX}");
}

/// Local ports in /proc/net/{tcp,tcp6,udp,udp6}, only TCP ones in `tcp_state` (hex) if given.
fn local_ports(tcp_state: Option<&str>) -> HashSet<u16> {
    let tables: &[&str] = if tcp_state.is_some() { &["tcp", "tcp6"] } else { &["tcp", "tcp6", "udp", "udp6"] };
    let mut ports = HashSet::new();
    for t in tables {
        let text = fs::read_to_string(format!("/proc/thread-self/net/{t}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 3 && tcp_state.is_none_or(|s| f[3] == s) {
                if let Some(p) = f[1].rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok()) {
                    ports.insert(p);
                }
            }
        }
    }
    ports
}

/// Kamailio on tls:127.0.0.1:`port` only, in its own process group, killed on drop.
pub struct TlsKamailio {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl TlsKamailio {
    /// Starts Kamailio with the server certificate `cert` and key `key`; with `client_ca`, it
    /// demands a client certificate signed by that CA (mutual TLS, RFC 3261 §26.3.2.2).
    pub fn start(dir: &Path, cert: &Path, key: &Path, client_ca: Option<&Path>) -> TlsKamailio {
        ensure_kamailio_tls();
        let port = free_port();
        let tls_cfg = dir.join("tls.cfg");
        // The tls module's own file: the server certificate, and client certificates checked
        // only when asked for.
        let settings = "method = TLSv1.2+\nverify_certificate = no\nrequire_certificate = no\n";
        let server = match client_ca {
            Some(ca) => format!(
                "method = TLSv1.2+\nverify_certificate = yes\nrequire_certificate = yes\nca_list = {}\n",
                ca.display()
            ),
            None => settings.to_string(),
        };
        let text = format!(
            "[server:default]\n{server}certificate = {}\nprivate_key = {}\n\n[client:default]\n{settings}",
            cert.display(),
            key.display()
        );
        fs::write(&tls_cfg, text).unwrap();
        let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bench_tls/proxy.cfg");
        let log = fs::File::create(dir.join("kamailio.log")).unwrap();
        let child = Command::new(KAMAILIO)
            .args(["-f", cfg.to_str().unwrap(), "-DD", "-E", "-m", "64", "-M", "8"])
            .args(["-w", dir.to_str().unwrap(), "-Y", dir.to_str().unwrap()])
            .args(["-l", &format!("tls:127.0.0.1:{port}")])
            .args(["-A", &format!("TLS_CFG=\"{}\"", tls_cfg.display())])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start kamailio");
        let mut k = TlsKamailio { child, port, dir: dir.to_path_buf() };
        k.wait_listening();
        k
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("kamailio exited ({st}):\n{}", self.log());
            }
            if local_ports(Some("0A")).contains(&self.port) {
                // Bound; give its TLS worker a moment to start reading.
                std::thread::sleep(Duration::from_millis(300));
                return;
            }
            assert!(Instant::now() < deadline, "kamailio did not listen on TLS port {}:\n{}", self.port, self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("kamailio.log")).unwrap_or_default()
    }

    /// Sends `signal` (e.g. "-KILL") to Kamailio's whole process group.
    pub fn signal(&self, signal: &str) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
    }
}

impl Drop for TlsKamailio {
    fn drop(&mut self) {
        self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && self.child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.signal("-KILL");
        let _ = self.child.wait();
    }
}

/// Runs `herald bench ARGS`, killing it after `limit`; also returns how long it ran.
pub fn bench(args: &[&str], limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let out = wait_output(spawn_bench(args), limit);
    (out, started.elapsed())
}

/// Panics with the output unless the run exited with `code`.
pub fn assert_exit(out: &Output, code: i32, kamailio: &TlsKamailio) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status {:?}\nstdout:\n{}\nstderr:\n{}\nkamailio log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        kamailio.log()
    );
}
