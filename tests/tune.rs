//! `herald tune` against this machine: the values it prints are what /proc and /sys say (read
//! here independently), `--json` parses, `--apply` then `--revert` puts every value back exactly
//! (with a guard that restores the machine even when an assertion fails midway), the built-in
//! measurement and `--metrics` measure a real herald, and an unprivileged user gets a report of
//! what could not be set rather than a failure.

mod common;

use common::{test_dir, Herald, HeraldConfig, HeraldExtras};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// Tests that read values and the test that changes them must not overlap.
static MACHINE: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

fn tune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald")).arg("tune").args(args).output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "herald tune failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn words(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn mask(v: &str) -> String {
    let hex: String = v.trim().chars().filter(|c| *c != ',').collect();
    let t = hex.trim_start_matches('0').to_ascii_lowercase();
    if t.is_empty() {
        "0".into()
    } else {
        t
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn setting<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no setting {name}"))
}

/// Every setting that lives in a file: (name, path, its value now read directly).
fn file_settings(doc: &Value) -> Vec<(String, PathBuf)> {
    doc["settings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let w = s["where"].as_str()?;
            w.starts_with('/').then(|| (s["name"].as_str().unwrap().to_string(), PathBuf::from(w)))
        })
        .collect()
}

fn same(name: &str, a: &str, b: &str) -> bool {
    if name.starts_with("rps_cpus") {
        mask(a) == mask(b)
    } else {
        words(a) == words(b)
    }
}

#[test]
fn printed_values_are_what_proc_and_sys_say() {
    let _g = lock();
    let doc = json_of(&tune(&["--service-us", "10", "--json"]));
    let m = &doc["machine"];
    assert_eq!(m["kernel"].as_str(), read(Path::new("/proc/sys/kernel/osrelease")).as_deref());
    let online = read(Path::new("/sys/devices/system/cpu/online")).unwrap();
    let cores: usize = online
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    assert_eq!(m["cores"].as_u64(), Some(cores as u64));
    for name in [
        "net.core.rmem_max",
        "net.core.rmem_default",
        "net.core.wmem_max",
        "net.ipv4.udp_mem",
        "net.core.netdev_max_backlog",
        "net.core.somaxconn",
    ] {
        let path = Path::new("/proc/sys").join(name.replace('.', "/"));
        let s = setting(&doc, name);
        assert_eq!(s["where"].as_str(), path.to_str());
        assert_eq!(s["current"].as_str().map(words), read(&path).map(|v| words(&v)), "{name}");
        assert!(s["recommended"].is_string() && !s["why"].as_str().unwrap().is_empty(), "{name}: {s}");
    }
    let files = file_settings(&doc);
    assert!(files.len() >= 6);
    for (name, path) in &files {
        let s = setting(&doc, name);
        match (read(path), s["current"].as_str()) {
            (Some(now), Some(printed)) => {
                assert!(same(name, &now, printed), "{name}: printed {printed}, {} says {now}", path.display())
            }
            (None, printed) => {
                assert!(printed.is_none(), "{name}: printed {printed:?} but {} is unreadable", path.display())
            }
            (Some(now), None) => {
                panic!("{name}: {} reads {now} but herald tune said {}", path.display(), s["unreadable"])
            }
        }
    }
    // RLIMIT_NOFILE: herald tune inherits this process's limits.
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let f: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    assert_eq!(
        setting(&doc, "RLIMIT_NOFILE of this shell (soft hard)")["current"].as_str(),
        Some(format!("{} {}", f[0], f[1]).as_str())
    );

    // The text report prints the same current values.
    let text = String::from_utf8(tune(&["--service-us", "10"]).stdout).unwrap();
    for (name, path) in files.iter().filter(|(_, p)| p.starts_with("/proc/sys")) {
        let at = text.find(&format!("\n{name}  [")).unwrap_or_else(|| panic!("{name} not in the report:\n{text}"));
        let current = text[at..].lines().find(|l| l.trim_start().starts_with("current:")).unwrap();
        let now = read(path).unwrap();
        assert_eq!(current.trim_start().trim_start_matches("current:").trim(), words(&now), "{name}");
    }
}

#[test]
fn recommendations_follow_the_workload() {
    let _g = lock();
    // Halving the service time doubles the queue a worker drains within the target wait, and so
    // herald's socket buffer; the slice is one recvmmsg batch of messages.
    let slow = json_of(&tune(&["--service-us", "20", "--json"]));
    let fast = json_of(&tune(&["--service-us", "10", "--json"]));
    let buffer = |d: &Value| {
        setting(d, "herald [server] udp_buffer_bytes")["recommended"].as_str().unwrap().parse::<u64>().unwrap()
    };
    let (b_slow, b_fast) = (buffer(&slow), buffer(&fast));
    assert!(b_fast > b_slow * 19 / 10 && b_fast < b_slow * 21 / 10, "{b_slow} -> {b_fast}");
    assert_eq!(fast["workload"]["slice_ns"].as_u64(), Some(320_000));
    assert_eq!(slow["workload"]["slice_ns"].as_u64(), Some(640_000));
    let why = setting(&fast, "herald [server] udp_buffer_bytes")["why"].as_str().unwrap().to_string();
    assert!(why.contains("K = W / S = 50000 µs / 10.0 µs = 5000 messages"), "{why}");
}

/// Puts the machine back however the test ends: `--revert`, then every file value recorded
/// before the test that still differs.
struct Restore {
    state: PathBuf,
    before: Vec<(String, PathBuf, String)>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if self.state.exists() {
            let _ = tune(&["--revert", "--state", self.state.to_str().unwrap()]);
        }
        for (name, path, old) in &self.before {
            if read(path).is_some_and(|now| !same(name, &now, old)) {
                let _ = std::fs::write(path, format!("{old}\n"));
            }
        }
    }
}

fn slices(pid: u32) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("sched")).ok()?;
            let line = text.lines().find(|l| l.starts_with("se.slice"))?;
            Some((e.file_name().into_string().unwrap(), line.split(':').nth(1)?.trim().to_string()))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn apply_then_revert_restores_every_value() {
    let _g = lock();
    let dir = test_dir("tune-apply");
    let herald =
        Herald::start_with(&dir, &HeraldConfig::default(), &HeraldExtras { workers: Some(2), ..Default::default() });
    let pid = herald.pid();
    let state = dir.join("state.json");
    // A short service time and a high rate make the buffer ceilings and the backlog grow.
    let args = ["--service-us", "5", "--rate", "200000", "--pid", &pid.to_string(), "--json"];
    let doc = json_of(&tune(&args));
    let before: Vec<(String, PathBuf, String)> =
        file_settings(&doc).into_iter().filter_map(|(n, p)| read(&p).map(|v| (n, p, v))).collect();
    let _restore = Restore { state: state.clone(), before: before.clone() };
    let slices_before = slices(pid);

    let mut apply_args = args.to_vec();
    apply_args.extend(["--apply", "--state", state.to_str().unwrap()]);
    let out = tune(&apply_args);
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{log}");
    let root = euid() == 0;
    if root {
        assert!(state.exists(), "--apply as root changed nothing: {log}");
        // rmem_max: 5 µs → 10,000 messages × truesize, well above any default ceiling.
        let rmem = setting(&doc, "net.core.rmem_max");
        if rmem["change"] == true && log.contains("set     net.core.rmem_max") {
            assert_eq!(read(Path::new("/proc/sys/net/core/rmem_max")).as_deref(), rmem["recommended"].as_str());
        }
        let applied: Vec<&str> = log.lines().filter(|l| l.starts_with("set ")).collect();
        assert!(!applied.is_empty(), "{log}");
        let task_slice = setting(&doc, "sched slice of herald's threads");
        if task_slice["where"].as_str().unwrap().starts_with("sched_setattr") && task_slice["change"] == true {
            // Linux 6.12+: root may set any task's slice.
            assert!(log.contains("set     sched slice of herald's threads"), "{log}");
        }
        if log.contains("set     sched slice of herald's threads") {
            let want = doc["workload"]["slice_ns"].as_u64().unwrap().to_string();
            assert!(slices(pid).iter().all(|(_, s)| *s == want), "{:?} != {want}", slices(pid));
        }
    }
    // Settings that could not be written are reported, one line each, and did not stop the rest.
    for s in doc["settings"].as_array().unwrap().iter().filter(|s| s["change"] == true) {
        let name = s["name"].as_str().unwrap();
        assert!(
            log.contains(&format!("set     {name}:")) || log.contains(&format!("not set {name}:")),
            "{name} not reported: {log}"
        );
    }
    if state.exists() {
        // A second apply would lose the recorded values: refused.
        let again = tune(&apply_args);
        assert_eq!(again.status.code(), Some(2));
        let out = tune(&["--revert", "--state", state.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        assert!(!state.exists(), "the state file stays after a full revert");
    }
    for (name, path, old) in &before {
        let now = read(path).unwrap();
        assert!(same(name, &now, old), "{name}: {} was {old}, is {now} after --revert", path.display());
    }
    assert_eq!(slices(pid), slices_before);
    // Nothing left to revert.
    assert_eq!(tune(&["--revert", "--state", state.to_str().unwrap()]).status.code(), Some(2));
    drop(herald);
}

/// The effective uid, from /proc (no libc call needed).
fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn an_unprivileged_user_gets_a_report_not_a_failure() {
    let _g = lock();
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].into_iter().find(|p| Path::new(p).exists());
    let (Some(setpriv), 0) = (setpriv, euid()) else {
        eprintln!("skipped: needs root and setpriv to become nobody");
        return;
    };
    let dir = test_dir("tune-unprivileged");
    let mut perms = std::fs::metadata(&dir).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
    std::fs::set_permissions(&dir, perms).unwrap();
    let state = dir.join("state.json");
    let rmem_before = read(Path::new("/proc/sys/net/core/rmem_max")).unwrap();
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_herald"), "tune"])
        .args(["--service-us", "5", "--rate", "200000", "--apply", "--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    if log.contains("Permission denied") && !log.contains("not set") && !out.status.success() {
        panic!("the binary cannot run as nobody here: {log}");
    }
    assert!(out.status.success(), "{log}");
    assert!(log.contains("not set net.core.rmem_max:") && log.contains("Permission denied"), "{log}");
    assert!(log.contains("applied 0, could not apply"), "{log}");
    assert!(!state.exists(), "nothing was applied, so nothing to revert");
    assert_eq!(read(Path::new("/proc/sys/net/core/rmem_max")).unwrap(), rmem_before);
}

#[test]
fn measures_a_real_herald_built_in_and_through_its_metrics() {
    let _g = lock();
    let doc = json_of(&tune(&["--measure-rate", "100", "--measure-s", "1", "--json"]));
    let w = &doc["workload"];
    assert!(w["service_source"].as_str().unwrap().starts_with("built-in run"), "{w}");
    let s = w["service_us"].as_f64().unwrap();
    assert!(s > 0.0 && s < 100_000.0, "{w}");

    let dir = test_dir("tune-metrics");
    let extras = HeraldExtras { metrics: true, workers: Some(1), ..Default::default() };
    let herald = Herald::start_with(&dir, &HeraldConfig::default(), &extras);
    let url = herald.metrics_url.clone().unwrap();
    let bench = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "calls", "--quiet", "--rate", "50", "--duration", "3", "--max-failure", "1", "--proxy"])
        .arg(herald.addr.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let doc = json_of(&tune(&["--metrics", &url, "--window-s", "1", "--pid", &herald.pid().to_string(), "--json"]));
    let mut bench = bench;
    let _ = bench.wait();
    let w = &doc["workload"];
    let source = w["service_source"].as_str().unwrap();
    assert!(source.contains(&url) && source.contains("CPU time"), "{w}");
    assert!(w["messages_per_s"].as_f64().unwrap() > 50.0, "{w}");
    drop(herald);
}

#[test]
fn revert_skips_the_threads_of_a_herald_that_has_exited() {
    let _g = lock();
    if euid() != 0 {
        eprintln!("skipped: --apply needs root");
        return;
    }
    let dir = test_dir("tune-exited");
    let herald =
        Herald::start_with(&dir, &HeraldConfig::default(), &HeraldExtras { workers: Some(1), ..Default::default() });
    let pid = herald.pid().to_string();
    let state = dir.join("state.json");
    let args = ["--service-us", "5", "--rate", "200000", "--pid", &pid, "--json"];
    let doc = json_of(&tune(&args));
    let before: Vec<(String, PathBuf, String)> =
        file_settings(&doc).into_iter().filter_map(|(n, p)| read(&p).map(|v| (n, p, v))).collect();
    let _restore = Restore { state: state.clone(), before: before.clone() };
    let mut apply_args = args.to_vec();
    apply_args.extend(["--apply", "--state", state.to_str().unwrap()]);
    let out = tune(&apply_args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out_apply_log = out.stderr;
    drop(herald);
    if !state.exists() {
        return; // nothing could be applied here
    }
    let out = tune(&["--revert", "--state", state.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!state.exists(), "{text}");
    if String::from_utf8_lossy(&out_apply_log).contains("set     sched slice of herald's threads") {
        assert!(text.contains("gone     slice of thread"), "{text}");
    }
    for (name, path, old) in &before {
        assert!(same(name, &read(path).unwrap(), old), "{name} not restored: {text}");
    }
}
