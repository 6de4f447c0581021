//! `herald bench capacity`: the highest call rate whose failed-call ratio stays under
//! `--max-failure` over a full `--duration` window (see `herald_bench::capacity::search`).

use super::common::{summary, usage_error, CallShape, Shared};
use herald_bench::agent::{run_calls, StopFlag};
use herald_bench::capacity::{judge_step, search, was_interrupted, SearchOptions};
use herald_bench::results::ResultsFile;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The proxy, HOST:PORT.
    #[arg(long)]
    proxy: String,
    #[command(flatten)]
    shape: CallShape,
    /// First offered rate, calls per second.
    #[arg(long, default_value_t = 100.0)]
    start_rate: f64,
    /// Highest rate ever offered.
    #[arg(long, default_value_t = 100_000.0)]
    max_rate: f64,
    /// Each step up multiplies the rate by this before the search bisects.
    #[arg(long, default_value_t = 2.0)]
    step_factor: f64,
    /// Stop bisecting when the bracket is narrower than this fraction of its lower end.
    #[arg(long, default_value_t = 0.05)]
    precision: f64,
    /// Most steps in total.
    #[arg(long, default_value_t = 20)]
    max_steps: usize,
    /// Seconds of rest between steps, so that the server's transactions of one step (held
    /// 32 s after they end, RFC 3261 Timer J/K) do not load the next.
    #[arg(long, default_value_t = 2.0)]
    pause: f64,
    #[command(flatten)]
    shared: Box<Shared>,
}

pub fn run(args: Args) -> ExitCode {
    let opts = SearchOptions {
        start_rate: args.start_rate,
        max_rate: args.max_rate,
        step_factor: args.step_factor,
        precision: args.precision,
        max_failure: args.shared.max_failure,
        max_steps: args.max_steps,
    };
    if let Err(e) = opts.check() {
        return usage_error("capacity", &e);
    }
    let common = match args.shared.options(&args.proxy, 100) {
        Ok(c) => c,
        Err(e) => return usage_error("capacity", &e),
    };
    // Check the arrival process once, before the first step.
    if let Err(e) = args.shape.options(common.clone(), args.start_rate) {
        return usage_error("capacity", &e);
    }
    let stop = StopFlag::stop_on_sigint();
    let pause = Duration::from_secs_f64(args.pause.clamp(0.0, 600.0));
    let mut step = 0;
    let result = search(&opts, &args.shared.label, &args.proxy, |rate| {
        if step > 0 && !stop.is_stopped() {
            std::thread::sleep(pause);
        }
        step += 1;
        let calls = args.shape.options(common.clone(), rate)?;
        eprintln!("herald bench capacity: step {step}: offering {rate:.1} calls/s for {:.0} s", args.shared.duration);
        let r = run_calls(&calls, &stop)?;
        let verdict = match judge_step(&opts, &r) {
            Ok(()) => "pass".to_string(),
            Err(why) => format!("fail: {why}"),
        };
        eprint!("{}", summary("capacity step", &r));
        eprintln!("  -> {verdict}");
        Ok(r)
    });
    let result = match result {
        Ok(r) => r,
        Err(e) => return usage_error("capacity", &e),
    };
    println!(
        "herald bench capacity: {} capacity {:.1} calls/s (highest rate with failed ratio <= {}), {} steps{}",
        args.proxy,
        result.capacity_rate,
        opts.max_failure,
        result.steps.len(),
        if was_interrupted(&result) { ", interrupted" } else { "" }
    );
    for (i, s) in result.steps.iter().enumerate() {
        println!(
            "  step {:>2}: offered {:>9.1}/s achieved {:>9.1}/s attempted {:>8} failed {:>6} ({:.4}%) SRD p99 {:.2} ms",
            i + 1,
            s.offered_rate,
            s.achieved_rate,
            s.attempted,
            s.failed,
            s.failure_ratio() * 100.0,
            s.srd.p99_us as f64 / 1000.0
        );
    }
    let found = result.capacity_rate > 0.0;
    if let Some(path) = &args.shared.json {
        if let Err(e) = ResultsFile::Capacity(result).write(path) {
            return usage_error("capacity", &e);
        }
    }
    if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
