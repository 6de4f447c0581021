//! Options shared by the load-generating subcommands (`calls`, `register`, `users`, `capacity`),
//! transport and TLS included, turning them into [`CommonOptions`], and the end of every run:
//! summary on stdout, `--json`, exit status (0 within `--max-failure`, 1 over it, 2 usage or I/O
//! error).

use herald_bench::agent::{
    domain_of, load_users, CallsOptions, CommonOptions, RunResult, StopFlag, TlsOptions, TransportKind,
};
use herald_bench::arrivals::Arrivals;
use herald_bench::results::{Latency, ResultsFile};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Shared {
    /// udp, tcp, tls (TLS over TCP, RFC 3261 §26.2; see the --tls-* options), ws or wss (SIP
    /// over WebSocket, RFC 7118; wss takes the --tls-* options as tls does).
    #[arg(long, default_value = "udp")]
    pub transport: String,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Length of the measurement window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Number of users (default: all users of --credentials, else 100 named user0..).
    #[arg(long)]
    pub users: Option<usize>,
    /// File of `USER PASSWORD` lines: the users, with digest authentication.
    #[arg(long)]
    pub credentials: Option<String>,
    /// Domain of the users' addresses (default: the target's host).
    #[arg(long)]
    pub domain: Option<String>,
    /// Address the generator binds to.
    #[arg(long, default_value = "127.0.0.1")]
    pub local_ip: IpAddr,
    /// Server process to measure (CPU per 1,000 calls, peak RSS); repeatable.
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// herald's Prometheus metrics URL, scraped before and after the window.
    #[arg(long)]
    pub metrics: Option<String>,
    /// Label of the system under test in the results.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Highest failed ratio that still exits 0.
    #[arg(long, default_value_t = 0.0001)]
    pub max_failure: f64,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Random seed, for repeatable arrival gaps and user behaviour.
    #[arg(long)]
    pub seed: Option<u64>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Event-loop quantum, µs: after handling input the generator sleeps this long before it
    /// looks at its sockets again (timers still fire on time), handling what arrived meanwhile
    /// in one batch, like SIPp's -timer_resol (whose default is also 10 ms). Our callee answers
    /// up to one quantum later; the latencies measured leave that out (receive times are kernel
    /// stamps, sends are stamped as they go out, our callee's hold of an answer is subtracted).
    /// 0: wake per datagram.
    #[arg(long, default_value_t = herald_bench::agent::DEFAULT_QUANTUM_US)]
    pub quantum_us: u64,
    /// UDP port the callee agent binds (default: any free port), so that a proxy can route to it
    /// as a fixed next hop (a gateway set's destination) instead of a registered contact.
    /// UDP only.
    #[arg(long)]
    pub callee_port: Option<u16>,
    /// Callers and callees share one UDP socket: the whole load reaches the proxy from one
    /// address and port (one 4-tuple), as from an SBC or a trunk. UDP only.
    #[arg(long)]
    pub single_socket: bool,
    /// With --single-socket (`calls` only): event loops, each on its own thread, that drive the
    /// one socket together (one more thread reads it and hands each message to its loop), so
    /// that one 4-tuple carries more than one core's load.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// How `--transport tls` connects.
#[derive(clap::Args, Debug, Clone)]
pub struct TlsArgs {
    /// PEM file of the CA certificates that must have signed the server's certificate (required
    /// with --transport tls unless --tls-insecure-skip-verify).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Name the server's certificate must carry (default: the host of --proxy/--registrar; an IP
    /// address must be in the certificate as an IP subjectAltName).
    #[arg(long, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// PEM client certificate chain, for servers that ask for one (with --tls-key).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Accept any server certificate: encrypted but unauthenticated (test labs only).
    #[arg(long)]
    pub tls_insecure_skip_verify: bool,
}

impl TlsArgs {
    fn any(&self) -> bool {
        self.tls_ca.is_some()
            || self.tls_server_name.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.tls_insecure_skip_verify
    }

    /// The TLS options for a target typed as `host` (checked and loaded once here, so that a
    /// bad file is a usage error before any load starts).
    fn options(&self, host: &str, addr: SocketAddr) -> Result<TlsOptions, String> {
        let tls = TlsOptions {
            ca: self.tls_ca.clone(),
            server_name: Some(self.tls_server_name.clone().unwrap_or_else(|| host.to_string())),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            insecure_skip_verify: self.tls_insecure_skip_verify,
        };
        tls.client(addr.ip())?;
        if tls.insecure_skip_verify {
            eprintln!(
                "herald bench: warning: --tls-insecure-skip-verify: the server's certificate is NOT verified; \
                 anyone on the path can impersonate it"
            );
        }
        Ok(tls)
    }
}

/// What each call looks like: the options `calls` and `capacity` share.
#[derive(clap::Args, Debug, Clone)]
pub struct CallShape {
    /// poisson, uniform or file:PATH (one inter-arrival time per line; `capacity` replays a
    /// trace as recorded at every step).
    #[arg(long, default_value = "poisson")]
    pub arrivals: String,
    /// Ring time before the callee answers, ms.
    #[arg(long, default_value_t = 0)]
    pub ring: u64,
    /// Hold time before the caller hangs up, ms.
    #[arg(long, default_value_t = 0)]
    pub hold: u64,
}

impl CallShape {
    /// The options of one run of calls offered at `rate` per second.
    pub fn options(&self, common: CommonOptions, rate: f64) -> Result<CallsOptions, String> {
        Ok(CallsOptions {
            common,
            arrivals: Arrivals::parse(&self.arrivals, rate)?,
            ring: Duration::from_millis(self.ring),
            hold: Duration::from_millis(self.hold),
        })
    }
}

/// Resolves HOST:PORT (one address, the first).
pub fn resolve(target: &str) -> Result<SocketAddr, String> {
    target
        .to_socket_addrs()
        .map_err(|e| format!("{target}: {e}"))?
        .next()
        .ok_or_else(|| format!("{target}: no address"))
}

impl Shared {
    pub fn options(&self, target: &str, default_users: usize) -> Result<CommonOptions, String> {
        let addr = resolve(target)?;
        if !(self.duration.is_finite() && self.duration > 0.0 && self.duration < 1e7) {
            return Err(format!("--duration must be a positive number of seconds, not {}", self.duration));
        }
        if !(0.0..=1.0).contains(&self.max_failure) {
            return Err("--max-failure must be between 0 and 1".into());
        }
        let users = load_users(self.credentials.as_deref(), self.users, default_users)?;
        let mut o = CommonOptions::new(addr, users, Duration::from_secs_f64(self.duration));
        o.transport = TransportKind::parse(&self.transport)?;
        o.local_ip = self.local_ip;
        // The host as typed (a name stays a name), else the address.
        let host = target.rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_else(|| domain_of(addr));
        match o.transport {
            t if t.uses_tls() => o.tls = self.tls.options(&host, addr)?,
            _ if self.tls.any() => return Err("the --tls-* options need --transport tls or wss".into()),
            _ => {}
        }
        o.domain = self.domain.clone().unwrap_or(host);
        o.server_pids = self.server_pids.clone();
        o.metrics_url = self.metrics.clone();
        o.label = self.label.clone();
        o.progress = !self.quiet;
        o.seed = self.seed;
        o.quantum_us = self.quantum_us;
        if self.callee_port.is_some() && o.transport != TransportKind::Udp {
            return Err("--callee-port needs --transport udp".into());
        }
        o.callee_port = self.callee_port;
        if self.single_socket && (o.transport != TransportKind::Udp || self.callee_port.is_some()) {
            return Err("--single-socket needs --transport udp and no --callee-port".into());
        }
        o.single_socket = self.single_socket;
        if self.threads != 1
            && (!self.single_socket || !(2..=herald_bench::agent::threads::MAX_THREADS).contains(&self.threads))
        {
            return Err(format!(
                "--threads needs --single-socket and 2 to {} threads",
                herald_bench::agent::threads::MAX_THREADS
            ));
        }
        o.threads = self.threads;
        Ok(o)
    }
}

/// Reports a usage or I/O error and returns status 2.
pub fn usage_error(command: &str, message: &str) -> ExitCode {
    eprintln!("herald bench {command}: {message}");
    ExitCode::from(2)
}

/// Runs `run` with Ctrl-C stopping it, then prints, writes and judges the result.
pub fn finish(
    command: &str,
    shared: &Shared,
    run: impl FnOnce(&StopFlag) -> Result<RunResult, String>,
    wrap: fn(RunResult) -> ResultsFile,
) -> ExitCode {
    let stop = StopFlag::stop_on_sigint();
    let result = match run(&stop) {
        Ok(r) => r,
        Err(e) => return usage_error(command, &e),
    };
    print!("{}", summary(command, &result));
    let ratio = result.failure_ratio();
    let users_failed = result.users.as_ref().is_some_and(|u| {
        u.transactions > 0 && u.transactions_failed as f64 / u.transactions as f64 > shared.max_failure
    });
    if let Some(path) = &shared.json {
        if let Err(e) = wrap(result).write(path) {
            return usage_error(command, &e);
        }
    }
    if ratio > shared.max_failure || users_failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn latency_line(name: &str, l: &Latency) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "  {name:<14} n={:<8} p50 {:.3} ms  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}\n",
        l.count,
        ms(l.p50_us),
        ms(l.p90_us),
        ms(l.p99_us),
        ms(l.p999_us),
        ms(l.max_us)
    )
}

/// The human-readable summary.
pub fn summary(command: &str, r: &RunResult) -> String {
    let mut s = format!(
        "herald bench {command}: {} {} over {}{}\n",
        r.target,
        r.transport,
        r.arrivals,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    s += &format!(
        "  window {:.3} s  offered {:.2}/s  achieved {:.2}/s\n  attempted {}  succeeded {}  failed {} ({:.4}%)\n",
        r.duration_s,
        r.offered_rate,
        r.achieved_rate,
        r.attempted,
        r.succeeded,
        r.failed,
        r.failure_ratio() * 100.0
    );
    for (reason, n) in &r.failures {
        s += &format!("    {reason}: {n}\n");
    }
    s += &format!("  retransmissions {}\n", r.retransmissions);
    if r.srd.count > 0 {
        s += &latency_line("SRD", &r.srd);
    }
    if r.sdd.count > 0 {
        s += &latency_line("SDD", &r.sdd);
    }
    for (method, l) in &r.response_time {
        s += &latency_line(method, l);
    }
    s += &format!(
        "  generator CPU {:.3} s ({:.1} µs per attempt), peak RSS {} KiB\n",
        r.generator.cpu_s, r.generator.cpu_us_per_call, r.generator.peak_rss_kib
    );
    for srv in &r.servers {
        s += &format!(
            "  server {} ({}): CPU {:.3} s ({:.3} s per 1,000), peak RSS {} KiB\n",
            srv.pid, srv.name, srv.cpu_s, srv.cpu_s_per_1000_calls, srv.peak_rss_kib
        );
    }
    s += &format!(
        "  UDP RcvbufErrors {} -> {}  InErrors {} -> {}\n",
        r.udp_before.rcvbuf_errors, r.udp_after.rcvbuf_errors, r.udp_before.in_errors, r.udp_after.in_errors
    );
    if r.unregister_failed > 0 {
        s += &format!(
            "  unregistering at the end failed for {} users ({}): the registrar keeps their bindings until they expire\n",
            r.unregister_failed,
            r.unregister_error.as_deref().unwrap_or("unknown")
        );
    }
    if let Some(u) = &r.users {
        s += &format!(
            "  users {}  transactions {}  failed {}  99.99% criterion {}\n",
            u.users,
            u.transactions,
            u.transactions_failed,
            if u.meets_criterion { "met" } else { "NOT met" }
        );
        for (outcome, n) in &u.calls_by_outcome {
            s += &format!("    {outcome}: {n}\n");
        }
    }
    s
}
