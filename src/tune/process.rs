//! The process's file descriptor limit: herald needs one per TCP connection it may accept.

use super::inputs::Inputs;
use super::recommend;
use super::setting::{Setting, Target};

/// Descriptors besides connections and sockets: epoll and eventfds per worker, the metrics and
/// admin endpoints' connections (32 + 16 at most), the users and log files. 64 per worker
/// covers them with room.
const SPARE_PER_WORKER: u64 = 64;

/// "SOFT HARD" of /proc/PID/limits' "Max open files" line ("unlimited" as is).
pub fn read_nofile(pid: Option<i32>) -> Result<String, String> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/limits"),
        None => "/proc/self/limits".to_string(),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let line = text.lines().find(|l| l.starts_with("Max open files")).ok_or(format!("{path}: no 'Max open files'"))?;
    let f: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    match f.as_slice() {
        [soft, hard, ..] => Ok(format!("{soft} {hard}")),
        _ => Err(format!("{path}: unreadable 'Max open files' line")),
    }
}

pub fn settings(i: &Inputs) -> Vec<Setting> {
    let w = &i.work;
    let sockets = w.udp_sockets + w.tcp_listeners;
    let need = recommend::nofile(w.max_tcp_connections, sockets, SPARE_PER_WORKER * w.workers as u64);
    let current = read_nofile(i.pid);
    let parse = |s: &str| if s == "unlimited" { u64::MAX } else { s.parse().unwrap_or(0) };
    let (soft, hard) = match current.as_ref().ok().map(|c| c.split_whitespace().map(parse).collect::<Vec<_>>()) {
        Some(v) if v.len() == 2 => (v[0], v[1]),
        _ => (0, 0),
    };
    let show = |v: u64| if v == u64::MAX { "unlimited".to_string() } else { v.to_string() };
    let recommended = format!("{} {}", show(soft.max(need)), show(hard.max(need)));
    let why = format!(
        "herald holds a descriptor per TCP connection ([limits] max_tcp_connections = {}), per socket ({sockets}: {} UDP, {} \
         TCP listeners) and {SPARE_PER_WORKER} per worker for epoll, eventfds, endpoints and files = {need}; accept(2) fails \
         with EMFILE beyond the soft limit. Never lowered",
        w.max_tcp_connections, w.udp_sockets, w.tcp_listeners
    );
    match i.pid {
        Some(pid) => vec![Setting::new("RLIMIT_NOFILE of herald (soft hard)", Target::Nofile { pid }, current).recommend(recommended, why)],
        None => vec![Setting::new("RLIMIT_NOFILE of this shell (soft hard)", Target::Advice, current).recommend(
            recommended,
            format!("{why}. herald inherits it from the shell or its service unit: `ulimit -n`, systemd LimitNOFILE=, or --pid of a running herald"),
        )],
    }
}
