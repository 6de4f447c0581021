//! `herald bench report`: reads results files, writes one self-contained HTML page.

use herald_bench::report;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A results file written by `herald bench ... --json` (repeat to overlay several runs, e.g.
    /// herald and Kamailio); each file is one series, named by its label.
    #[arg(long = "input", value_name = "FILE", required = true)]
    inputs: Vec<PathBuf>,
    /// Where to write the HTML page.
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Page heading.
    #[arg(long, default_value = "herald bench report")]
    title: String,
}

pub fn run(args: Args) -> ExitCode {
    match write_report(&args) {
        Ok(series) => {
            println!("{}: {series} series", args.output.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("herald bench report: {e}");
            ExitCode::from(2)
        }
    }
}

fn write_report(args: &Args) -> Result<usize, String> {
    let files = report::read_inputs(&args.inputs)?;
    let page = report::render(&files, &args.title)?;
    std::fs::write(&args.output, page).map_err(|e| format!("{}: {e}", args.output.display()))?;
    Ok(files.len())
}
