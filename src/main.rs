//! The `herald` command.

#![forbid(unsafe_code)]

mod bench;
mod ctl;
mod inspect;
mod route;
mod serve;
mod tune;
mod users;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: every message herald handles allocates, and glibc's
/// allocator was an eighth of the proxy's instructions per call (callgrind, issue 21). Called
/// through herald-sys, which skips mimalloc's aligned entry points where they buy nothing.
#[global_allocator]
static ALLOCATOR: herald_sys::Mimalloc = herald_sys::Mimalloc;

#[derive(Parser)]
#[command(name = "herald", version, about = "SIP proxy-registrar and SIP capacity-evaluation toolkit")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse one SIP message and print its structure, or the precise error.
    ///
    /// Exit status: 0 well-formed, 1 malformed, 2 usage or I/O error.
    Inspect(inspect::Args),
    /// Run the SIP proxy-registrar (UDP and TCP; embedded default config without --config).
    ///
    /// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 on a runtime failure, 2 for a
    /// configuration error (printed as FILE:LINE: key 'a.b': message).
    Serve(serve::Args),
    /// Measure a SIP server (herald, Kamailio, any): load, capacity, models, reports.
    #[command(subcommand)]
    Bench(bench::Command),
    /// Manage the users of digest authentication (the `[auth] users_file`; no password is
    /// stored, only HA1 hashes). `herald serve` reloads the file when it changes.
    ///
    /// Exit status: 0 done, 1 failure, 2 usage or configuration error.
    #[command(subcommand)]
    Users(users::Command),
    /// Talk to a running herald's admin API (`[admin]`): registrations, stats, bans, gateways,
    /// reload, users. Human-readable output, or `--json`.
    ///
    /// Exit status: 0 done, 1 refused by herald (error printed), 2 usage or configuration
    /// error, 3 herald not reached or the token refused.
    Ctl(ctl::Args),
    /// Ask the routing table (`[[route]]`): `herald route check 'INVITE sip:+441234@example.com'`
    /// prints the rule a request matches and where it would go, without sending anything.
    #[command(subcommand)]
    Route(route::Command),
    /// Operating-system settings for herald (seed 003 ch. 6-7 on today's kernels): each with its
    /// current value, the recommended one computed from this machine and herald's measured
    /// service time, and why; `--apply` writes them (root), `--revert` restores them.
    Tune(tune::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors, as documented.
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(command) => bench::run(command),
        Command::Users(command) => users::run(command),
        Command::Ctl(args) => ctl::run(args),
        Command::Route(command) => route::run(command),
        Command::Tune(args) => tune::run(args),
    }
}
