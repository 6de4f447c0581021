//! A fuzz input replays bit for bit: every file in fuzz/regressions/engine_pipeline/ (inputs
//! checked in after a crash, or to pin a flow) runs through the fuzz target's pipeline twice in
//! this process and once in a child process, and the digests of every message herald sent (with
//! its virtual time and destination) must agree. herald's seed is fixed and time is simulated,
//! so nothing may differ between runs or processes. `HERALD_REPLAY_DIR=fuzz/corpus/engine_pipeline`
//! (an absolute path) replays a whole corpus the same way.

use std::path::PathBuf;
use std::process::Command;

fn checked_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/engine_pipeline")
}

fn inputs() -> Vec<PathBuf> {
    let checked_in = checked_in();
    let extra = std::env::var_os("HERALD_REPLAY_DIR").map(PathBuf::from);
    let mut files = Vec::new();
    for dir in std::iter::once(checked_in).chain(extra) {
        let mut in_dir: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    files
}

#[test]
fn every_checked_in_input_replays_with_the_same_digest() {
    let files = inputs();
    assert!(!files.is_empty(), "no inputs to replay");
    let mut digests = Vec::new();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let first = herald_sim::pipeline::run(&data);
        let second = herald_sim::pipeline::run(&data);
        assert_eq!(first, second, "{} replays differently in one process", f.display());
        // Another process: a new real clock, new std RandomStates, new allocations.
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_prints_the_digest", "--nocapture", "--test-threads=1"])
            .env("HERALD_REPLAY_INPUT", f)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let child = stdout
            .lines()
            .find_map(|l| l.split("digest=").nth(1))
            .unwrap_or_else(|| panic!("child printed no digest: {stdout}"))
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap();
        assert_eq!(first, child, "{} replays differently in another process", f.display());
        if f.starts_with(checked_in()) {
            digests.push(first);
        }
    }
    // The digest does tell the checked-in inputs apart (a corpus may hold inputs that send the
    // same, e.g. bytes herald drops).
    let n = digests.len();
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), n, "two different inputs with one digest");
}

/// Run by the test above in a child process (does nothing on its own).
#[test]
fn child_prints_the_digest() {
    if let Some(path) = std::env::var_os("HERALD_REPLAY_INPUT") {
        let data = std::fs::read(path).unwrap();
        println!("digest={}", herald_sim::pipeline::run(&data));
    }
}

#[test]
fn an_input_that_sends_something_changes_the_digest() {
    let empty = herald_sim::pipeline::run(&[0]);
    let files = inputs();
    let data = std::fs::read(&files[0]).unwrap();
    assert_ne!(herald_sim::pipeline::run(&data), empty);
}
