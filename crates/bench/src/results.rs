//! The machine-readable result of a `herald bench` run: what `--json` writes and what
//! `herald bench model` and `herald bench report` read back.
//!
//! Every duration is in microseconds (`_us`), every rate per second, every CPU time in seconds.
//! The schema is versioned by [`SCHEMA_VERSION`]; readers reject files of another version rather
//! than misreading them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped whenever a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

/// One results file. The `kind` field tells which run wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ResultsFile {
    /// `herald bench calls`
    Calls(RunResult),
    /// `herald bench register`
    Register(RunResult),
    /// `herald bench users`
    Users(RunResult),
    /// `herald bench capacity`: every step it ran plus the rate it found.
    Capacity(CapacityResult),
}

impl ResultsFile {
    /// Every run in the file: one for a single run, each step for a capacity search.
    pub fn runs(&self) -> Vec<&RunResult> {
        match self {
            ResultsFile::Calls(r) | ResultsFile::Register(r) | ResultsFile::Users(r) => vec![r],
            ResultsFile::Capacity(c) => c.steps.iter().collect(),
        }
    }

    /// The label a report shows for this file (`--label`, e.g. "herald" or "kamailio").
    pub fn label(&self) -> &str {
        match self {
            ResultsFile::Calls(r) | ResultsFile::Register(r) | ResultsFile::Users(r) => &r.label,
            ResultsFile::Capacity(c) => &c.label,
        }
    }

    /// Reads and checks a results file.
    pub fn read(path: &std::path::Path) -> Result<ResultsFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        let version = value.get("schema").and_then(|v| v.as_u64());
        if version != Some(SCHEMA_VERSION as u64) {
            return Err(format!(
                "{}: results schema {:?}, this herald reads schema {SCHEMA_VERSION}",
                path.display(),
                version
            ));
        }
        serde_json::from_value(value).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the file as pretty JSON.
    pub fn write(&self, path: &std::path::Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// What one measurement window saw.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResult {
    /// [`SCHEMA_VERSION`]
    pub schema: u32,
    /// Free text naming the system under test ("herald", "kamailio", ...).
    pub label: String,
    /// The proxy or registrar address the load went to.
    pub target: String,
    /// "udp" or "tcp".
    pub transport: String,
    /// "poisson", "uniform" or "file:PATH".
    pub arrivals: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Length of the measurement window, seconds (shorter than asked when interrupted).
    pub duration_s: f64,
    /// Calls (or registrations, or user transactions) started per second, as scheduled.
    pub offered_rate: f64,
    /// Calls (registrations, transactions) that succeeded, per second of the window.
    pub achieved_rate: f64,
    /// Started.
    pub attempted: u64,
    /// Completed as the scenario expects.
    pub succeeded: u64,
    /// Did not: `failures` says why.
    pub failed: u64,
    /// Failure reason → count. Reasons: "timeout", "status NNN" (unexpected final status),
    /// "transport" (send or connection error), "unfinished" (still running when the run ended).
    pub failures: BTreeMap<String, u64>,
    /// Requests and responses the generator sent again because of RFC 3261 timers A/E/G.
    pub retransmissions: u64,
    /// RFC 6076 §4.2 session request delay: INVITE sent → 180 (or 200) received.
    pub srd: Latency,
    /// RFC 6076 §4.3 session disconnect delay: BYE sent → its 200 received.
    pub sdd: Latency,
    /// Per-method transaction response time: request sent → final response received.
    pub response_time: BTreeMap<String, Latency>,
    /// The generator's own CPU and memory (caller and callee together).
    pub generator: ProcessUsage,
    /// Each `--server-pid` process during the window.
    pub servers: Vec<ServerUsage>,
    /// The kernel's UDP counters (/proc/net/snmp) before and after the window.
    pub udp_before: UdpCounters,
    pub udp_after: UdpCounters,
    /// What herald's Prometheus endpoint reported (difference over the window), when given.
    pub server_metrics: Option<ServerMetrics>,
    /// `herald bench users` only.
    pub users: Option<UsersOutcome>,
    /// Ctrl-C ended the run early.
    pub interrupted: bool,
    /// The generator's scheduling quantum, µs (`--quantum-us`; 0 in files from before it).
    #[serde(default)]
    pub quantum_us: u64,
    /// After the window every registered user was unregistered (Expires: 0); how many of those
    /// removals failed, and why the first did (0 and none in files from before it).
    #[serde(default)]
    pub unregister_failed: u64,
    #[serde(default)]
    pub unregister_error: Option<String>,
}

/// Latency distribution summary from an HDR histogram; all values in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Complementary CDF: (latency µs, fraction of samples above it), for log-scale plots.
    pub ccdf: Vec<(u64, f64)>,
}

/// CPU and memory of a process over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProcessUsage {
    /// User + system CPU seconds spent during the window.
    pub cpu_s: f64,
    /// CPU microseconds per call (or registration) attempted.
    pub cpu_us_per_call: f64,
    /// Peak resident set size (VmHWM), KiB.
    pub peak_rss_kib: u64,
}

/// One server process measured with `--server-pid`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ServerUsage {
    pub pid: u32,
    /// Process name from /proc/PID/comm.
    pub name: String,
    pub cpu_s: f64,
    /// CPU seconds per 1,000 calls attempted.
    pub cpu_s_per_1000_calls: f64,
    pub peak_rss_kib: u64,
}

/// `Udp:` line of /proc/net/snmp (whole machine).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UdpCounters {
    pub in_datagrams: u64,
    pub in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
}

/// Herald's own view of the window, read from its metrics endpoint (`--metrics URL`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ServerMetrics {
    /// Worker threads (the c of M/M/c/K).
    pub workers: u32,
    /// Datagrams the kernel dropped because a socket queue was full (SO_RXQ_OVFL).
    pub socket_drops: u64,
    /// Per message type ("INVITE", "ACK", "BYE", "REGISTER", "1xx", "2xx", ...).
    pub messages: BTreeMap<String, MessageTiming>,
}

/// Queue wait and service time of one message type.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MessageTiming {
    pub count: u64,
    /// Kernel receive timestamp → herald read it.
    pub queue_wait: Moments,
    /// Herald read it → herald finished with it.
    pub service: Moments,
}

/// First two moments of a distribution, in µs and µs².
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Moments {
    pub mean_us: f64,
    pub second_moment_us2: f64,
}

/// `herald bench users`: how many users were served and how well.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UsersOutcome {
    pub users: u64,
    pub time_scale: f64,
    /// Transactions of every kind (REGISTER, INVITE, BYE, CANCEL).
    pub transactions: u64,
    pub transactions_failed: u64,
    /// transactions_failed / transactions < 0.0001 (the SPEC SIP criterion, 99.99%).
    pub meets_criterion: bool,
    /// Calls by outcome: "answered", "voicemail", "cancelled".
    pub calls_by_outcome: BTreeMap<String, u64>,
}

/// `herald bench capacity`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CapacityResult {
    pub schema: u32,
    pub label: String,
    pub target: String,
    /// The failed-call ratio a step may not reach (0.0001 = 0.01%).
    pub max_failure: f64,
    /// Highest offered rate whose step stayed under `max_failure`; 0 if none did.
    pub capacity_rate: f64,
    /// Every step in the order it ran.
    pub steps: Vec<RunResult>,
}

impl RunResult {
    /// failed / attempted, 0 when nothing was attempted.
    pub fn failure_ratio(&self) -> f64 {
        if self.attempted == 0 {
            0.0
        } else {
            self.failed as f64 / self.attempted as f64
        }
    }
}
