//! `herald bench model`: fits seed 003's M/G/1 waiting-time and M/M/c/K drop models to measured
//! runs and prints predicted next to measured, like the thesis' tables 4.4 and 5.2–5.6.

use herald_bench::model::{fit, ModelFit};
use herald_bench::results::ResultsFile;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A results file written by `herald bench calls|register|users|capacity --json` (repeatable).
    #[arg(long = "input", required = true, value_name = "RESULTS.json")]
    inputs: Vec<PathBuf>,
    /// K: messages the server's socket queue holds, waiting plus in service
    /// [default: net.core.rmem_default / 1024 bytes per queued datagram].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    queue_capacity: Option<u32>,
    /// Also write the fitted models (a JSON array, one per input) to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    match fit_all(&args) {
        Ok(fits) => {
            for fit in &fits {
                print!("{}", render(fit));
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("herald bench model: {message}");
            ExitCode::from(2)
        }
    }
}

fn fit_all(args: &Args) -> Result<Vec<ModelFit>, String> {
    let mut fits = Vec::new();
    for path in &args.inputs {
        let file = ResultsFile::read(path)?;
        fits.push(fit(&file, args.queue_capacity).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&fits).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(fits)
}

/// The table for one fit: measured rows carry measurements, the others are the model alone.
fn render(fit: &ModelFit) -> String {
    let mut out = format!(
        "{}: {} (E[X] {:.1} µs, E[X²] {:.0} µs², c = {}, K = {})\n",
        fit.label, fit.source, fit.service_mean_us, fit.service_second_moment_us2, fit.servers, fit.queue_capacity
    );
    out += &format!(
        "{:>10} {:>7} {:>13} {:>13} {:>10} {:>10}\n",
        "calls/s", "rho", "wait model µs", "wait meas µs", "drop model", "drop meas"
    );
    for p in &fit.points {
        let wait = if p.predicted_wait_us.is_finite() { format!("{:.1}", p.predicted_wait_us) } else { "N/A".into() };
        let measured_wait = p.measured_wait_us.map_or("-".into(), |w| format!("{w:.1}"));
        let measured_drop = p.measured_drop.map_or("-".into(), |d| format!("{d:.5}"));
        out += &format!(
            "{:>10.1} {:>7.3} {:>13} {:>13} {:>10.5} {:>10}\n",
            p.offered_rate, p.utilization, wait, measured_wait, p.predicted_drop, measured_drop
        );
    }
    match fit.breaks_down_at {
        Some(rate) => out += &format!("model holds below {rate:.1} calls/s\n"),
        None => out += "model holds at every measured rate\n",
    }
    for note in &fit.notes {
        out += &format!("note: {note}\n");
    }
    out + "\n"
}
