//! `herald bench capacity`

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("herald bench capacity: not built yet");
    ExitCode::from(2)
}
