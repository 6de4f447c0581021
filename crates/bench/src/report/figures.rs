//! The measurement figures: rates, failure ratio, response-time CCDFs and SRD percentiles, each
//! overlaying every series.

use super::html::sig;
use super::scale::{decade_below, ScaleKind};
use super::series::{rate_unit, Series};
use super::svg_plot::{Axis, Dash, Guide, LegendEntry, Line, Plot, Shape, Style};
use crate::results::{Latency, ResultsFile, RunResult};

/// A plot with its caption title and the notes under it (plain text, escaped when rendered).
pub(crate) struct Figure {
    pub title: String,
    pub svg: String,
    pub notes: Vec<String>,
}

/// The 0.01% criterion of seeds 000 and 002, used when no capacity file states its own.
const DEFAULT_MAX_FAILURE: f64 = 0.0001;
const GREY: &str = "#555555";

fn linear(title: String) -> Axis {
    Axis { title, kind: ScaleKind::Linear, from_zero: true }
}

fn log(title: &str) -> Axis {
    Axis { title: title.to_string(), kind: ScaleKind::Log, from_zero: false }
}

fn series_entry(s: &Series, label: String) -> LegendEntry {
    LegendEntry { label, style: s.style(), connect: true }
}

/// Dotted verticals at each capacity search's result.
fn capacity_guides(series: &[Series]) -> Vec<Guide> {
    series
        .iter()
        .filter_map(|s| match s.file {
            ResultsFile::Capacity(c) if c.capacity_rate > 0.0 => {
                Some(Guide::Vertical { x: c.capacity_rate, colour: s.style().colour })
            }
            _ => None,
        })
        .collect()
}

const CAPACITY_NOTE: &str = "Dotted vertical lines in a series' colour mark the capacity its search found.";

/// Figure: achieved against offered rate, with y = x (every offered call succeeded).
pub(crate) fn achieved_vs_offered(series: &[Series]) -> Figure {
    let unit = rate_unit(series);
    let mut plot = Plot::new(
        "achieved",
        linear(format!("offered rate ({unit}/s)")),
        linear(format!("achieved rate (successful {unit}/s)")),
    );
    plot.guides.push(Guide::Diagonal { label: "achieved = offered".into() });
    plot.guides.extend(capacity_guides(series));
    for s in series {
        let points = s.runs_by_rate().iter().map(|r| (r.offered_rate, r.achieved_rate)).collect();
        plot.lines.push(Line { points, style: s.style(), connect: true });
        plot.legend.push(series_entry(s, s.name.clone()));
    }
    let mut notes = vec!["Points below the grey diagonal lost calls.".to_string()];
    if !capacity_guides(series).is_empty() {
        notes.push(CAPACITY_NOTE.into());
    }
    Figure { title: "Achieved vs offered rate".into(), svg: plot.to_svg(), notes }
}

/// The floor a log axis draws zeros (and anything smaller) at: a decade below the smallest
/// positive value or reference, and never below `lowest`.
pub(crate) fn log_floor(values: impl IntoIterator<Item = f64>, lowest: f64) -> f64 {
    let min = values.into_iter().filter(|v| v.is_finite() && *v > 0.0).fold(f64::INFINITY, f64::min);
    if min.is_finite() {
        (decade_below(min) / 10.0).max(lowest)
    } else {
        lowest
    }
}

/// A series on a log y axis where values under `floor` (zero above all) sit on the floor:
/// the connecting line, filled markers for real values, hollow ones for floored values.
pub(crate) fn floored_lines(points: &[(f64, f64)], floor: f64, style: Style) -> Vec<Line> {
    let finite: Vec<(f64, f64)> = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    let connect = Style { shape: None, ..style };
    let (real, floored): (Vec<_>, Vec<_>) = finite.iter().partition(|(_, y)| *y >= floor);
    vec![
        Line { points: finite.iter().map(|&(x, y)| (x, y.max(floor))).collect(), style: connect, connect: true },
        Line { points: real, style, connect: false },
        Line {
            points: floored.iter().map(|&(x, _)| (x, floor)).collect(),
            style: Style { hollow: true, ..style },
            connect: false,
        },
    ]
}

/// Legend entry for the hollow markers [`floored_lines`] draws.
pub(crate) fn floor_entry(what: &str) -> LegendEntry {
    let style = Style { colour: GREY, dash: Dash::Solid, shape: Some(Shape::Circle), hollow: true };
    LegendEntry { label: format!("{what} (drawn on the floor line)"), style, connect: false }
}

/// Figure: failed-call ratio on a log axis with the capacity criterion.
pub(crate) fn failure_ratio(series: &[Series]) -> Figure {
    let unit = rate_unit(series);
    let mut criteria: Vec<f64> = series
        .iter()
        .filter_map(|s| match s.file {
            ResultsFile::Capacity(c) if c.max_failure > 0.0 => Some(c.max_failure),
            _ => None,
        })
        .collect();
    criteria.sort_by(f64::total_cmp);
    criteria.dedup();
    if criteria.is_empty() {
        criteria.push(DEFAULT_MAX_FAILURE);
    }
    let ratios = series.iter().flat_map(|s| s.file.runs().into_iter().map(RunResult::failure_ratio));
    let floor = log_floor(ratios.chain(criteria.iter().copied()), 1e-12);
    let mut plot = Plot::new("failures", linear(format!("offered rate ({unit}/s)")), log("failed / attempted"));
    for c in &criteria {
        let label = format!("{} criterion", super::html::percent(*c));
        plot.guides.push(Guide::Horizontal { y: *c, label, label_right: false });
    }
    plot.guides.push(Guide::Horizontal { y: floor, label: "no failures".into(), label_right: true });
    plot.guides.extend(capacity_guides(series));
    let mut any_zero = false;
    for s in series {
        let runs: Vec<&RunResult> = s.runs_by_rate().into_iter().filter(|r| r.attempted > 0).collect();
        any_zero |= runs.iter().any(|r| r.failed == 0);
        let points: Vec<(f64, f64)> = runs.iter().map(|r| (r.offered_rate, r.failure_ratio())).collect();
        plot.lines.extend(floored_lines(&points, floor, s.style()));
        plot.legend.push(series_entry(s, s.name.clone()));
    }
    let mut notes = vec![format!(
        "Log scale. A run with zero failed {unit} cannot sit on a log axis; it is drawn as a hollow marker on \
         the 'no failures' line at {}.",
        sig(floor, 1)
    )];
    if any_zero {
        plot.legend.push(floor_entry("no failures"));
    }
    if !capacity_guides(series).is_empty() {
        notes.push(CAPACITY_NOTE.into());
    }
    Figure { title: "Failure ratio vs offered rate".into(), svg: plot.to_svg(), notes }
}

/// Which latency a CCDF figure shows.
pub(crate) enum CcdfOf {
    /// Transaction response time of this method (INVITE → final response).
    Method(String),
    /// RFC 6076 session request delay.
    Srd,
}

/// The method whose response time the CCDF shows: INVITE when any series has it, else the
/// first method any series measured (REGISTER for registration runs).
pub(crate) fn ccdf_method(series: &[Series]) -> Option<String> {
    let reps: Vec<&RunResult> = series.iter().filter_map(|s| s.representative().map(|r| r.0)).collect();
    let has = |m: &str| reps.iter().any(|r| r.response_time.get(m).is_some_and(|l| !l.ccdf.is_empty()));
    if has("INVITE") {
        return Some("INVITE".into());
    }
    reps.iter().flat_map(|r| r.response_time.iter()).find(|(_, l)| !l.ccdf.is_empty()).map(|(m, _)| m.clone())
}

/// Figure: complementary CDF on log-log axes, one curve per series (seed 004, figure 7).
pub(crate) fn ccdf(series: &[Series], of: &CcdfOf) -> Figure {
    let (title, what) = match of {
        CcdfOf::Method(m) => (format!("{m} response time CCDF"), format!("{m} response time")),
        CcdfOf::Srd => ("Session request delay (SRD) CCDF".to_string(), "SRD".to_string()),
    };
    let mut plot = Plot::new(
        &format!("ccdf-{}", what.to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-")),
        Axis { title: format!("{what} t (ms)"), kind: ScaleKind::Log, from_zero: false },
        log(&format!("P({what} > t)")),
    );
    let mut notes = vec!["Log-log axes; the curve ends at the slowest sample.".to_string()];
    for s in series {
        let Some((run, which)) = s.representative() else {
            notes.push(format!("{}: no runs in the file.", s.name));
            continue;
        };
        let latency: Option<&Latency> = match of {
            CcdfOf::Method(m) => run.response_time.get(m),
            CcdfOf::Srd => Some(&run.srd),
        };
        let points: Vec<(f64, f64)> = latency
            .map(|l| l.ccdf.iter().filter(|(_, p)| *p > 0.0).map(|&(us, p)| (us as f64 / 1000.0, p)).collect())
            .unwrap_or_default();
        if points.is_empty() {
            notes.push(format!("{}: no {what} samples.", s.name));
            continue;
        }
        let style = Style { shape: None, ..s.style() };
        plot.lines.push(Line { points, style, connect: true });
        let label = format!("{} @ {} /s", s.name, sig(run.offered_rate, 4));
        plot.legend.push(LegendEntry { label, style, connect: true });
        if matches!(s.file, ResultsFile::Capacity(_)) {
            notes.push(format!("{}: {which}.", s.name));
        }
    }
    Figure { title, svg: plot.to_svg(), notes }
}

/// Figure: SRD p50 / p90 / p99 against offered rate, log y (the tail grows by decades near the
/// knee).
pub(crate) fn srd_percentiles(series: &[Series]) -> Figure {
    let unit = rate_unit(series);
    let mut plot = Plot::new("srd-percentiles", linear(format!("offered rate ({unit}/s)")), log("SRD (ms)"));
    type Percentile = (&'static str, Dash, fn(&Latency) -> u64);
    let percentiles: [Percentile; 3] =
        [("p50", Dash::Solid, |l| l.p50_us), ("p90", Dash::Dashed, |l| l.p90_us), ("p99", Dash::Dotted, |l| l.p99_us)];
    for s in series {
        let runs: Vec<&RunResult> = s.runs_by_rate().into_iter().filter(|r| r.srd.count > 0).collect();
        for (_, dash, value) in &percentiles {
            let points = runs.iter().map(|r| (r.offered_rate, value(&r.srd) as f64 / 1000.0)).collect();
            plot.lines.push(Line { points, style: Style { dash: *dash, ..s.style() }, connect: true });
        }
        plot.legend.push(series_entry(s, s.name.clone()));
    }
    for (name, dash, _) in &percentiles {
        let style = Style { colour: GREY, dash: *dash, shape: None, hollow: false };
        plot.legend.push(LegendEntry { label: (*name).into(), style, connect: true });
    }
    let notes =
        vec!["RFC 6076 session request delay: INVITE sent until 180 (or 200) received. Solid p50, dashed p90, \
         dotted p99; log scale."
            .to_string()];
    Figure { title: "SRD percentiles vs offered rate".into(), svg: plot.to_svg(), notes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_a_decade_below_the_smallest_positive_value() {
        assert_eq!(log_floor([0.0, 0.003, 0.0001], 1e-12), 1e-5);
        assert_eq!(log_floor([0.0], 1e-9), 1e-9);
        assert_eq!(log_floor([1e-30], 1e-9), 1e-9);
    }

    #[test]
    fn zeros_become_hollow_markers_on_the_floor() {
        let style = Style { colour: "#000000", dash: Dash::Solid, shape: Some(Shape::Circle), hollow: false };
        let lines = floored_lines(&[(1.0, 0.0), (2.0, 0.01), (3.0, f64::NAN)], 1e-4, style);
        assert_eq!(lines[0].points, [(1.0, 1e-4), (2.0, 0.01)]);
        assert_eq!(lines[1].points, [(2.0, 0.01)]);
        assert_eq!(lines[2].points, [(1.0, 1e-4)]);
        assert!(lines[2].style.hollow && !lines[1].style.hollow && lines[0].style.shape.is_none());
    }
}
