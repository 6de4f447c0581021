//! `herald bench register`: registration load (see `herald_bench::agent::run_register`).

use super::common::{finish, usage_error, Shared};
use herald_bench::agent::{run_register, RegisterOptions};
use herald_bench::arrivals::Arrivals;
use herald_bench::results::ResultsFile;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The registrar, HOST:PORT.
    #[arg(long)]
    registrar: String,
    /// REGISTER requests per second (each refreshes the next user, round-robin).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// poisson, uniform or file:PATH.
    #[arg(long, default_value = "uniform")]
    arrivals: String,
    /// Expires of each registration, seconds.
    #[arg(long, default_value_t = 3600)]
    expires: u64,
    #[command(flatten)]
    shared: Box<Shared>,
}

pub fn run(args: Args) -> ExitCode {
    let options = (|| {
        Ok::<_, String>(RegisterOptions {
            common: args.shared.options(&args.registrar, 100)?,
            arrivals: Arrivals::parse(&args.arrivals, args.rate)?,
            expires: Duration::from_secs(args.expires),
        })
    })();
    match options {
        Ok(o) => finish("register", &args.shared, |stop| run_register(&o, stop), ResultsFile::Register),
        Err(e) => usage_error("register", &e),
    }
}
