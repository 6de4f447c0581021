#![allow(dead_code)] // shared by several test binaries, each using part of it
//! Support for tests/kamailio.rs: a real Kamailio (tests/kamailio/proxy.cfg), a real herald and
//! SIPp peers, each a child process in its own process group that is killed when its guard is
//! dropped; a scratch directory for configs and logs (kept, and its path printed, when the test
//! fails); parsers for SIPp's message log and statistics file.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

pub const KAMAILIO: &str = "/usr/sbin/kamailio";
pub const KAMAILIO_MODULES: &str = "/usr/lib/x86_64-linux-gnu/kamailio/modules";
/// Modules tests/kamailio/proxy.cfg loads.
pub const MODULES: &[&str] = &["pv", "tm", "sl", "rr", "maxfwd", "textops", "siputils", "usrloc", "registrar", "path"];

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fails with a clear message when SIPp, Kamailio or one of its modules is missing
/// (scripts/test.sh installs them).
pub fn require_tools() {
    let sipp = Command::new("sipp").arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(sipp.is_ok(), "sipp not found: install the sip-tester package (scripts/test.sh does)");
    assert!(Path::new(KAMAILIO).exists(), "{KAMAILIO} not found: install the kamailio package (scripts/test.sh does)");
    for m in MODULES {
        let so = Path::new(KAMAILIO_MODULES).join(format!("{m}.so"));
        assert!(so.exists(), "Kamailio module {} missing", so.display());
    }
}

/// A directory for one test's configs and logs. Removed when the test passes; kept, with its
/// path printed, when it panics.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("herald-kamailio-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("logs kept in {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A child process leading its own process group. Dropping it sends SIGTERM to the group
/// (Kamailio's main process then stops its children), waits up to two seconds, and SIGKILLs
/// whatever is left of the group.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    pgid: u32,
}

impl Proc {
    pub fn spawn(name: &'static str, cmd: &mut Command, dir: &Path) -> Proc {
        let log = fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        let child = cmd
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let pgid = child.id();
        Proc { name, child, pgid }
    }

    /// Panics when the process has already exited (bad config, port in use, ...).
    pub fn assert_running(&mut self, dir: &Path) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let log = fs::read_to_string(dir.join(format!("{}.log", self.name))).unwrap_or_default();
            panic!("{} exited ({status}):\n{}", self.name, tail(&log, 40));
        }
    }

    fn signal_group(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, "--", &format!("-{}", self.pgid)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.signal_group("-TERM");
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            sleep(Duration::from_millis(20));
        }
        // Kamailio children may outlive the main process by a moment; herald drains.
        self.signal_group("-KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Waits until a UDP socket is bound to 127.0.0.1:`port` (read from /proc/net/udp).
pub fn wait_udp_bound(p: &mut Proc, dir: &Path, port: u16) {
    let needle = format!("0100007F:{port:04X} ");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let table = fs::read_to_string("/proc/net/udp").unwrap_or_default();
        if table.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|a| needle.trim() == a)) {
            return;
        }
        p.assert_running(dir);
        assert!(Instant::now() < deadline, "{} did not bind 127.0.0.1:{port}", p.name);
        sleep(Duration::from_millis(20));
    }
}

/// Kamailio with tests/kamailio/proxy.cfg on UDP 127.0.0.1:`port`, relaying domain herald.test
/// to herald at 127.0.0.1:`herald_port`.
pub fn start_kamailio(s: &Scratch, port: u16, herald_port: u16) -> Proc {
    start_kamailio_with(s, port, &format!("sip:127.0.0.1:{herald_port}"), &[])
}

/// [`start_kamailio`] relaying herald.test to `herald_uri`, with more command-line arguments
/// (`-A WITH_TLS`, `-l tls:...`: tests/tls.rs).
pub fn start_kamailio_with(s: &Scratch, port: u16, herald_uri: &str, extra: &[String]) -> Proc {
    let cfg = repo().join("tests/kamailio/proxy.cfg");
    let run = s.path("kamailio-run");
    fs::create_dir_all(&run).unwrap();
    let mut cmd = Command::new(KAMAILIO);
    cmd.arg("-f").arg(&cfg).args(["-DD", "-E", "-m", "64", "-M", "8", "-w"]).arg(&run).arg("-Y").arg(&run);
    cmd.args(["-l", &format!("udp:127.0.0.1:{port}")]);
    cmd.args(["-A", &format!("HERALD_URI=\"{herald_uri}\"")]);
    cmd.args(extra);
    if let Ok(level) = std::env::var("KAMAILIO_DEBUG") {
        cmd.arg(format!("--debug={level}"));
    }
    let mut p = Proc::spawn("kamailio", &mut cmd, &s.0);
    wait_udp_bound(&mut p, &s.0, port);
    p
}

/// herald serve on UDP+TCP 127.0.0.1:`port`, registrar for domain herald.test (and its own
/// address), two workers, Record-Route always, authentication off (SIPp's plain scenarios do
/// not answer challenges). RUST_LOG overrides the log level.
pub fn start_herald(s: &Scratch, port: u16) -> Proc {
    start_herald_with(s, port, "")
}

/// [`start_herald`] with more TOML appended (more `[[listen]]` entries, `[tls]`).
pub fn start_herald_with(s: &Scratch, port: u16, extra_toml: &str) -> Proc {
    let cfg = s.path("herald.toml");
    fs::write(
        &cfg,
        format!(
            "domains = [\"herald.test\"]\n\
             [server]\nworkers = 2\ndrain_timeout_s = 1\n\
             [[listen]]\naddress = \"127.0.0.1:{port}\"\ntransports = [\"udp\", \"tcp\"]\n\
             [proxy]\nrecord_route = \"always\"\n\
             [log]\nlevel = \"info\"\n\
             [flood]\ntrusted = [\"127.0.0.0/8\"]\n\
             [auth]\nenabled = false\n{extra_toml}"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
    cmd.arg("serve").arg("--config").arg(&cfg);
    let mut p = Proc::spawn("herald", &mut cmd, &s.0);
    wait_udp_bound(&mut p, &s.0, port);
    p
}

/// SIPp arguments binding its signalling, control and media ports to `base`, `base+1`,
/// `base+2` (media uses `base+2..base+5`), so no SIPp leaves the test's port block.
pub fn sipp_ports(base: u16) -> Vec<String> {
    ["-i", "127.0.0.1", "-p", &base.to_string(), "-cp", &(base + 1).to_string(), "-mp", &(base + 2).to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The callee: tests/sipp/uas.xml on 127.0.0.1:`port`, logging every message to uas.msg.
pub fn start_uas(s: &Scratch, port: u16) -> Proc {
    let mut cmd = Command::new("sipp");
    cmd.arg("-sf").arg(repo().join("tests/sipp/uas.xml")).args(sipp_ports(port));
    cmd.args(["-nostdin", "-trace_msg", "-message_file"]).arg(s.path("uas.msg"));
    let mut p = Proc::spawn("uas", &mut cmd, &s.0);
    wait_udp_bound(&mut p, &s.0, port);
    p
}

/// Runs SIPp to completion (its own process group, killed if it outlives `timeout` + 10 s) and
/// returns its exit status; `name` names its output, message log (`NAME.msg`) and statistics
/// (`NAME.csv`) in the scratch directory.
pub fn run_sipp(s: &Scratch, name: &'static str, args: &[String], timeout_s: u32) -> ExitStatus {
    let mut cmd = Command::new("sipp");
    cmd.args(args).args(["-nostdin", "-timeout", &format!("{timeout_s}s"), "-trace_msg", "-message_file"]);
    cmd.arg(s.path(&format!("{name}.msg"))).args(["-trace_stat", "-stf"]).arg(s.path(&format!("{name}.csv")));
    let mut p = Proc::spawn(name, &mut cmd, &s.0);
    let deadline = Instant::now() + Duration::from_secs(u64::from(timeout_s) + 10);
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "{name} (sipp) did not finish");
        sleep(Duration::from_millis(20));
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Registers `bob` with contact 127.0.0.1:`uas`, sending from SIPp on `from_port` to
/// 127.0.0.1:`to`. With a `domain` the Request-URI and To name that domain
/// (register_domain.xml, Supported: path); without, they name the remote address
/// (tests/sipp/register.xml). Returns the message log.
pub fn register_bob(s: &Scratch, to: u16, uas: u16, from_port: u16, domain: Option<&str>) -> Vec<Logged> {
    let mut args = strings(&[&format!("127.0.0.1:{to}"), "-sf"]);
    match domain {
        Some(d) => {
            args.push(repo().join("tests/kamailio_support/register_domain.xml").display().to_string());
            args.extend(strings(&["-key", "target_domain", d]));
        }
        None => args.push(repo().join("tests/sipp/register.xml").display().to_string()),
    }
    args.extend(strings(&["-s", "bob", "-key", "contact_host", "127.0.0.1", "-key", "contact_port"]));
    args.push(uas.to_string());
    args.extend(sipp_ports(from_port));
    args.extend(strings(&["-m", "1"]));
    let status = run_sipp(s, "register", &args, 10);
    assert!(status.success(), "REGISTER failed: sipp {status}; see register.msg");
    assert_eq!(call_counts(&s.path("register.csv")), (1, 0), "REGISTER: (successful, failed)");
    read_messages(&s.path("register.msg"))
}

/// `calls` calls to bob@`domain` at `rate` per second, from SIPp on `uac_port`, the caller
/// sending every request to 127.0.0.1:`first_hop`; all must succeed.
pub fn call_bob(s: &Scratch, first_hop: u16, domain: &str, uac_port: u16, calls: u64, rate: u32) {
    let mut args = strings(&[&format!("127.0.0.1:{first_hop}"), "-sf"]);
    args.push(repo().join("tests/kamailio_support/uac_domain.xml").display().to_string());
    args.extend(strings(&["-key", "target_domain", domain, "-s", "bob"]));
    args.extend(sipp_ports(uac_port));
    args.extend(strings(&["-r", &rate.to_string(), "-m", &calls.to_string(), "-d", "100"]));
    let status = run_sipp(s, "uac", &args, 30);
    let (ok, failed) = call_counts(&s.path("uac.csv"));
    assert_eq!((ok, failed), (calls, 0), "calls (successful, failed); sipp {status}");
    assert!(status.success(), "uac sipp {status}");
}

/// One message of a SIPp `-trace_msg` log.
#[derive(Debug)]
pub struct Logged {
    pub received: bool,
    pub text: String,
}

impl Logged {
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("")
    }

    /// Every value of header `name` (long form, case-insensitive), comma-separated values split
    /// apart, in message order.
    pub fn header(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in self.text.lines().skip(1) {
            if line.is_empty() {
                break;
            }
            let Some((n, v)) = line.split_once(':') else { continue };
            if n.trim().eq_ignore_ascii_case(name) {
                out.extend(split_commas(v));
            }
        }
        out
    }

    pub fn is_request(&self, method: &str) -> bool {
        self.first_line().starts_with(&format!("{method} "))
    }

    pub fn is_response(&self, status: u16, method: &str) -> bool {
        self.first_line().starts_with(&format!("SIP/2.0 {status} "))
            && self.header("CSeq").first().is_some_and(|c| c.ends_with(&format!(" {method}")))
    }
}

/// Splits a header value at commas outside <...> and "...".
fn split_commas(v: &str) -> Vec<String> {
    let (mut out, mut cur, mut angle, mut quote) = (Vec::new(), String::new(), false, false);
    for c in v.chars() {
        match c {
            '"' if !angle => quote = !quote,
            '<' if !quote => angle = true,
            '>' if !quote => angle = false,
            ',' if !angle && !quote => {
                out.push(cur.trim().to_owned());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// Reads a SIPp `-trace_msg` log.
pub fn read_messages(path: &Path) -> Vec<Logged> {
    let log = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for block in log.split("----------------------------------------------- ") {
        // "<date> <time>\nUDP message received [N] bytes :\n\nMESSAGE" or "... sent (N bytes):"
        let mut parts = block.splitn(3, '\n');
        let (_stamp, kind, rest) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let received = kind.contains("message received");
        if !received && !kind.contains("message sent") {
            continue;
        }
        let text = rest.trim_start_matches(['\r', '\n']).replace("\r\n", "\n");
        out.push(Logged { received, text });
    }
    out
}

/// (successful, failed) cumulative call counts from the last line of a SIPp statistics file.
pub fn call_counts(path: &Path) -> (u64, u64) {
    let csv = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<&str> = csv.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{}: no statistics line", path.display());
    let head: Vec<&str> = lines[0].split(';').collect();
    let last: Vec<&str> = lines[lines.len() - 1].split(';').collect();
    let col = |name: &str| -> u64 {
        let i = head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
        last[i].trim().parse().unwrap()
    };
    (col("SuccessfulCall(C)"), col("FailedCall(C)"))
}
