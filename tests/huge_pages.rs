//! `[server] transparent_huge_pages` (default false): herald turns transparent huge pages off for
//! itself (prctl PR_SET_THP_DISABLE), whatever the system's THP mode, because zeroing a fresh
//! 2 MiB page inside the receive loop while the heap grows under load overflowed the socket
//! queue (herald_sys::set_thp_disabled). The kernel reports the flag in /proc/PID/status
//! (`THP_enabled`, Linux 5.0+), which is what these tests read.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `THP_enabled` of process `pid` once it is up (its first line appears at exec; herald sets the
/// flag right after loading its configuration, so wait until it listens).
fn thp_enabled(pid: u32) -> u8 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("THP_enabled:")).expect("a THP_enabled line (Linux 5.0+)");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `herald serve ARGS` run in `dir` (the embedded configuration keeps its location store in the
/// working directory).
fn serve(dir: &Path, args: &[&str], log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .current_dir(dir)
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

#[test]
fn the_embedded_default_configuration_turns_huge_pages_off() {
    let dir = test_dir("huge_pages_default");
    let log = dir.join("herald.log");
    let port = port_block();
    // No --config: the embedded default configuration, as the README's first command runs it.
    let mut child = serve(&dir, &["--listen", &format!("127.0.0.1:{port}")], &log);
    wait_bound(port, false);
    assert_eq!(thp_enabled(child.id()), 0, "huge pages still on: {}", log_excerpt(&log));
    stop_child(&mut child);
}

#[test]
fn the_operator_can_keep_huge_pages() {
    let dir = test_dir("huge_pages_kept");
    let log = dir.join("herald.log");
    let port = port_block();
    let config = dir.join("herald.toml");
    let toml = format!(
        "[server]\nworkers = 1\ntransparent_huge_pages = true\n\
         [[listen]]\naddress = \"127.0.0.1:{port}\"\ntransports = [\"udp\"]\n[auth]\nenabled = false\n"
    );
    std::fs::write(&config, toml).unwrap();
    let mut child = serve(&dir, &["--config", config.to_str().unwrap()], &log);
    wait_bound(port, false);
    assert_eq!(thp_enabled(child.id()), 1, "huge pages were turned off: {}", log_excerpt(&log));
    stop_child(&mut child);
}
