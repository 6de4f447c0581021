//! CPU time, peak memory and kernel UDP counters, read from /proc and getrusage.
//!
//! Seeds 000 and 002 report CPU per call and memory next to throughput, and seed 003 explains
//! lost calls by socket-queue overflow: the `Udp:` counters of /proc/net/snmp (`RcvbufErrors`)
//! show that overflow without patching the kernel. The parsers take the file text so they can be
//! tested against sample files; the readers only add the file access.

use crate::results::UdpCounters;
use std::io::{Error, ErrorKind};

/// CPU and memory of one process, as /proc reports them now (cumulative since it started).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// User + system CPU seconds since the process started.
    pub cpu_s: f64,
    /// Peak resident set size (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// Command name from /proc/PID/comm.
    pub name: String,
}

/// Reads /proc/PID/stat, /proc/PID/status and /proc/PID/comm of `pid`.
pub fn process(pid: u32) -> std::io::Result<ProcessSample> {
    let dir = format!("/proc/{pid}");
    let read = |file: &str| {
        let path = format!("{dir}/{file}");
        std::fs::read_to_string(&path).map_err(|e| Error::new(e.kind(), format!("{path}: {e}")))
    };
    let stat = read("stat")?;
    let status = read("status")?;
    let comm = read("comm")?;
    let ticks = parse_stat_cpu_ticks(&stat).map_err(|e| invalid(&format!("{dir}/stat"), &e))?;
    let peak_rss_kib = parse_status_vm_hwm_kib(&status).map_err(|e| invalid(&format!("{dir}/status"), &e))?;
    Ok(ProcessSample { cpu_s: ticks as f64 / clock_ticks_per_second(), peak_rss_kib, name: comm.trim().to_string() })
}

/// User + system CPU seconds of this process (getrusage, microsecond precision).
pub fn own_cpu_s() -> f64 {
    let usage = own_rusage();
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Peak resident set size of this process, KiB (getrusage `ru_maxrss` is in KiB on Linux).
pub fn own_peak_rss_kib() -> u64 {
    own_rusage().ru_maxrss.max(0) as u64
}

/// The machine's UDP counters from /proc/net/snmp.
pub fn udp_counters() -> std::io::Result<UdpCounters> {
    const PATH: &str = "/proc/net/snmp";
    let text = std::fs::read_to_string(PATH).map_err(|e| Error::new(e.kind(), format!("{PATH}: {e}")))?;
    parse_snmp_udp(&text).map_err(|e| invalid(PATH, &e))
}

/// utime + stime (fields 14 and 15 of proc(5) `stat`), in clock ticks.
///
/// The command name (field 2) is in parentheses and may itself contain spaces and ')', so the
/// fields are counted from the *last* ')'.
pub fn parse_stat_cpu_ticks(stat: &str) -> Result<u64, String> {
    let close = stat.rfind(')').ok_or("no ')' after the command name")?;
    // After ')': field 3 (state) is index 0, so field N is index N - 3.
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        let text = fields.get(n - 3).ok_or(format!("only {} fields, field {n} missing", fields.len() + 2))?;
        text.parse().map_err(|_| format!("field {n} is not a number: '{text}'"))
    };
    Ok(field(14)? + field(15)?)
}

/// `VmHWM:  1234 kB` of /proc/PID/status, KiB.
pub fn parse_status_vm_hwm_kib(status: &str) -> Result<u64, String> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).ok_or("no VmHWM line")?;
    let number = line.trim().trim_end_matches("kB").trim();
    number.parse().map_err(|_| format!("VmHWM is not a number of kB: '{}'", line.trim()))
}

/// The `Udp:` header and value lines of /proc/net/snmp (the header names the columns, so the
/// order does not matter and columns newer kernels add are ignored).
pub fn parse_snmp_udp(snmp: &str) -> Result<UdpCounters, String> {
    let mut udp_lines = snmp.lines().filter_map(|l| l.strip_prefix("Udp:"));
    let header: Vec<&str> = udp_lines.next().ok_or("no Udp: lines")?.split_whitespace().collect();
    let values: Vec<&str> = udp_lines.next().ok_or("no Udp: value line")?.split_whitespace().collect();
    if header.len() != values.len() {
        return Err(format!("Udp: header has {} columns, values {}", header.len(), values.len()));
    }
    let column = |name: &str| -> Result<u64, String> {
        let i = header.iter().position(|h| *h == name).ok_or(format!("no Udp: column {name}"))?;
        values[i].parse().map_err(|_| format!("Udp: {name} is not a number: '{}'", values[i]))
    };
    Ok(UdpCounters {
        in_datagrams: column("InDatagrams")?,
        in_errors: column("InErrors")?,
        rcvbuf_errors: column("RcvbufErrors")?,
        sndbuf_errors: column("SndbufErrors")?,
    })
}

fn invalid(path: &str, message: &str) -> Error {
    Error::new(ErrorKind::InvalidData, format!("{path}: {message}"))
}

/// sysconf(_SC_CLK_TCK): the unit of the stat CPU fields (100 on every common Linux build).
fn clock_ticks_per_second() -> f64 {
    herald_sys::clock_ticks_per_second().map_or(100.0, |t| t as f64)
}

fn own_rusage() -> libc::rusage {
    herald_sys::rusage_self()
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real /proc/PID/stat line with a command name holding a space and a ')'.
    const STAT: &str = "4242 (herald w) 1) S 1 4242 4242 0 -1 4194560 1532 0 0 0 \
                        250 75 0 0 20 0 5 0 867612 2998272 411 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";

    #[test]
    fn stat_cpu_is_utime_plus_stime_counted_from_the_last_paren() {
        assert_eq!(parse_stat_cpu_ticks(STAT), Ok(325));
    }

    #[test]
    fn bad_stat_files_are_errors() {
        assert!(parse_stat_cpu_ticks("4242 herald S 1").is_err());
        assert!(parse_stat_cpu_ticks("4242 (h) S 1 2 3").unwrap_err().contains("field 14 missing"));
        let bad = STAT.replace(" 250 ", " x ");
        assert_eq!(parse_stat_cpu_ticks(&bad), Err("field 14 is not a number: 'x'".into()));
    }

    #[test]
    fn status_peak_rss() {
        let status = "Name:\therald\nVmPeak:\t  200000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_status_vm_hwm_kib(status), Ok(12345));
        assert!(parse_status_vm_hwm_kib("Name:\tx\n").is_err());
        assert!(parse_status_vm_hwm_kib("VmHWM:\tlots kB\n").is_err());
    }

    #[test]
    fn snmp_udp_by_column_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
            Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
            Udp: 7581879 116 9 7582048 8 3 0 0 0\n\
            UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
            UdpLite: 1 2 3 4 5 6 7 8 9\n";
        let c = parse_snmp_udp(snmp).unwrap();
        assert_eq!(c, UdpCounters { in_datagrams: 7_581_879, in_errors: 9, rcvbuf_errors: 8, sndbuf_errors: 3 });
        assert!(parse_snmp_udp("Ip: 1\n").is_err());
        assert!(parse_snmp_udp("Udp: InDatagrams InErrors\nUdp: 1\n").unwrap_err().contains("columns"));
        assert!(parse_snmp_udp("Udp: InDatagrams\nUdp: 1\n").unwrap_err().contains("InErrors"));
    }

    #[test]
    fn live_reads_of_this_process() {
        let cpu_before = own_cpu_s();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(own_cpu_s() > cpu_before, "busy loop did not use CPU");
        assert!(own_peak_rss_kib() > 0);
        let me = process(std::process::id()).unwrap();
        assert!(me.peak_rss_kib > 0);
        assert!(!me.name.is_empty());
        // /proc counts in ticks of 10 ms; getrusage is finer, so they agree within a few ticks.
        assert!((me.cpu_s - own_cpu_s()).abs() < 0.5, "{} vs {}", me.cpu_s, own_cpu_s());
        assert!(process(u32::MAX).unwrap_err().to_string().contains("/proc/4294967295"));
        udp_counters().unwrap();
    }
}
