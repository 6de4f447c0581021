//! `herald bench users`: the SPEC SIP user workload (see `herald_bench::agent::run_users`).

use super::common::{finish, usage_error, Shared};
use herald_bench::agent::{run_users, UsersOptions};
use herald_bench::results::ResultsFile;
use herald_bench::workload::{check_time_scale, UserModel};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The proxy-registrar, HOST:PORT.
    #[arg(long)]
    proxy: String,
    /// Divides every duration of the user model (60: an hour of behaviour per minute).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    #[command(flatten)]
    shared: Box<Shared>,
}

pub fn run(args: Args) -> ExitCode {
    let options = (|| {
        Ok::<_, String>(UsersOptions {
            common: args.shared.options(&args.proxy, 100)?,
            model: UserModel::spec(check_time_scale(args.time_scale)?),
        })
    })();
    match options {
        Ok(o) => finish("users", &args.shared, |stop| run_users(&o, stop), ResultsFile::Users),
        Err(e) => usage_error("users", &e),
    }
}
