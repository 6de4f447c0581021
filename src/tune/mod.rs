//! `herald tune`: seed 003's operating-system advice for SIP servers (ch. 6-7: scheduler
//! settings; ch. 5: the socket queue as the K of M/G/c/K) brought to today's kernels, computed
//! from this machine and herald's measured service time. Reads the machine (machine.rs) and the
//! workload (workload.rs, measure.rs), derives each setting (sched.rs, net.rs, process.rs,
//! cpu.rs, with the arithmetic in recommend.rs), prints it (report.rs), and with `--apply` /
//! `--revert` writes it and puts it back (apply.rs).

mod apply;
mod cpu;
mod inputs;
mod machine;
mod measure;
mod net;
mod process;
mod recommend;
mod report;
mod sched;
mod setting;
mod workload;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(after_help = "\
Where the service time S comes from, first that applies: --service-us; --metrics (a running \
herald's endpoint, two scrapes --window-s apart: herald_service_seconds, or with --pid the CPU \
time of its threads per message, kernel work included); else a built-in run (this herald serve \
under `herald bench calls` at --measure-rate for --measure-s on loopback, CPU per message).

Exit status: 0 done (settings that cannot be written are reported, not fatal), 1 --revert could \
not restore everything (the state file is kept), 2 usage, configuration or measurement error.")]
pub struct Args {
    /// herald's configuration (workers, UDP buffer, listeners, max_tcp_connections); default: the built-in one
    #[arg(long)]
    config: Option<PathBuf>,
    /// A running herald's metrics URL (http://IP:PORT/metrics): its service time and message rate
    #[arg(long)]
    metrics: Option<String>,
    /// Seconds between the two scrapes of --metrics
    #[arg(long, default_value_t = 2.0)]
    window_s: f64,
    /// herald's mean service time per message, µs (skips the measurement)
    #[arg(long)]
    service_us: Option<f64>,
    /// Call rate of the built-in measurement, calls/s
    #[arg(long, default_value_t = 300.0)]
    measure_rate: f64,
    /// Length of the built-in measurement, s
    #[arg(long, default_value_t = 3)]
    measure_s: u64,
    /// Expected peak call rate, calls/s (6 messages each); default: the rate --metrics saw, else herald's capacity
    #[arg(long)]
    rate: Option<f64>,
    /// Size of a SIP datagram to budget socket memory for, bytes (RFC 3261 §18.1.1: larger ones go over TCP)
    #[arg(long, default_value_t = 1300)]
    message_bytes: u64,
    /// Longest a message should wait in a socket queue, ms (a tenth of RFC 3261's T1)
    #[arg(long, default_value_t = 50.0)]
    target_wait_ms: f64,
    /// A running herald's process id: read and set its threads' slices and its RLIMIT_NOFILE
    #[arg(long)]
    pid: Option<i32>,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
    /// Write the recommended values (as root), recording the old ones in --state
    #[arg(long, conflicts_with = "revert")]
    apply: bool,
    /// Restore the values recorded in --state by --apply
    #[arg(long)]
    revert: bool,
    /// Where --apply records the old values and --revert reads them
    #[arg(long, default_value = apply::DEFAULT_STATE)]
    state: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    if args.revert {
        return match apply::revert(&args.state) {
            Ok(o) => {
                o.lines.iter().for_each(|l| println!("{l}"));
                println!("restored {}, not restored {}", o.done, o.failed);
                ExitCode::from(if o.failed == 0 { 0 } else { 1 })
            }
            Err(e) => {
                eprintln!("herald tune --revert: {e}");
                ExitCode::from(2)
            }
        };
    }
    let config = match herald_server::Config::load_or_default(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let measured = match (args.service_us, &args.metrics) {
        (Some(us), _) if us > 0.0 => {
            Ok(workload::Measured { service_us: us, messages_per_s: None, source: "--service-us".into() })
        }
        (Some(_), _) => Err("--service-us must be above 0".to_string()),
        (None, Some(url)) => workload::from_metrics(url, Duration::from_secs_f64(args.window_s.max(0.1)), args.pid),
        (None, None) => measure::measure(config.server.effective_workers(), args.measure_rate, args.measure_s.max(1)),
    };
    let measured = match measured {
        Ok(m) => m,
        Err(e) => {
            eprintln!("herald tune: service time: {e}");
            return ExitCode::from(2);
        }
    };
    let work = workload::Workload::new(&config, measured, args.rate, args.message_bytes, args.target_wait_ms);
    let inputs =
        inputs::Inputs { machine: machine::Machine::read(), work, pid: args.pid, batch: herald_sys::BATCH as u64 };
    let mut settings = sched::settings(&inputs);
    settings.extend(net::settings(&inputs));
    settings.extend(process::settings(&inputs));
    settings.extend(cpu::settings(&inputs));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report::json(&inputs, &settings)).unwrap_or_default());
    } else {
        print!("{}", report::text(&inputs, &settings));
    }
    if args.apply {
        match apply::apply(&settings, &inputs.machine, &args.state) {
            Ok(o) => {
                let out = &mut std::io::stderr();
                use std::io::Write;
                for l in &o.lines {
                    let _ = writeln!(out, "{l}");
                }
                let _ = writeln!(
                    out,
                    "applied {}, could not apply {}; old values in {state} (herald tune --revert --state {state})",
                    o.done,
                    o.failed,
                    state = args.state.display()
                );
            }
            Err(e) => {
                eprintln!("herald tune --apply: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}
