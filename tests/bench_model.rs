//! Runs the real `herald bench model` on results files with known numbers and checks the table,
//! the JSON and the exit status.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herald-bench-model-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn model(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald")).args(["bench", "model"]).args(args).output().expect("run herald")
}

/// A 60 s step at `rate` calls/s, 6 INVITE-like messages per call with the given service mean
/// and second moment (µs, µs²) and mean queue wait (µs).
fn step(rate: f64, mean: f64, m2: f64, wait: f64, drops: u64) -> Value {
    let calls = (rate * 60.0) as u64;
    json!({
        "schema": 1, "label": "herald", "offered_rate": rate, "duration_s": 60.0,
        "attempted": calls, "succeeded": calls,
        "server_metrics": { "workers": 1, "socket_drops": drops, "messages": {
            "INVITE": { "count": calls * 6,
                        "queue_wait": { "mean_us": wait, "second_moment_us2": 0.0 },
                        "service": { "mean_us": mean, "second_moment_us2": m2 } } } }
    })
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn prints_predicted_next_to_measured_and_writes_json() {
    let dir = temp_dir("ok");
    // λ = 6 × rate messages/s with E[X] = 150 µs, E[X²] = 25,000 µs², c = 1, K = 200:
    // 500 cps: ρ = 0.45, W = 3000 · 25000e-12 / (2 · 0.55) = 68.18 µs (65 measured);
    // 1000 cps: ρ = 0.9, W = 750 µs (700 measured), M/M/1/200 drop 7.06e-11;
    // 1250 cps: ρ = 1.125, no steady state: N/A and the model breaks down there.
    let capacity = json!({
        "schema": 1, "kind": "capacity", "label": "herald", "target": "127.0.0.1:5060",
        "max_failure": 0.0001, "capacity_rate": 1000.0,
        "steps": [step(500.0, 150.0, 25_000.0, 65.0, 0), step(1000.0, 150.0, 25_000.0, 700.0, 0),
                  step(1250.0, 150.0, 25_000.0, 40_000.0, 9000)]
    });
    let input = write(&dir, "capacity.json", &capacity);
    let json_out = dir.join("model.json");
    let out = model(&["--input", &input, "--queue-capacity", "200", "--json", json_out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("herald: herald metrics (E[X] 150.0 µs, E[X²] 25000 µs², c = 1, K = 200)"), "{stdout}");
    let row = |rate: &str| stdout.lines().find(|l| l.trim_start().starts_with(rate)).unwrap_or_default().to_string();
    let r500 = row("500.0");
    assert_eq!(r500.split_whitespace().take(4).collect::<Vec<_>>(), ["500.0", "0.450", "68.2", "65.0"], "{stdout}");
    let r1000 = row("1000.0");
    assert!(r1000.contains("0.900") && r1000.contains("750.0") && r1000.contains("700.0"), "{stdout}");
    let r1250 = row("1250.0");
    assert!(r1250.contains("1.125") && r1250.contains("N/A"), "{stdout}");
    assert!(stdout.contains("model holds below 1250.0 calls/s"), "{stdout}");

    let fits: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    let fit = &fits[0];
    assert_eq!(fit["source"], "herald metrics");
    assert_eq!(fit["breaks_down_at"], 1250.0);
    assert_eq!(fit["queue_capacity"], 200);
    let points = fit["points"].as_array().unwrap();
    assert_eq!(points.len(), 3 + 11);
    let at = |rate: f64| points.iter().find(|p| p["offered_rate"] == rate).unwrap();
    assert!((at(500.0)["predicted_wait_us"].as_f64().unwrap() - 68.181_818).abs() < 1e-4);
    // Measured drop at 1250 cps: 9000 / (450,000 + 9000) = 0.019608.
    assert!((at(1250.0)["measured_drop"].as_f64().unwrap() - 0.019_607_8).abs() < 1e-6);
    // Infinite predicted wait is written as null.
    assert!(at(1250.0)["predicted_wait_us"].is_null());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn several_inputs_and_the_cpu_fallback() {
    let dir = temp_dir("multi");
    let kamailio = json!({
        "schema": 1, "kind": "calls", "label": "kamailio", "offered_rate": 1000.0, "attempted": 60000,
        "servers": [{ "pid": 1, "name": "kamailio", "cpu_s": 30.0, "cpu_s_per_1000_calls": 0.5, "peak_rss_kib": 1 }]
    });
    let mut herald = step(100.0, 100.0, 20_000.0, 5.0, 0);
    herald["kind"] = json!("calls");
    let a = write(&dir, "kamailio.json", &kamailio);
    let b = write(&dir, "herald.json", &herald);
    let out = model(&["--input", &a, "--input", &b, "--queue-capacity", "600"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // Kamailio: 500 µs per call, M/M/1 at ρ = 0.5 waits 500 µs; K = 600 / 6 = 100 calls.
    assert!(stdout.contains("kamailio: server CPU per call, exponential assumed (E[X] 500.0 µs"), "{stdout}");
    assert!(stdout.contains("c = 1, K = 100)"), "{stdout}");
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("1000.0") && l.contains("0.500") && l.contains("500.0")));
    assert!(stdout.contains("herald: herald metrics"), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_inputs_exit_2_naming_the_file() {
    let dir = temp_dir("bad");
    let missing = dir.join("missing.json");
    let out = model(&["--input", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));

    let garbage = write(&dir, "garbage.json", &json!({ "schema": 99 }));
    let out = model(&["--input", &garbage]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("garbage.json: results schema"));

    let no_times = write(&dir, "bare.json", &json!({ "schema": 1, "kind": "calls", "label": "x", "attempted": 5 }));
    let out = model(&["--input", &no_times]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bare.json: x: no run has"));

    assert_eq!(model(&[]).status.code(), Some(2));
    assert_eq!(model(&["--input", &no_times, "--queue-capacity", "0"]).status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}
