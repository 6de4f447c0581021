//! HTML building blocks: escaping, number formatting and simple tables.
//!
//! Every string that comes from a results file (labels, targets, failure reasons, process names)
//! is user-supplied and goes through [`escape`] before it reaches the page; the same escaping is
//! valid inside inline SVG `<text>` elements, because the HTML parser decodes the entities there
//! too.

use std::fmt::Write;

/// Escapes text for HTML element content and for double- or single-quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters have no business in a label; a visible placeholder keeps the
            // page valid XML-wise (SVG text) and shows that something odd was there.
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Shortens a label to `max` characters (not bytes), ending with "…" when cut, so a long label
/// cannot push a legend off the figure.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// `x` with `digits` significant digits and without trailing zeros after the decimal point;
/// plain notation from 1e-4 to 1e9 (rates, times, ratios), exponent notation outside, where a
/// model's 1e-40 drop probability would otherwise print forty zeros.
pub fn sig(x: f64, digits: u32) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "n/a".into()
        } else if x > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-4..9).contains(&magnitude) {
        let text = format!("{:.*e}", digits.saturating_sub(1) as usize, x);
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa =
            if mantissa.contains('.') { mantissa.trim_end_matches('0').trim_end_matches('.') } else { mantissa };
        return format!("{mantissa}e{exponent}");
    }
    let decimals = (digits as i32 - 1 - magnitude).max(0) as usize;
    let mut s = format!("{x:.decimals$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

/// Microseconds shown as milliseconds with three significant digits.
pub fn ms(us: f64) -> String {
    sig(us / 1000.0, 3)
}

/// A ratio shown as a percentage ("0.0123%").
pub fn percent(ratio: f64) -> String {
    format!("{}%", sig(ratio * 100.0, 3))
}

/// A table whose cells are already-escaped HTML fragments (built with [`escape`]).
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these (plain-text) column headings.
    pub fn new<S: AsRef<str>>(header: &[S]) -> Table {
        Table { header: header.iter().map(|h| escape(h.as_ref())).collect(), rows: Vec::new() }
    }

    /// Adds a row of plain-text cells (escaped here).
    pub fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        self.rows.push(cells.iter().map(|c| escape(c.as_ref())).collect());
    }

    /// The table as HTML; the first column is a row heading.
    pub fn to_html(&self, class: &str) -> String {
        let mut out = String::new();
        let _ = write!(out, "<table class=\"{}\">\n<thead><tr>", escape(class));
        for h in &self.header {
            let _ = write!(out, "<th>{h}</th>");
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, cell) in row.iter().enumerate() {
                let tag = if i == 0 { "th" } else { "td" };
                let _ = write!(out, "<{tag}>{cell}</{tag}>");
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_hostile_labels() {
        assert_eq!(escape("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
        assert_eq!(escape("\"&'"), "&quot;&amp;&#39;");
        assert_eq!(escape("a\u{0}b\nc"), "a\u{fffd}b\u{fffd}c");
        assert_eq!(escape("kamailio 5.6 µs"), "kamailio 5.6 µs");
    }

    #[test]
    fn table_escapes_every_cell_and_heading() {
        let mut t = Table::new(&["<h>"]);
        t.row(&["<td>", "&"]);
        let html = t.to_html("x\"y");
        assert!(html.contains("<th>&lt;h&gt;</th>"));
        assert!(html.contains("<th>&lt;td&gt;</th><td>&amp;</td>"));
        assert!(html.contains("class=\"x&quot;y\""));
        assert!(!html.contains("<td>&</td>"));
    }

    #[test]
    fn shortens_by_characters() {
        assert_eq!(shorten("µµµµ", 4), "µµµµ");
        assert_eq!(shorten("µµµµµ", 4), "µµµ…");
    }

    #[test]
    fn significant_digits() {
        assert_eq!(sig(1234.5678, 3), "1235");
        assert_eq!(sig(0.012345, 3), "0.0123");
        assert_eq!(sig(2.0, 3), "2");
        assert_eq!(sig(0.0, 3), "0");
        assert_eq!(sig(f64::NAN, 3), "n/a");
        assert_eq!(sig(1.2345e-40, 3), "1.23e-40");
        assert_eq!(sig(1e-8, 1), "1e-8");
        assert_eq!(sig(-2.5e-6, 3), "-2.5e-6");
        assert_eq!(sig(0.00012, 3), "0.00012");
        assert_eq!(sig(3.2e12, 2), "3.2e12");
        assert_eq!(percent(0.0001), "0.01%");
        assert_eq!(ms(12_345.0), "12.3");
    }
}
