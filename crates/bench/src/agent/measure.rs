//! Resource measurements around a window: the generator's CPU (getrusage), each `--server-pid`
//! process's CPU and peak RSS (/proc), the kernel's UDP counters (/proc/net/snmp), and herald's
//! own metrics (`--metrics`).

use super::options::CommonOptions;
use crate::results::{ProcessUsage, ServerMetrics, ServerUsage, UdpCounters};
use crate::{scrape, sysstat};

pub struct Before {
    cpu_s: f64,
    servers: Vec<(u32, f64)>,
    udp: UdpCounters,
    scrape: Option<scrape::Scrape>,
}

pub struct After {
    pub generator: ProcessUsage,
    pub servers: Vec<ServerUsage>,
    pub udp_before: UdpCounters,
    pub udp_after: UdpCounters,
    pub server_metrics: Option<ServerMetrics>,
}

/// Samples everything at the start of the window; Err for a server pid that does not exist or
/// a metrics endpoint that does not answer (both are usage errors worth stopping for).
pub fn begin(opts: &CommonOptions) -> Result<Before, String> {
    let mut servers = Vec::new();
    for &pid in &opts.server_pids {
        let sample = sysstat::process(pid).map_err(|e| format!("--server-pid {pid}: {e}"))?;
        servers.push((pid, sample.cpu_s));
    }
    let scrape = match &opts.metrics_url {
        Some(url) => Some(scrape::fetch(url).map_err(|e| format!("--metrics {url}: {e}"))?),
        None => None,
    };
    Ok(Before { cpu_s: sysstat::own_cpu_s(), servers, udp: sysstat::udp_counters().unwrap_or_default(), scrape })
}

/// Samples again at the end; `attempted` scales CPU per call.
pub fn end(before: Before, opts: &CommonOptions, attempted: u64) -> After {
    let cpu_s = sysstat::own_cpu_s() - before.cpu_s;
    let per = |cpu: f64, scale: f64| if attempted == 0 { 0.0 } else { cpu * scale / attempted as f64 };
    let generator = ProcessUsage { cpu_s, cpu_us_per_call: per(cpu_s, 1e6), peak_rss_kib: sysstat::own_peak_rss_kib() };
    let servers = before
        .servers
        .iter()
        .map(|&(pid, cpu_before)| match sysstat::process(pid) {
            Ok(s) => {
                let cpu = s.cpu_s - cpu_before;
                ServerUsage {
                    pid,
                    name: s.name,
                    cpu_s: cpu,
                    cpu_s_per_1000_calls: per(cpu, 1000.0),
                    peak_rss_kib: s.peak_rss_kib,
                }
            }
            // The server died during the window: report what is known.
            Err(_) => ServerUsage { pid, name: "(exited)".into(), ..ServerUsage::default() },
        })
        .collect();
    let server_metrics = match (&before.scrape, &opts.metrics_url) {
        (Some(b), Some(url)) => scrape::fetch(url).ok().map(|a| scrape::window(b, &a)),
        _ => None,
    };
    After {
        generator,
        servers,
        udp_before: before.udp,
        udp_after: sysstat::udp_counters().unwrap_or_default(),
        server_metrics,
    }
}
