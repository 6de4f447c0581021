//! Helpers for tests/bench_load.rs: running `herald bench ...` with a time limit, reading its
//! JSON results, and a Kamailio registrar-proxy (tests/bench_kamailio/proxy.cfg, optionally
//! with digest authentication) as a second system under test.

#![allow(dead_code)] // not every test uses every helper

use herald_bench::results::{ResultsFile, RunResult};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const KAMAILIO: &str = "/usr/sbin/kamailio";
/// The password of every user in tests/bench_kamailio/proxy.cfg.
pub const KAMAILIO_PASSWORD: &str = "bench-secret";

/// Starts `herald bench ARGS --quiet`.
pub fn spawn_bench(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("bench")
        .args(args)
        .arg("--quiet")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run herald bench")
}

/// Runs `herald bench ARGS`, killing it after `limit`.
pub fn bench(args: &[&str], limit: Duration) -> Output {
    wait_output(spawn_bench(args), limit)
}

/// Waits for `child` to exit (killing it after `limit`) and collects its output.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Panics with the output unless the run exited with `code`.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads a results file written by `herald bench KIND --json`.
pub fn read_run(path: &Path, kind: &str) -> RunResult {
    let file = ResultsFile::read(path).unwrap();
    match (kind, file) {
        ("calls", ResultsFile::Calls(r))
        | ("register", ResultsFile::Register(r))
        | ("users", ResultsFile::Users(r)) => r,
        (kind, other) => panic!("expected a {kind} result, got {:?}", other.runs().len()),
    }
}

/// A credentials file with `n` users `name0..` sharing `password`.
pub fn credentials(dir: &Path, n: usize, password: &str) -> PathBuf {
    let path = dir.join("credentials.txt");
    let text: String = (0..n).map(|i| format!("bench{i} {password}\n")).collect();
    fs::write(&path, format!("# test users\n{text}")).unwrap();
    path
}

/// Kamailio on 127.0.0.1:`port` (UDP), in its own process group, killed on drop.
pub struct Kamailio {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Kamailio {
    /// `algorithm`: None for no authentication, else "MD5" or "SHA-256".
    pub fn start(dir: &Path, port: u16, algorithm: Option<&str>) -> Kamailio {
        assert!(
            Path::new(KAMAILIO).exists(),
            "{KAMAILIO} missing: install the kamailio package (scripts/test.sh does)"
        );
        let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bench_kamailio/proxy.cfg");
        let log = fs::File::create(dir.join("kamailio.log")).unwrap();
        let mut cmd = Command::new(KAMAILIO);
        cmd.args(["-f", cfg.to_str().unwrap(), "-DD", "-E", "-m", "64", "-M", "8"])
            .args(["-w", dir.to_str().unwrap(), "-Y", dir.to_str().unwrap()])
            .args(["-l", &format!("udp:127.0.0.1:{port}")]);
        if let Some(alg) = algorithm {
            cmd.args(["-A", "WITH_AUTH", "-A", &format!("BENCH_ALGORITHM=\"{alg}\"")]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start kamailio");
        let mut k = Kamailio { child, port, dir: dir.to_path_buf() };
        k.wait_listening();
        k
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let hex = format!(":{:04X} ", self.port);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!(
                    "kamailio exited ({st}):\n{}",
                    fs::read_to_string(self.dir.join("kamailio.log")).unwrap_or_default()
                );
            }
            let udp = fs::read_to_string("/proc/net/udp").unwrap_or_default();
            if udp.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|a| a.ends_with(hex.trim_end()))) {
                // Bound; give its worker a moment to start reading.
                std::thread::sleep(Duration::from_millis(300));
                return;
            }
            assert!(Instant::now() < deadline, "kamailio did not bind UDP port {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Kamailio {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && self.child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.wait();
    }
}
