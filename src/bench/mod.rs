//! `herald bench`: load generation, capacity search, queueing models and reports.
//!
//! Each subcommand lives in its own file with its clap `Args` and a `run` that returns the exit
//! status: 0 success, 1 the run finished but failed its criterion, 2 usage or I/O error.

mod calls;
mod capacity;
mod common;
mod floor;
mod model;
mod register;
mod report;
mod users;

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum Command {
    /// Open-loop call load: callee agents REGISTER users, callers place INVITE→180→200→ACK→BYE.
    Calls(calls::Args),
    /// Registration load: refreshing REGISTERs at a fixed rate.
    Register(register::Args),
    /// SPEC SIP Infrastructure user workload (seed 002): registrations and calls per user.
    Users(users::Args),
    /// Highest call rate whose failed-call ratio stays under --max-failure (steps, then bisects).
    Capacity(capacity::Args),
    /// M/G/1 waiting time and M/M/c/K drop models fitted to measured service times (seed 003).
    Model(model::Args),
    /// One self-contained HTML page with SVG plots from one or more results files.
    Report(report::Args),
    /// The kernel's CPU per datagram on loopback here, and the floor it puts under any server's
    /// and any generator's CPU per call.
    Floor(floor::Args),
}

pub fn run(command: Command) -> ExitCode {
    // The generator holds every call in flight and grows its heap as herald does: huge pages
    // off for the same reason (herald_sys::set_thp_disabled). Best effort: a kernel without
    // the flag still runs the load.
    let _ = herald_sys::set_thp_disabled(true);
    match command {
        Command::Calls(args) => calls::run(args),
        Command::Register(args) => register::run(args),
        Command::Users(args) => users::run(args),
        Command::Capacity(args) => capacity::run(args),
        Command::Model(args) => model::run(args),
        Command::Report(args) => report::run(args),
        Command::Floor(args) => floor::run(args),
    }
}
