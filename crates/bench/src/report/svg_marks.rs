//! The SVG elements a plot is drawn from: tick labels, reference lines, data lines and markers,
//! and the types that describe them ([`Line`], [`Style`], [`Guide`]), which `svg_plot` re-exports
//! with the plot around them.

use super::html::escape;
use super::scale::{Scale, ScaleKind, TickLabel};
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dash {
    Solid,
    Dashed,
    Dotted,
}

impl Dash {
    pub(super) fn attribute(self) -> &'static str {
        match self {
            Dash::Solid => "",
            Dash::Dashed => " stroke-dasharray=\"7 4\"",
            Dash::Dotted => " stroke-dasharray=\"2 3\"",
        }
    }
}

/// How a line and its markers look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Style {
    pub colour: &'static str,
    pub dash: Dash,
    pub shape: Option<Shape>,
    /// Hollow markers flag points that are not what they seem (a zero drawn at a log floor).
    pub hollow: bool,
}

/// One data series: `connect` draws the polyline, `style.shape` the markers.
#[derive(Debug, Clone)]
pub struct Line {
    pub points: Vec<(f64, f64)>,
    pub style: Style,
    pub connect: bool,
}

/// A reference line drawn in grey (or the given colour) behind the data.
#[derive(Debug, Clone)]
pub enum Guide {
    /// y = x across the common range of both axes.
    Diagonal { label: String },
    /// y = const, labelled above the line at its left end (or right end with `label_right`: put
    /// the label where the data is not, e.g. a criterion at low load, a floor at high load).
    Horizontal { y: f64, label: String, label_right: bool },
    /// x = const in a series colour, e.g. the capacity a search found.
    Vertical { x: f64, colour: &'static str },
}

/// A tick label; a power of ten gets its exponent as a raised, smaller `<tspan>`.
pub(super) fn label_svg(label: &TickLabel) -> String {
    match label.exponent {
        Some(e) => format!("{}<tspan dy=\"-6\" font-size=\"9\">{e}</tspan>", escape(&label.mantissa)),
        None => escape(&label.mantissa),
    }
}

pub(super) fn guide_svg(
    guide: &Guide,
    xs: &Scale,
    ys: &Scale,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) -> String {
    match guide {
        Guide::Diagonal { label } => {
            let lo = xs.lo.max(ys.lo);
            let hi = xs.hi.min(ys.hi);
            if lo >= hi {
                return String::new();
            }
            let (x1, y1, x2, y2) = (px(lo), py(lo), px(hi), py(hi));
            // The label runs along the line, a quarter of the way up and clear of markers sitting
            // on it (achieved = offered is where good runs are).
            let angle = (y2 - y1).atan2(x2 - x1).to_degrees();
            let (lx, ly) = (x1 + (x2 - x1) * 0.22, y1 + (y2 - y1) * 0.22);
            format!(
                "<line class=\"guide\" x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\"/>\
                 <text class=\"guide-label\" x=\"{lx:.1}\" y=\"{ly:.1}\" dy=\"-9\" text-anchor=\"middle\" \
                 transform=\"rotate({angle:.1} {lx:.1} {ly:.1})\">{}</text>\n",
                escape(label)
            )
        }
        Guide::Horizontal { y, label, label_right } => {
            let (x, anchor) = if *label_right { (px(xs.hi) - 6.0, "end") } else { (px(xs.lo) + 6.0, "start") };
            format!(
                "<line class=\"guide\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"guide-label\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>\n",
                px(xs.lo),
                py(*y),
                px(xs.hi),
                py(*y),
                py(*y) - 5.0,
                escape(label)
            )
        }
        Guide::Vertical { x, colour } => format!(
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"1.2\" \
             stroke-dasharray=\"2 3\"/>\n",
            px(*x),
            py(ys.lo),
            px(*x),
            py(ys.hi)
        ),
    }
}

pub(super) fn line_svg(
    line: &Line,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
    xs: &Scale,
    ys: &Scale,
) -> String {
    let drawable = |v: f64, scale: &Scale| v.is_finite() && (scale.kind == ScaleKind::Linear || v > 0.0);
    let points: Vec<(f64, f64)> = line
        .points
        .iter()
        .filter(|(x, y)| drawable(*x, xs) && drawable(*y, ys))
        .map(|&(x, y)| (px(x), py(y)))
        .collect();
    let mut s = String::new();
    if line.connect && points.len() > 1 {
        let coords: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" stroke-linejoin=\"round\"{}/>",
            coords.join(" "),
            line.style.colour,
            line.style.dash.attribute()
        );
    }
    if let Some(shape) = line.style.shape {
        for &(x, y) in &points {
            s.push_str(&marker_svg(shape, x, y, &line.style));
        }
        s.push('\n');
    }
    s
}

pub(super) fn marker_svg(shape: Shape, x: f64, y: f64, style: &Style) -> String {
    let fill = if style.hollow { "#ffffff" } else { style.colour };
    let paint = format!("fill=\"{fill}\" stroke=\"{}\" stroke-width=\"1.3\"", style.colour);
    match shape {
        Shape::Circle => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.6\" {paint}/>"),
        Shape::Square => {
            format!("<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6.6\" height=\"6.6\" {paint}/>", x - 3.3, y - 3.3)
        }
        Shape::Triangle => {
            format!(
                "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" {paint}/>",
                y - 4.4,
                x + 4.0,
                y + 3.0,
                x - 4.0,
                y + 3.0
            )
        }
        Shape::Diamond => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" {paint}/>",
            y - 4.4,
            x + 4.4,
            y + 4.4,
            x - 4.4
        ),
    }
}
