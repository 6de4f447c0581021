//! Herald and the phones on two sides of a real link: two network namespaces joined by a veth
//! pair (herald's side 10.98.N.1/24, the phones' side 10.98.N.2/24), herald listening on its
//! wildcard addresses as a phone user would run it, SIPp, baresip and `herald bench` as the
//! phones (issue 15: what loopback tests cannot see, such as a Record-Route naming 0.0.0.0).
//!
//! Needs root and iproute2 (`ip netns`); [`Netns::create`] says why when it cannot, and the
//! tests then skip. Every process runs under `ip netns exec`; the only addresses anything
//! sends to are the two namespace addresses and loopback. Dropping the [`Netns`] kills what
//! still runs inside and deletes both namespaces (the veth pair goes with them).

#![allow(dead_code)] // not every test uses every helper

use crate::common::{last_stat_row, tail, SippRun};

#[path = "../tls_support/mod.rs"]
mod tls_support;

use std::fs::{self, File};
use std::io::Write as _;
use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

extern "C" {
    fn kill(pid: c_int, sig: c_int) -> c_int;
}
const SIGKILL: c_int = 9;

/// How long herald may take to log "herald serving".
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Which namespace a process runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Herald,
    Phones,
}

/// Two network namespaces joined by a veth pair; deleted on drop.
pub struct Netns {
    pub herald_ns: String,
    pub phones_ns: String,
    /// The third octet of 10.98.N.0/24.
    pub n: u32,
    /// 10.98.N.1: herald's side.
    pub herald_ip: String,
    /// 10.98.N.2: the phones' side.
    pub phone_ip: String,
}

/// Runs `ip ARGS`; the error names the command and carries its stderr.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`ip` (iproute2) not runnable: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`ip {}` failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl Netns {
    /// Makes `hrl-h-<pid>-<k>` and `hrl-p-<pid>-<k>`, the veth pair `veth-h`/`veth-p` between
    /// them (created inside the namespaces, so nothing appears in the machine's own namespace),
    /// addresses 10.98.N.1/24 and 10.98.N.2/24, and `lo` up on both sides. `Err` says why the
    /// machine cannot (no root, no iproute2, no netns support): the caller skips.
    pub fn create() -> Result<Netns, String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let k = COUNTER.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        // Addresses live inside the namespaces, so two runs cannot clash on them; N still
        // differs between the tests of one run (and usually between runs), for readable logs.
        let n = (pid.wrapping_mul(7).wrapping_add(k)) % 250 + 1;
        let ns = Netns {
            herald_ns: format!("hrl-h-{pid}-{k}"),
            phones_ns: format!("hrl-p-{pid}-{k}"),
            n,
            herald_ip: format!("10.98.{n}.1"),
            phone_ip: format!("10.98.{n}.2"),
        };
        // A namespace of this name can only be left over from a dead process with our pid.
        for name in [&ns.herald_ns, &ns.phones_ns] {
            let _ = ip(&["netns", "del", name]);
        }
        ip(&["netns", "add", &ns.herald_ns])?;
        // From here on, Drop deletes whatever was made.
        ip(&["netns", "add", &ns.phones_ns])?;
        let (h, p) = (ns.herald_ns.as_str(), ns.phones_ns.as_str());
        ip(&["link", "add", "veth-h", "netns", h, "type", "veth", "peer", "name", "veth-p", "netns", p])?;
        ip(&["-n", h, "addr", "add", &format!("{}/24", ns.herald_ip), "dev", "veth-h"])?;
        ip(&["-n", p, "addr", "add", &format!("{}/24", ns.phone_ip), "dev", "veth-p"])?;
        for (name, dev) in [(h, "veth-h"), (p, "veth-p")] {
            ip(&["-n", name, "link", "set", "lo", "up"])?;
            ip(&["-n", name, "link", "set", dev, "up"])?;
        }
        Ok(ns)
    }

    pub fn name(&self, side: Side) -> &str {
        match side {
            Side::Herald => &self.herald_ns,
            Side::Phones => &self.phones_ns,
        }
    }

    /// `ip netns exec <ns> PROGRAM`: add arguments, then [`Proc::spawn`] or `output`.
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name(side), program]);
        c
    }
}

/// The process ids of everything running in namespace `ns`.
fn pids(ns: &str) -> Vec<c_int> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Kills everything still running in namespace `ns` (for up to 5 s) and deletes it. Only
/// processes the test started live in its own namespaces.
pub fn delete_netns(ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = pids(ns);
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) on a process id; no memory is touched.
            unsafe {
                kill(pid, SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = ip(&["netns", "del", ns]);
}

impl Drop for Netns {
    fn drop(&mut self) {
        for side in [Side::Phones, Side::Herald] {
            delete_netns(self.name(side));
        }
    }
}

/// The namespaces `create` made, or `None` after printing why the test is skipped.
pub fn or_skip<T>(test: &str, create: impl FnOnce() -> Result<T, String>) -> Option<T> {
    match create() {
        Ok(made) => Some(made),
        Err(e) => {
            eprintln!("{test}: skipped: network namespaces unavailable: {e}");
            None
        }
    }
}

/// Creates the namespaces, or prints why the test is skipped and returns `None`.
pub fn netns_or_skip(test: &str) -> Option<Netns> {
    or_skip(test, Netns::create)
}

/// Panics unless `program` is on the PATH, naming the Debian package that has it.
pub fn require(program: &str, package: &str) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join(program).is_file());
    assert!(found, "`{program}` not found on PATH: install the Debian package {package} (scripts/test.sh does)");
}

/// A process started under `ip netns exec` (which execs it: same pid), its stdout and stderr
/// in one file; killed on drop.
pub struct Proc {
    child: Option<Child>,
    pub name: String,
    pub output: PathBuf,
    pub stdin: Option<ChildStdin>,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr in `dir/<name>.out`, stdin piped when `stdin`.
    pub fn spawn(mut cmd: Command, dir: &Path, name: &str, stdin: bool) -> Proc {
        let output = dir.join(format!("{name}.out"));
        let f = File::create(&output).unwrap();
        cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() }).stdout(f.try_clone().unwrap()).stderr(f);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        let stdin = child.stdin.take();
        Proc { child: Some(child), name: name.into(), output, stdin }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What the process wrote so far (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.output).unwrap_or_default()).into_owned()
    }

    /// The exit status if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().unwrap())
    }

    /// Waits for the exit, killing the process after `timeout` (`None` then).
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(st) = self.exited() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// Writes one line to the process's stdin.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("started with stdin");
        let _ = stdin.write_all(format!("{line}\n").as_bytes());
        let _ = stdin.flush();
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stdin.take();
        self.kill();
    }
}

/// Polls `cond` every 20 ms until it holds (`true`) or `timeout` passes (`false`).
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `herald users add NAME --password-stdin` run in `dir` with the built-in configuration: the
/// users file `dir/herald-users.txt`, realm = the host name, as `herald serve` without
/// `--config` reads it there.
pub fn add_user(dir: &Path, name: &str, password: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["users", "add", name, "--password-stdin"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "herald users add {name}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `herald serve ARGS` in herald's namespace, `dir` as working directory (its users file),
/// log (stderr) in `dir/herald.out`; returns once herald logged "herald serving" (its
/// listeners are bound by then). Killed on drop (the namespace goes anyway).
pub fn start_herald(ns: &Netns, dir: &Path, args: &[&str]) -> Proc {
    let mut cmd = ns.command(Side::Herald, env!("CARGO_BIN_EXE_herald"));
    cmd.arg("serve").args(args).current_dir(dir);
    let mut h = Proc::spawn(cmd, dir, "herald", false);
    let deadline = Instant::now() + START_TIMEOUT;
    while !h.text().contains("herald serving") {
        if let Some(st) = h.exited() {
            panic!("herald exited at start ({st}); log:\n{}", h.text());
        }
        assert!(
            Instant::now() < deadline,
            "herald did not log \"herald serving\" within {START_TIMEOUT:?}; log:\n{}",
            h.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h
}

/// The last `n` lines of a process's output, for failure messages.
pub fn last_lines(p: &Proc, n: usize) -> String {
    tail(&p.output, n)
}

/// A SIPp run in the phones' namespace (killed on drop if still running).
pub struct Sipp {
    pub proc: Proc,
    pub port: u16,
    stat: PathBuf,
    errors: PathBuf,
    /// `-trace_msg` file: every message SIPp sent and received.
    pub messages: PathBuf,
}

impl Sipp {
    /// `sipp -sf tests/sipp/SCENARIO -i <phone ip> -p PORT` (control port PORT+1, media ports
    /// PORT+2 and PORT+4), statistics, errors and messages traced into `dir/NAME*`, then `args`.
    pub fn start(ns: &Netns, dir: &Path, name: &str, scenario: &str, port: u16, args: &[&str]) -> Sipp {
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp").join(scenario);
        let stat = dir.join(format!("{name}.csv"));
        let errors = dir.join(format!("{name}_errors.log"));
        let messages = dir.join(format!("{name}_messages.log"));
        let (p, cp, mp) = (port.to_string(), (port + 1).to_string(), (port + 2).to_string());
        let mut cmd = ns.command(Side::Phones, "sipp");
        cmd.current_dir(dir)
            .args(["-sf", scenario.to_str().unwrap(), "-i", &ns.phone_ip, "-p", &p, "-cp", &cp, "-mp", &mp])
            .args(["-nostdin", "-trace_stat", "-stf", stat.to_str().unwrap(), "-fd", "1"])
            .args(["-trace_err", "-error_file", errors.to_str().unwrap()])
            .args(["-trace_msg", "-message_file", messages.to_str().unwrap()])
            .args(args);
        let proc = Proc::spawn(cmd, dir, name, false);
        Sipp { proc, port, stat, errors, messages }
    }

    /// Waits until SIPp has bound its SIP port (UDP, or a TCP listener) in the phones'
    /// namespace: read from `/proc/<pid>/net`, which shows the namespace of that process.
    pub fn wait_bound(&mut self, tcp: bool) {
        let pid = self.proc.pid();
        let own = fs::read_link("/proc/self/ns/net").ok();
        let port = self.port;
        let bound = wait_until(Duration::from_secs(20), || {
            // `ip netns exec` has switched namespaces once the pid's namespace is not ours.
            if fs::read_link(format!("/proc/{pid}/ns/net")).ok() == own {
                return false;
            }
            let table = if tcp { "tcp" } else { "udp" };
            let text = fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
            text.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3
                    && (!tcp || f[3] == "0A")
                    && f[1].rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok()) == Some(port)
            })
        });
        assert!(
            bound,
            "sipp {} did not bind port {port} within 20 s; output:\n{}",
            self.proc.name,
            last_lines(&self.proc, 40)
        );
    }

    /// Waits for SIPp to exit (killing it after `timeout`) and reads its results. A SIPp still
    /// running at the deadline is a failure (its exit status is then that of the kill).
    pub fn wait(mut self, timeout: Duration) -> SippRun {
        let name = self.proc.name.clone();
        let Some(status) = self.proc.wait(timeout) else {
            panic!("sipp {name} still running after {timeout:?}; screen:\n{}", last_lines(&self.proc, 40));
        };
        SippRun { name, status, stats: last_stat_row(&self.stat), errors: tail(&self.errors, 60) }
    }
}

/// The Record-Route values in a SIPp `-trace_msg` file (or any log of SIP messages), one per
/// header line, `r:` compact form included.
pub fn record_routes(messages: &Path) -> Vec<String> {
    let text = fs::read_to_string(messages).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            let name = name.trim();
            (name.eq_ignore_ascii_case("Record-Route") || name.eq_ignore_ascii_case("r"))
                .then(|| value.trim().to_owned())
        })
        .collect()
}

/// The start lines of the SIP messages in a SIPp `-trace_msg` file, in order.
pub fn start_lines(messages: &Path) -> Vec<String> {
    let text = fs::read_to_string(messages).unwrap_or_default();
    text.lines().filter(|l| l.starts_with("SIP/2.0 ") || l.ends_with(" SIP/2.0")).map(str::to_owned).collect()
}

/// A test CA and a server certificate for `ip` (IP subjectAltName) signed by it, made with the
/// `openssl` command in `dir` (tests/tls_support): (CA, certificate, private key) PEM files.
pub fn tls_cert(dir: &Path, ip: &str) -> (PathBuf, PathBuf, PathBuf) {
    let pki = tls_support::Pki::generate_for(dir, "netns", &format!("IP:{ip}"));
    (pki.ca, pki.cert, pki.key)
}

/// Runs `cmd` to completion with a bound: killed after `timeout` (then `None`).
pub fn output_within(
    cmd: Command,
    dir: &Path,
    name: &str,
    timeout: Duration,
) -> (Option<std::process::ExitStatus>, String) {
    let mut p = Proc::spawn(cmd, dir, name, false);
    let st = p.wait(timeout);
    (st, p.text())
}
