//! `herald bench calls`: open-loop call load (see `herald_bench::agent::run_calls`).

use super::common::{finish, usage_error, Shared};
use herald_bench::agent::{run_calls, CallsOptions};
use herald_bench::arrivals::Arrivals;
use herald_bench::results::ResultsFile;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The proxy, HOST:PORT.
    #[arg(long)]
    proxy: String,
    /// Calls per second.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// poisson, uniform or file:PATH (one inter-arrival time per line).
    #[arg(long, default_value = "poisson")]
    arrivals: String,
    /// Ring time before the callee answers, ms.
    #[arg(long, default_value_t = 0)]
    ring: u64,
    /// Hold time before the caller hangs up, ms.
    #[arg(long, default_value_t = 0)]
    hold: u64,
    #[command(flatten)]
    shared: Box<Shared>,
}

pub fn run(args: Args) -> ExitCode {
    let options = (|| {
        Ok::<_, String>(CallsOptions {
            common: args.shared.options(&args.proxy, 100)?,
            arrivals: Arrivals::parse(&args.arrivals, args.rate)?,
            ring: Duration::from_millis(args.ring),
            hold: Duration::from_millis(args.hold),
        })
    })();
    match options {
        Ok(o) => finish("calls", &args.shared, |stop| run_calls(&o, stop), ResultsFile::Calls),
        Err(e) => usage_error("calls", &e),
    }
}
