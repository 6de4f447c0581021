//! `herald bench floor`: the kernel's CPU cost per datagram on this machine, and the floor it
//! puts under any SIP server's and any load generator's CPU per call.

use herald_bench::floor::{measure, render, Options};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Datagram payload, bytes (the messages of a call average 500 to 700).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u16).range(1..=1400))]
    size: u16,
    /// Samples per measurement (each sample of the sleeping-reader measurement takes 1 ms).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    count: u32,
    /// Also write the costs and floors as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    let floor = match measure(Options { size: usize::from(args.size), count: args.count as usize }) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("herald bench floor: loopback sockets: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", render(&floor));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&floor).expect("plain numbers serialise");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("herald bench floor: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
