//! A small SVG line-plot writer: framed axes (linear or log), grid, overlaid series with
//! markers and dash patterns, reference lines and a legend below the plot.
//!
//! Hand-written rather than drawn with `plotters`: without its `ttf` feature (which loads system
//! fonts) plotters places text with a crude width guess and offers no control over log-axis
//! labels, zero-at-a-floor markers or an outside legend. Here every label is a `<text>` element
//! the browser lays out with its own fonts, and the legend sits below the axes, so it never
//! covers data.

use super::html::{escape, shorten};
use super::scale::{Scale, ScaleKind};
use super::svg_marks::{guide_svg, label_svg, line_svg, marker_svg};
pub use super::svg_marks::{Dash, Guide, Line, Shape, Style};
use std::fmt::Write;

/// Colour-blind-safe colours (Okabe & Ito), one per series in input order.
pub const PALETTE: [&str; 7] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"];
/// Marker shapes, cycled with a different period than the colours so series stay distinct in
/// grey print.
pub const SHAPES: [Shape; 4] = [Shape::Circle, Shape::Square, Shape::Triangle, Shape::Diamond];

const WIDTH: f64 = 640.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 18.0;
const TOP: f64 = 14.0;
const PLOT_HEIGHT: f64 = 300.0;
/// Below the plot area: tick labels, then the axis title.
const X_TITLE_GAP: f64 = 40.0;
const LEGEND_ROW: f64 = 20.0;
/// Average glyph advance of 12 px sans-serif text, a slight overestimate so entries never touch.
const CHAR_WIDTH: f64 = 7.0;
/// Longest legend label before it is cut with "…".
const LEGEND_CHARS: usize = 48;

#[derive(Debug, Clone)]
pub struct Axis {
    pub title: String,
    pub kind: ScaleKind,
    /// Linear axes of rates and ratios start at zero.
    pub from_zero: bool,
}

#[derive(Debug, Clone)]
pub struct LegendEntry {
    pub label: String,
    pub style: Style,
    pub connect: bool,
}

/// One figure's plot.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Unique within the page: names the clip path.
    pub id: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    pub guides: Vec<Guide>,
    pub legend: Vec<LegendEntry>,
}

impl Plot {
    pub fn new(id: &str, x: Axis, y: Axis) -> Plot {
        Plot { id: id.to_string(), x, y, lines: Vec::new(), guides: Vec::new(), legend: Vec::new() }
    }

    /// The plot as an `<svg>` element; a framed "no data" box when nothing can be drawn.
    pub fn to_svg(&self) -> String {
        let xs = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let xs = xs.chain(self.guides.iter().filter_map(|g| match g {
            Guide::Vertical { x, .. } => Some(*x),
            _ => None,
        }));
        let ys = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let ys = ys.chain(self.guides.iter().filter_map(|g| match g {
            Guide::Horizontal { y, .. } => Some(*y),
            _ => None,
        }));
        let has_data = self.lines.iter().any(|l| !l.points.is_empty());
        let x = Scale::fit(self.x.kind, xs, self.x.from_zero);
        let y = Scale::fit(self.y.kind, ys, self.y.from_zero);
        match (x, y) {
            (Some(x), Some(y)) if has_data => self.draw(x, y),
            _ => self.draw_empty(),
        }
    }

    fn draw(&self, xs: Scale, ys: Scale) -> String {
        let plot_width = WIDTH - LEFT - RIGHT;
        let px = |v: f64| LEFT + xs.position(v) * plot_width;
        let py = |v: f64| TOP + (1.0 - ys.position(v)) * PLOT_HEIGHT;
        let (legend_svg, legend_height) = self.legend_svg(TOP + PLOT_HEIGHT + X_TITLE_GAP + 14.0);
        let height = TOP + PLOT_HEIGHT + X_TITLE_GAP + 12.0 + legend_height;
        let mut s = open_svg(height, &self.aria_label());
        let id = escape(&self.id);
        let _ = writeln!(
            s,
            "<defs><clipPath id=\"{id}-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
            LEFT - 6.0,
            TOP - 6.0,
            plot_width + 12.0,
            PLOT_HEIGHT + 12.0
        );
        // Grid and ticks.
        for tick in xs.ticks() {
            let x = px(tick.value);
            let len = if tick.label.is_some() { 6.0 } else { 3.0 };
            if tick.label.is_some() {
                let _ = write!(
                    s,
                    "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{}\"/>",
                    TOP + PLOT_HEIGHT
                );
            }
            let y0 = TOP + PLOT_HEIGHT;
            let _ = write!(s, "<line class=\"tick\" x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{}\"/>", y0 + len);
            if let Some(label) = &tick.label {
                let _ = writeln!(
                    s,
                    "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    y0 + 20.0,
                    label_svg(label)
                );
            }
        }
        for tick in ys.ticks() {
            let y = py(tick.value);
            let len = if tick.label.is_some() { 6.0 } else { 3.0 };
            if tick.label.is_some() {
                let _ = write!(
                    s,
                    "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\"/>",
                    LEFT + plot_width
                );
            }
            let _ = write!(s, "<line class=\"tick\" x1=\"{}\" y1=\"{y:.1}\" x2=\"{LEFT}\" y2=\"{y:.1}\"/>", LEFT - len);
            if let Some(label) = &tick.label {
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                    LEFT - 9.0,
                    y + 4.0,
                    label_svg(label)
                );
            }
        }
        let _ = writeln!(
            s,
            "<rect class=\"frame\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_width}\" height=\"{PLOT_HEIGHT}\"/>"
        );
        // Axis titles.
        let _ = writeln!(
            s,
            "<text class=\"axis-title\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            LEFT + plot_width / 2.0,
            TOP + PLOT_HEIGHT + X_TITLE_GAP,
            escape(&self.x.title)
        );
        let cy = TOP + PLOT_HEIGHT / 2.0;
        let _ = writeln!(
            s,
            "<text class=\"axis-title\" x=\"16\" y=\"{cy}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {cy})\">{}</text>",
            escape(&self.y.title)
        );
        let _ = writeln!(s, "<g clip-path=\"url(#{id}-clip)\">");
        for guide in &self.guides {
            s.push_str(&guide_svg(guide, &xs, &ys, &px, &py));
        }
        for line in &self.lines {
            s.push_str(&line_svg(line, &px, &py, &xs, &ys));
        }
        s.push_str("</g>\n");
        s.push_str(&legend_svg);
        s.push_str("</svg>\n");
        s
    }

    fn draw_empty(&self) -> String {
        let height = TOP + PLOT_HEIGHT + X_TITLE_GAP + 12.0;
        let mut s = open_svg(height, &self.aria_label());
        let plot_width = WIDTH - LEFT - RIGHT;
        let _ = writeln!(
            s,
            "<rect class=\"frame\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_width}\" height=\"{PLOT_HEIGHT}\"/>\n\
             <text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no data to plot</text>\n\
             <text class=\"axis-title\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n</svg>",
            LEFT + plot_width / 2.0,
            TOP + PLOT_HEIGHT / 2.0,
            LEFT + plot_width / 2.0,
            TOP + PLOT_HEIGHT + X_TITLE_GAP,
            escape(&self.x.title)
        );
        s
    }

    fn aria_label(&self) -> String {
        format!("{} versus {}", self.y.title, self.x.title)
    }

    /// Legend entries flowed left to right in rows; returns the SVG and its height.
    fn legend_svg(&self, top: f64) -> (String, f64) {
        if self.legend.is_empty() {
            return (String::new(), 0.0);
        }
        let mut s = String::from("<g class=\"legend\">\n");
        let (mut x, mut row) = (LEFT, 0.0);
        for entry in &self.legend {
            let label = shorten(&entry.label, LEGEND_CHARS);
            let width = 34.0 + CHAR_WIDTH * label.chars().count() as f64 + 16.0;
            if x > LEFT && x + width > WIDTH - RIGHT {
                x = LEFT;
                row += 1.0;
            }
            let y = top + row * LEGEND_ROW;
            if entry.connect {
                let _ = write!(
                    s,
                    "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                    x + 28.0,
                    entry.style.colour,
                    entry.style.dash.attribute()
                );
            }
            if let Some(shape) = entry.style.shape {
                s.push_str(&marker_svg(shape, x + 14.0, y, &entry.style));
            }
            let _ = writeln!(s, "<text x=\"{}\" y=\"{}\">{}</text>", x + 34.0, y + 4.0, escape(&label));
            x += width;
        }
        s.push_str("</g>\n");
        (s, (row + 1.0) * LEGEND_ROW)
    }
}

fn open_svg(height: f64, aria_label: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"{}\" \
         font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
        escape(aria_label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(i: usize) -> Style {
        Style {
            colour: PALETTE[i % PALETTE.len()],
            dash: Dash::Solid,
            shape: Some(SHAPES[i % SHAPES.len()]),
            hollow: false,
        }
    }

    fn plot_with(series: usize) -> Plot {
        let mut p = Plot::new(
            "t",
            Axis { title: "offered".into(), kind: ScaleKind::Linear, from_zero: true },
            Axis { title: "ratio".into(), kind: ScaleKind::Log, from_zero: false },
        );
        for i in 0..series {
            let points = vec![(100.0, 1e-4 * (i + 1) as f64), (200.0, 1e-2), (300.0, 0.0)];
            p.lines.push(Line { points, style: style(i), connect: true });
            p.legend.push(LegendEntry { label: format!("series {i}"), style: style(i), connect: true });
        }
        p
    }

    #[test]
    fn overlays_one_polyline_per_series_and_skips_zero_on_log_axis() {
        let svg = plot_with(3).to_svg();
        assert_eq!(svg.matches("<polyline").count(), 3);
        // Two drawable points per series (0 cannot sit on a log axis) plus one legend marker.
        assert_eq!(svg.matches("<circle").count(), 2 + 1);
        // Squares, plus the clip path's rectangle.
        assert_eq!(svg.matches("<rect x=").count(), 2 + 1 + 1);
        for i in 0..3 {
            assert!(svg.contains(&format!(">series {i}</text>")));
        }
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<svg").count(), 1);
    }

    #[test]
    fn hostile_titles_and_legend_are_escaped() {
        let mut p = plot_with(1);
        p.legend[0].label = "<script>alert(\"x&y\")</script>".into();
        p.x.title = "<b>".into();
        p.id = "a\"b".into();
        let svg = p.to_svg();
        assert!(!svg.contains("<script>") && !svg.contains("<b>"));
        assert!(svg.contains("&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;"));
        assert!(svg.contains("id=\"a&quot;b-clip\""));
    }

    #[test]
    fn empty_plot_says_so() {
        let p = plot_with(0);
        let svg = p.to_svg();
        assert!(svg.contains("no data to plot"));
        assert!(svg.ends_with("</svg>\n"));
        // Only zeros on a log axis is no data either.
        let mut p = plot_with(0);
        p.lines.push(Line { points: vec![(1.0, 0.0)], style: style(0), connect: true });
        assert!(p.to_svg().contains("no data to plot"));
    }

    #[test]
    fn legend_wraps_into_rows() {
        let mut p = plot_with(8);
        for e in &mut p.legend {
            e.label = "a rather long series label".into();
        }
        let svg = p.to_svg();
        let height: f64 = svg.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        // 8 entries of ~240 px in ~550 px of width: at least four rows.
        assert!(height >= TOP + PLOT_HEIGHT + X_TITLE_GAP + 12.0 + 4.0 * LEGEND_ROW, "{height}");
    }

    #[test]
    fn guides_are_drawn() {
        let mut p = plot_with(1);
        p.guides.push(Guide::Horizontal { y: 1e-4, label: "0.01% criterion".into(), label_right: false });
        p.guides.push(Guide::Diagonal { label: "y = x".into() });
        p.guides.push(Guide::Vertical { x: 250.0, colour: PALETTE[1] });
        let svg = p.to_svg();
        assert!(svg.contains(">0.01% criterion</text>"));
        assert!(svg.contains(">y = x</text>"));
        assert_eq!(svg.matches("class=\"guide\"").count(), 2);
        assert!(svg.contains(&format!("stroke=\"{}\" stroke-width=\"1.2\"", PALETTE[1])));
    }
}
