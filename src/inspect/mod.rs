//! `herald inspect`: parse one message and print its structure, its typed header values and the
//! verdict a server would reach, or the precise error. How the parser is checked against
//! third-party corpora, and a tool for people fighting interop problems.

mod describe;
mod verdict;

use bytes::Bytes;
use herald_sip::{Framing, Limits, Message};
use serde_json::{json, Value};
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The message file, or '-' for standard input.
    #[arg(default_value = "-")]
    file: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// How the bytes arrived: 'udp' (a datagram: Content-Length optional, trailing octets
    /// ignored) or 'tcp' (a stream: Content-Length mandatory).
    #[arg(long, default_value = "udp", value_parser = ["udp", "tcp"])]
    transport: String,
}

pub fn run(args: Args) -> ExitCode {
    let bytes = match read_input(&args.file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("herald inspect: {}: {e}", args.file);
            return ExitCode::from(2);
        }
    };
    let transport = if args.transport == "tcp" { Framing::Stream } else { Framing::Datagram };
    let report = inspect_bytes(Bytes::from(bytes), transport);
    let ok = report["well_formed"] == Value::Bool(true);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", describe::render_text(&report));
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn read_input(file: &str) -> std::io::Result<Vec<u8>> {
    // A SIP message is at most 64 KiB; read a little more so that an oversized input is reported
    // as such by the parser rather than silently truncated, but never read without bound.
    const CAP: u64 = 1 << 20;
    let mut buf = Vec::new();
    if file == "-" {
        std::io::stdin().take(CAP).read_to_end(&mut buf)?;
    } else {
        std::fs::File::open(file)?.take(CAP).read_to_end(&mut buf)?;
    }
    Ok(buf)
}

/// Builds the whole report as JSON; the text form is rendered from it.
pub fn inspect_bytes(bytes: Bytes, transport: Framing) -> Value {
    let limits = Limits::default();
    let size = bytes.len();
    let msg = match Message::parse_as(bytes, &limits, transport) {
        Ok(m) => m,
        Err(e) => return verdict::error_report(size, None, &e),
    };
    let mut report = describe::message(&msg);
    report["input_bytes"] = json!(size);
    match msg.validate_all() {
        Ok(()) => {
            report["well_formed"] = json!(true);
            report["notes"] = json!(verdict::notes(&msg));
        }
        Err(e) => {
            let err = verdict::error_report(size, Some(&msg), &e);
            report["well_formed"] = json!(false);
            report["error"] = err["error"].clone();
            report["server_action"] = err["server_action"].clone();
        }
    }
    report
}
