//! Queueing model against measurement (seed 003): predicted vs measured socket-queue waiting
//! time and drop rate against offered rate, then the numbers as tables like the seed's tables
//! 4.4 and 5.2. The fit itself is [`crate::model::fit`]; this file only draws it.

use super::figures::{floor_entry, floored_lines, log_floor, Figure};
use super::html::{escape, sig, Table};
use super::scale::ScaleKind;
use super::series::{rate_unit, Series};
use super::svg_plot::{Axis, Dash, Guide, LegendEntry, Line, Plot, Style};
use crate::model::{fit, ModelFit};
use std::fmt::Write;

const GREY: &str = "#555555";
/// Drop probabilities below this are drawn on the floor: an M/M/c/K model happily predicts
/// 1e-40 at low load, and forty decades of axis would flatten everything measured.
const LOWEST_DROP: f64 = 1e-8;

/// The figures (none when no series could be fitted) and the HTML that follows them.
pub(crate) struct ModelSection {
    pub figures: Vec<Figure>,
    pub html: String,
}

pub(crate) fn build(series: &[Series]) -> ModelSection {
    let mut html = String::new();
    let mut fitted: Vec<(&Series, ModelFit)> = Vec::new();
    for s in series {
        match fit(s.file, None) {
            Ok(model) => fitted.push((s, model)),
            Err(why) => {
                // fit() starts its message with the file's label; the page names the series itself.
                let why = why.strip_prefix(&format!("{}: ", s.file.label())).unwrap_or(&why);
                let _ = writeln!(html, "<p class=\"missing\">No model for {}: {}</p>", escape(&s.name), escape(why));
            }
        }
    }
    if fitted.is_empty() {
        html.insert_str(0, "<p>No results file carries service-time data, so there is nothing to model.</p>\n");
        return ModelSection { figures: Vec::new(), html };
    }
    let figures = vec![wait_figure(series, &fitted), drop_figure(series, &fitted)];
    for (s, model) in &fitted {
        html.push_str(&fit_table(s, model));
    }
    ModelSection { figures, html }
}

fn model_legend() -> [LegendEntry; 2] {
    let measured =
        Style { colour: GREY, dash: Dash::Solid, shape: Some(super::svg_plot::Shape::Circle), hollow: false };
    let predicted = Style { colour: GREY, dash: Dash::Dashed, shape: None, hollow: false };
    [
        LegendEntry { label: "measured".into(), style: measured, connect: true },
        LegendEntry { label: "model".into(), style: predicted, connect: true },
    ]
}

fn breakdown_guides(fitted: &[(&Series, ModelFit)]) -> Vec<Guide> {
    fitted
        .iter()
        .filter_map(|(s, m)| m.breaks_down_at.map(|x| Guide::Vertical { x, colour: s.style().colour }))
        .collect()
}

fn offered_axis(series: &[Series]) -> Axis {
    Axis { title: format!("offered rate ({}/s)", rate_unit(series)), kind: ScaleKind::Linear, from_zero: true }
}

fn wait_figure(series: &[Series], fitted: &[(&Series, ModelFit)]) -> Figure {
    let y = Axis { title: "mean queue wait (µs)".into(), kind: ScaleKind::Log, from_zero: false };
    let mut plot = Plot::new("model-wait", offered_axis(series), y);
    plot.guides.extend(breakdown_guides(fitted));
    for (s, model) in fitted {
        let predicted: Vec<(f64, f64)> = model
            .points
            .iter()
            .filter(|p| p.predicted_wait_us.is_finite() && p.predicted_wait_us > 0.0)
            .map(|p| (p.offered_rate, p.predicted_wait_us))
            .collect();
        let measured: Vec<(f64, f64)> =
            model.points.iter().filter_map(|p| p.measured_wait_us.map(|w| (p.offered_rate, w))).collect();
        let style = s.style();
        plot.lines.push(Line {
            points: predicted,
            style: Style { dash: Dash::Dashed, shape: None, ..style },
            connect: true,
        });
        plot.lines.push(Line { points: measured, style, connect: true });
        plot.legend.push(LegendEntry { label: s.name.clone(), style, connect: true });
    }
    plot.legend.extend(model_legend());
    let mut notes =
        vec!["Dashed: M/G/1 (Pollaczek–Khinchine) or M/G/c waiting time from the measured service-time moments; \
         solid with markers: measured kernel-timestamp queue wait. Log scale; measured zeros are not drawn."
            .to_string()];
    if !breakdown_guides(fitted).is_empty() {
        notes.push("Dotted verticals: the rate where the model says it stops holding.".into());
    }
    Figure { title: "Model vs measured: waiting time".into(), svg: plot.to_svg(), notes }
}

fn drop_figure(series: &[Series], fitted: &[(&Series, ModelFit)]) -> Figure {
    let values =
        fitted.iter().flat_map(|(_, m)| m.points.iter().flat_map(|p| [Some(p.predicted_drop), p.measured_drop]));
    let floor = log_floor(values.flatten(), LOWEST_DROP);
    let y = Axis { title: "drop probability".into(), kind: ScaleKind::Log, from_zero: false };
    let mut plot = Plot::new("model-drop", offered_axis(series), y);
    plot.guides.push(Guide::Horizontal { y: floor, label: format!("≤ {}", sig(floor, 1)), label_right: true });
    plot.guides.extend(breakdown_guides(fitted));
    let mut any_floored = false;
    for (s, model) in fitted {
        let style = s.style();
        let predicted: Vec<(f64, f64)> = model
            .points
            .iter()
            .filter(|p| p.predicted_drop.is_finite())
            .map(|p| (p.offered_rate, p.predicted_drop.max(floor)))
            .collect();
        plot.lines.push(Line {
            points: predicted,
            style: Style { dash: Dash::Dashed, shape: None, ..style },
            connect: true,
        });
        let measured: Vec<(f64, f64)> =
            model.points.iter().filter_map(|p| p.measured_drop.map(|d| (p.offered_rate, d))).collect();
        any_floored |= measured.iter().any(|(_, d)| *d < floor);
        plot.lines.extend(floored_lines(&measured, floor, style));
        plot.legend.push(LegendEntry { label: s.name.clone(), style, connect: true });
    }
    plot.legend.extend(model_legend());
    if any_floored {
        plot.legend.push(floor_entry("no measured drops"));
    }
    let notes = vec![format!(
        "Dashed: M/M/c/K drop probability (c workers, K places); solid: measured drop rate. Log scale: values \
         below {} (zero above all) are drawn on the floor line.",
        sig(floor, 1)
    )];
    Figure { title: "Model vs measured: drop rate".into(), svg: plot.to_svg(), notes }
}

fn optional(value: Option<f64>, digits: u32) -> String {
    value.map(|v| sig(v, digits)).unwrap_or_else(|| "—".into())
}

/// The fitted parameters, the model's own notes, and each measured rate with the prediction next
/// to the measurement (seed 003's tables list measured rates only; the model-only grid points
/// between them are in the figures).
fn fit_table(s: &Series, model: &ModelFit) -> String {
    let mut table = Table::new(&[
        "offered /s",
        "utilization ρ",
        "wait, model (µs)",
        "wait, measured (µs)",
        "drop, model",
        "drop, measured",
    ]);
    for p in model.points.iter().filter(|p| p.measured_wait_us.is_some() || p.measured_drop.is_some()) {
        table.row(&[
            sig(p.offered_rate, 5),
            sig(p.utilization, 3),
            sig(p.predicted_wait_us, 3),
            optional(p.measured_wait_us, 3),
            sig(p.predicted_drop, 3),
            optional(p.measured_drop, 3),
        ]);
    }
    let breaks =
        model.breaks_down_at.map(|r| format!("; the model stops holding at {} /s", sig(r, 4))).unwrap_or_default();
    let notes: String = model.notes.iter().map(|n| format!("<li>{}</li>", escape(n))).collect();
    format!(
        "<details open><summary>{}: model fitted from {}</summary>\n<p>Service time mean {} µs, second moment {} µs², \
         {} server(s), queue capacity K = {}{}.</p>\n{}{}</details>\n",
        escape(&s.name),
        escape(&model.source),
        sig(model.service_mean_us, 4),
        sig(model.service_second_moment_us2, 4),
        model.servers,
        model.queue_capacity,
        escape(&breaks),
        if notes.is_empty() { String::new() } else { format!("<ul class=\"notes\">{notes}</ul>\n") },
        table.to_html("model")
    )
}
