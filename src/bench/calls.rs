//! `herald bench calls`: open-loop call load (see `herald_bench::agent::run_calls`).

use super::common::{finish, usage_error, CallShape, Shared};
use herald_bench::agent::run_calls;
use herald_bench::results::ResultsFile;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The proxy, HOST:PORT.
    #[arg(long)]
    proxy: String,
    /// Calls per second.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    #[command(flatten)]
    shape: CallShape,
    #[command(flatten)]
    shared: Box<Shared>,
}

pub fn run(args: Args) -> ExitCode {
    let options = args.shared.options(&args.proxy, 100).and_then(|common| args.shape.options(common, args.rate));
    match options {
        Ok(o) => finish("calls", &args.shared, |stop| run_calls(&o, stop), ResultsFile::Calls),
        Err(e) => usage_error("calls", &e),
    }
}
