//! `herald bench users`

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("herald bench users: not built yet");
    ExitCode::from(2)
}
