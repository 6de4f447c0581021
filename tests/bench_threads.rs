//! `herald bench calls --single-socket --threads N` (crates/bench/src/agent/threads.rs): several
//! event loops drive one UDP socket, so one 4-tuple carries more than one core's load. Against
//! herald with two workers: one socket, one reader thread and N loops, and every call of every
//! loop completes.

mod bench_support;
mod common;

use bench_support::{assert_exit, read_run, spawn_bench, wait_output};
use common::*;
use std::time::Duration;

#[test]
fn bench_threads_drive_one_socket_together() {
    let dir = test_dir("bench_threads");
    let extras = HeraldExtras { workers: Some(2), ..Default::default() };
    let herald = Herald::start_with(&dir, &HeraldConfig { drain_timeout_s: Some(1), ..Default::default() }, &extras);
    let json = dir.join("calls.json");
    let proxy = herald.addr.to_string();
    let args = [
        "calls",
        "--proxy",
        &proxy,
        "--single-socket",
        "--threads",
        "3",
        "--rate",
        "150",
        "--duration",
        "2",
        "--users",
        "6",
        // Evenly spaced arrivals: a Poisson count over 2 s would spread ±17 around 300 and fail
        // the count below by chance (it did, in CI: 286).
        "--arrivals",
        "uniform",
    ];
    let child = spawn_bench(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id();
    let sockets = socket_inodes(pid);
    let threads = thread_names(pid);
    let out = wait_output(child, Duration::from_secs(60));
    assert_exit(&out, 0);
    assert_eq!(sockets.len(), 1, "the generator's sockets: {sockets:?}");
    let loops = threads.iter().filter(|t| t.starts_with("bench-loop-")).count();
    assert_eq!((loops, threads.iter().filter(|t| *t == "bench-router").count()), (3, 1), "{threads:?}");
    let r = read_run(&json, "calls");
    // 50 calls/s from each loop for 2 s, one every 20 ms from 20 ms on (99 each): all of them
    // placed and completed.
    assert!(r.attempted >= 290, "only {} calls attempted", r.attempted);
    assert_eq!((r.failed, r.succeeded), (0, r.attempted), "failures: {:?}", r.failures);
    assert_eq!(r.srd.count, r.attempted, "every loop's latencies are in the results");
}

#[test]
fn bench_threads_need_a_single_socket() {
    let out = bench_support::bench(&["calls", "--proxy", "127.0.0.1:9", "--threads", "2"], Duration::from_secs(20));
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads needs --single-socket"));
}

/// The distinct UDP sockets process `pid` has open (two descriptors of one socket count once;
/// the loops' wake-up socket pairs are not UDP).
fn socket_inodes(pid: u32) -> std::collections::BTreeSet<String> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).expect("the generator is running");
    let udp: std::collections::BTreeSet<String> =
        table.lines().skip(1).filter_map(|l| l.split_whitespace().nth(9)).map(|i| format!("socket:[{i}]")).collect();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the generator is running");
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| udp.contains(l))
        .collect()
}

/// The names of process `pid`'s threads.
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the generator is running");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}
