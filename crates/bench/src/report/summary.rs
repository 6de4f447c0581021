//! The summary table (one column per series, so two or three systems read side by side) and the
//! step table of each capacity search.

use super::html::{escape, ms, percent, sig, Table};
use super::series::Series;
use crate::results::{ResultsFile, RunResult};

const NONE: &str = "—";

fn kind(file: &ResultsFile) -> &'static str {
    match file {
        ResultsFile::Calls(_) => "calls",
        ResultsFile::Register(_) => "register",
        ResultsFile::Users(_) => "users",
        ResultsFile::Capacity(_) => "capacity search",
    }
}

fn failures(run: &RunResult) -> String {
    if run.failures.is_empty() {
        return run.failed.to_string();
    }
    let reasons: Vec<String> = run.failures.iter().map(|(reason, n)| format!("{reason}: {n}")).collect();
    format!("{} ({})", run.failed, reasons.join(", "))
}

fn p50_p99(count: u64, p50: u64, p99: u64) -> String {
    if count == 0 {
        NONE.into()
    } else {
        format!("{} / {}", ms(p50 as f64), ms(p99 as f64))
    }
}

fn mib(kib: u64) -> String {
    sig(kib as f64 / 1024.0, 3)
}

fn per_server(run: &RunResult, value: impl Fn(&crate::results::ServerUsage) -> String) -> String {
    if run.servers.is_empty() {
        return NONE.into();
    }
    let parts: Vec<String> = run.servers.iter().map(|s| format!("{} {}: {}", s.name, s.pid, value(s))).collect();
    parts.join("; ")
}

fn udp_drops(run: &RunResult) -> String {
    let rcvbuf = run.udp_after.rcvbuf_errors.saturating_sub(run.udp_before.rcvbuf_errors);
    let in_errors = run.udp_after.in_errors.saturating_sub(run.udp_before.in_errors);
    format!("{rcvbuf} rcvbuf, {in_errors} in-errors")
}

/// The rows of the summary table: (heading, value for a run, capacity-only value).
fn rows(series: &Series) -> Vec<(&'static str, String)> {
    let Some((run, which)) = series.representative() else {
        return vec![("Run shown", "no runs in the file".into())];
    };
    let which = if run.interrupted { format!("{which} (interrupted)") } else { which };
    let capacity = match series.file {
        ResultsFile::Capacity(c) => {
            format!("{} /s ({} steps, criterion < {})", sig(c.capacity_rate, 4), c.steps.len(), percent(c.max_failure))
        }
        _ => NONE.into(),
    };
    let metrics = run.server_metrics.as_ref();
    vec![
        ("File", series.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
        ("Kind", kind(series.file).into()),
        ("Capacity", capacity),
        ("Run shown", which),
        ("Target", run.target.clone()),
        ("Transport / arrivals", format!("{} / {}", run.transport, run.arrivals)),
        ("Duration (s)", sig(run.duration_s, 4)),
        ("Offered rate (/s)", sig(run.offered_rate, 5)),
        ("Achieved rate (/s)", sig(run.achieved_rate, 5)),
        ("Attempted", run.attempted.to_string()),
        ("Succeeded", run.succeeded.to_string()),
        ("Failed (by reason)", failures(run)),
        ("Failure ratio", percent(run.failure_ratio())),
        ("Retransmissions", run.retransmissions.to_string()),
        ("SRD p50 / p99 (ms)", p50_p99(run.srd.count, run.srd.p50_us, run.srd.p99_us)),
        ("SDD p50 / p99 (ms)", p50_p99(run.sdd.count, run.sdd.p50_us, run.sdd.p99_us)),
        ("Generator CPU (µs/call)", sig(run.generator.cpu_us_per_call, 3)),
        ("Generator peak RSS (MiB)", mib(run.generator.peak_rss_kib)),
        ("Server CPU (s per 1000 calls)", per_server(run, |s| sig(s.cpu_s_per_1000_calls, 3))),
        ("Server peak RSS (MiB)", per_server(run, |s| mib(s.peak_rss_kib))),
        ("UDP drops, whole machine (after − before)", udp_drops(run)),
        (
            "Server socket drops (metrics)",
            metrics.map(|m| format!("{} ({} workers)", m.socket_drops, m.workers)).unwrap_or_else(|| NONE.into()),
        ),
    ]
}

/// One column per series, one row per measure.
pub(crate) fn summary_table(series: &[Series]) -> String {
    let mut header = vec![String::new()];
    header.extend(series.iter().map(|s| s.name.clone()));
    let columns: Vec<Vec<(&str, String)>> = series.iter().map(rows).collect();
    // Every series lists the same headings unless it had no runs; take them from the longest.
    let headings: Vec<&str> =
        columns.iter().max_by_key(|c| c.len()).map(|c| c.iter().map(|(h, _)| *h).collect()).unwrap_or_default();
    let mut table = Table::new(&header);
    for heading in headings {
        let mut cells = vec![heading.to_string()];
        for column in &columns {
            cells.push(
                column.iter().find(|(h, _)| *h == heading).map(|(_, v)| v.clone()).unwrap_or_else(|| NONE.into()),
            );
        }
        table.row(&cells);
    }
    table.to_html("summary")
}

/// The steps of every capacity search, in the order they ran, each as a collapsible table.
pub(crate) fn capacity_steps(series: &[Series]) -> String {
    let mut out = String::new();
    for s in series {
        let ResultsFile::Capacity(c) = s.file else { continue };
        let mut table = Table::new(&[
            "step",
            "offered /s",
            "achieved /s",
            "attempted",
            "failed",
            "failure ratio",
            "SRD p50 / p99 (ms)",
            "verdict",
        ]);
        for (i, step) in c.steps.iter().enumerate() {
            let pass = step.attempted > 0 && step.failure_ratio() < c.max_failure;
            table.row(&[
                (i + 1).to_string(),
                sig(step.offered_rate, 5),
                sig(step.achieved_rate, 5),
                step.attempted.to_string(),
                failures(step),
                percent(step.failure_ratio()),
                p50_p99(step.srd.count, step.srd.p50_us, step.srd.p99_us),
                if pass { "pass".into() } else { "fail".into() },
            ]);
        }
        out.push_str(&format!(
            "<details open><summary>{}: {} steps, capacity {} /s</summary>\n{}</details>\n",
            escape(&s.name),
            c.steps.len(),
            sig(c.capacity_rate, 4),
            table.to_html("steps")
        ));
    }
    out
}
