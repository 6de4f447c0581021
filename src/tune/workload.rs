//! The workload the recommendations are sized for: herald's service time per message (measured
//! on a running herald through its metrics endpoint, by a short built-in `herald bench` run, or
//! given), the message rate to expect, the configuration's workers, sockets and limits, and the
//! socket memory one message takes on this kernel (measured).

use herald_bench::scrape;
use herald_server::config::ListenTransport;
use herald_server::Config;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// Messages herald receives per proxied call: INVITE, 180, 200, ACK, BYE, 200 (seed 003 ch. 4:
/// "for each call, six different messages are generated").
pub const MESSAGES_PER_CALL: f64 = 6.0;

pub struct Workload {
    pub service_us: f64,
    pub messages_per_s: f64,
    /// Where the service time and the rate come from, for the report.
    pub source: String,
    pub rate_source: String,
    pub workers: usize,
    /// UDP sockets herald opens: one per worker per UDP listen address (SO_REUSEPORT).
    pub udp_sockets: u64,
    pub tcp_listeners: u64,
    /// `[server] udp_buffer_bytes`: what herald asks for with SO_RCVBUFFORCE/SO_SNDBUFFORCE.
    pub udp_buffer_bytes: u64,
    pub max_tcp_connections: u64,
    pub message_bytes: u64,
    /// Socket memory one datagram of `message_bytes` takes in a receive queue here.
    pub truesize: u64,
    pub truesize_source: String,
    pub target_wait_ms: f64,
}

/// The service time and, when the source knows it, the message rate.
pub struct Measured {
    pub service_us: f64,
    pub messages_per_s: Option<f64>,
    pub source: String,
}

impl Workload {
    pub fn new(
        config: &Config,
        measured: Measured,
        rate_calls: Option<f64>,
        message_bytes: u64,
        target_wait_ms: f64,
    ) -> Workload {
        let workers = config.server.effective_workers();
        let udp_listens = config.listen.iter().filter(|l| l.transports.contains(&ListenTransport::Udp)).count() as u64;
        let tcp_listens = config
            .listen
            .iter()
            .map(|l| l.transports.iter().filter(|t| **t != ListenTransport::Udp).count() as u64)
            .sum::<u64>();
        let (messages_per_s, rate_source) = match (rate_calls, measured.messages_per_s) {
            (Some(calls), _) => {
                (calls * MESSAGES_PER_CALL, format!("--rate {calls} calls/s × {MESSAGES_PER_CALL} messages per call"))
            }
            (None, Some(m)) if m > 0.0 => (m, format!("measured ({})", measured.source)),
            _ => {
                let full = workers as f64 * 1e6 / measured.service_us.max(0.001);
                (full, format!("none given: herald's capacity, {workers} workers × 1/S"))
            }
        };
        let (truesize, truesize_source) = match probe_truesize(message_bytes as usize) {
            Ok(t) => (t, format!("measured: {message_bytes}-byte datagrams queued on a loopback socket")),
            Err(e) => {
                // The allocation a datagram gets: payload plus headers in a power-of-two buffer,
                // plus struct sk_buff (~256 bytes) — the kernel's SKB_TRUESIZE.
                let t = (message_bytes + 320).next_power_of_two() + 256;
                (t, format!("estimated ({e})"))
            }
        };
        Workload {
            service_us: measured.service_us,
            messages_per_s,
            source: measured.source,
            rate_source,
            workers,
            udp_sockets: workers as u64 * udp_listens,
            tcp_listeners: workers as u64 * tcp_listens,
            udp_buffer_bytes: config.server.udp_buffer_bytes as u64,
            max_tcp_connections: config.limits.max_tcp_connections as u64,
            message_bytes,
            truesize,
            truesize_source,
            target_wait_ms,
        }
    }
}

/// Service time and message rate of a running herald: two scrapes of its metrics `window` apart
/// (`herald_service_seconds` sum/count, `herald_messages_received_total`). With its `pid`, the
/// service time is its CPU time per message over the window instead: the metric times herald's
/// own handling, while the seed's service time X = K_sockq + K_copy + T_sip + K_snd (seed 003
/// eq. 5.1) includes the kernel's receive and send work that herald's threads pay for. An idle
/// herald gives its mean since start and no rate.
pub fn from_metrics(url: &str, window: Duration, pid: Option<i32>) -> Result<Measured, String> {
    let before = scrape::fetch(url)?;
    let cpu_before = pid.and_then(cpu_ns);
    let t0 = Instant::now();
    std::thread::sleep(window);
    let after = scrape::fetch(url)?;
    let cpu_after = pid.and_then(cpu_ns);
    let secs = t0.elapsed().as_secs_f64();
    let (n, mean) = mean_service(&scrape::window(&before, &after));
    if n > 0 {
        let cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a) as f64 / 1e3 / n as f64);
        return Ok(with_cpu(mean, cpu, Some(n as f64 / secs), format!("{url}: {n} messages in {secs:.1} s"), pid));
    }
    let (n, mean) = mean_service(&scrape::window(&scrape::Scrape::default(), &after));
    if n == 0 {
        return Err(format!("{url}: herald has timed no message yet (its [metrics] listen must be set and it must have handled traffic)"));
    }
    Ok(Measured {
        service_us: mean,
        messages_per_s: None,
        source: format!("{url}: herald_service_seconds over {n} messages since start, idle now"),
    })
}

/// The service time to size for: CPU per message when known, else the metric's mean.
pub fn with_cpu(metric_us: f64, cpu_us: Option<f64>, rate: Option<f64>, what: String, pid: Option<i32>) -> Measured {
    match (cpu_us, pid) {
        (Some(cpu), Some(pid)) if cpu > 0.0 => Measured {
            service_us: cpu,
            messages_per_s: rate,
            source: format!(
                "{what}: CPU time of pid {pid}'s threads per message, kernel work included (herald_service_seconds alone: {metric_us:.2} µs)"
            ),
        },
        _ => Measured {
            service_us: metric_us,
            messages_per_s: rate,
            source: format!("{what}: herald_service_seconds, herald's own handling without the kernel's receive and send"),
        },
    }
}

/// CPU time of all threads of `pid`, ns: the first field of /proc/PID/task/*/schedstat (time on
/// the CPU, exact, unlike the tick-sampled utime/stime).
pub fn cpu_ns(pid: i32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for e in dir.flatten() {
        let text = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        total += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(total)
}

/// (messages, mean service time µs) over all message types.
pub fn mean_service(m: &herald_bench::results::ServerMetrics) -> (u64, f64) {
    let n: u64 = m.messages.values().map(|t| t.count).sum();
    let total: f64 = m.messages.values().map(|t| t.count as f64 * t.service.mean_us).sum();
    (n, if n > 0 { total / n as f64 } else { 0.0 })
}

/// Socket memory per queued datagram: sends `N` datagrams of `size` bytes to a loopback socket
/// that does not read them and divides its receive queue (/proc/net/udp `rx_queue`, the
/// socket's sk_rmem_alloc) by N.
pub fn probe_truesize(size: usize) -> Result<u64, String> {
    const N: u64 = 16;
    let size = size.clamp(1, 65_507);
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let port = rx.local_addr().map_err(|e| e.to_string())?.port();
    let payload = vec![b'x'; size];
    for _ in 0..N {
        tx.send_to(&payload, ("127.0.0.1", port)).map_err(|e| format!("send: {e}"))?;
    }
    let key = format!("0100007F:{port:04X}");
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let table = std::fs::read_to_string("/proc/net/udp").map_err(|e| format!("/proc/net/udp: {e}"))?;
        let queued = table.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&key.as_str()))
                .then(|| f.get(4).and_then(|q| q.split_once(':')).and_then(|(_, r)| u64::from_str_radix(r, 16).ok()))?
        });
        match queued {
            Some(bytes) if bytes > 0 && bytes % N == 0 => return Ok(bytes / N),
            _ if Instant::now() > deadline => return Err("the probe datagrams did not show in /proc/net/udp".into()),
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}
