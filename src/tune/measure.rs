//! The built-in measurement: starts a herald (this executable, `serve`) on loopback with its
//! metrics endpoint on, offers it a short `herald bench calls` load, and reads its mean service
//! time per message from the metrics. For when no herald is running to ask (`--metrics`).

use super::workload::{cpu_ns, mean_service, with_cpu, Measured};
use herald_bench::scrape;
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the herald it holds when dropped, however the measurement ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn measure(workers: usize, calls_per_s: f64, seconds: u64) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let dir = std::env::temp_dir().join(format!("herald-tune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = run(&exe, &dir, workers, calls_per_s, seconds);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(
    exe: &std::path::Path,
    dir: &std::path::Path,
    workers: usize,
    calls_per_s: f64,
    seconds: u64,
) -> Result<Measured, String> {
    let sip = UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map_err(|e| e.to_string())?.port();
    let metrics = TcpListener::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map_err(|e| e.to_string())?.port();
    // herald doing a proxy's job for the bench agents: record-routed, unauthenticated (the load
    // measures the proxy path, not digest), the generator trusted by the flood guard.
    let config = format!(
        "[server]\nworkers = {workers}\ndrain_timeout_s = 1\n[[listen]]\naddress = \"127.0.0.1:{sip}\"\ntransports = [\"udp\"]\n\
         [proxy]\nrecord_route = \"always\"\n[auth]\nenabled = false\n[flood]\ntrusted = [\"127.0.0.0/8\"]\n\
         [metrics]\nlisten = \"127.0.0.1:{metrics}\"\n[admin]\nlisten = \"\"\n[log]\nlevel = \"warn\"\n"
    );
    let config_path = dir.join("herald.toml");
    std::fs::write(&config_path, config).map_err(|e| format!("{}: {e}", config_path.display()))?;
    let log = std::fs::File::create(dir.join("serve.log")).map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(&config_path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting herald serve: {e}"))?;
    let pid = child.id() as i32;
    let _serve = Running(child);
    let url = format!("http://127.0.0.1:{metrics}/metrics");
    let up = Instant::now();
    while scrape::fetch(&url).is_err() {
        if up.elapsed() > Duration::from_secs(10) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            return Err(format!("herald serve did not answer on {url} within 10 s: {log}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = scrape::fetch(&url)?;
    let cpu_before = cpu_ns(pid);
    let bench = Command::new(exe)
        .args(["bench", "calls", "--quiet", "--max-failure", "1", "--proxy"])
        .arg(format!("127.0.0.1:{sip}"))
        .arg("--rate")
        .arg(calls_per_s.to_string())
        .arg("--duration")
        .arg(seconds.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("herald bench calls: {e}"))?;
    let after = scrape::fetch(&url)?;
    let cpu_after = cpu_ns(pid);
    let (n, mean) = mean_service(&scrape::window(&before, &after));
    if n == 0 {
        return Err(format!(
            "herald bench calls reached no call through the test herald ({}): {}",
            bench.status,
            String::from_utf8_lossy(&bench.stderr).lines().last().unwrap_or("")
        ));
    }
    let cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a) as f64 / 1e3 / n as f64);
    let what = format!(
        "built-in run: herald serve ({workers} workers) under herald bench calls at {calls_per_s} calls/s for {seconds} s, {n} messages"
    );
    Ok(with_cpu(mean, cpu, None, what, Some(pid)))
}
