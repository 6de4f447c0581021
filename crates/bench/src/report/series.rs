//! The results files of a report as series: each file's legend name, colour and marker, its
//! runs in rate order and the run that stands for it; the one piece every figure and table of
//! the page reads.

use super::html;
use super::svg_plot::{Dash, Style, PALETTE, SHAPES};
use crate::results::{ResultsFile, RunResult};
use std::path::{Path, PathBuf};

/// One results file as drawn on every plot: its legend name and its colour and marker.
pub(crate) struct Series<'a> {
    pub name: String,
    pub path: &'a Path,
    pub file: &'a ResultsFile,
    pub index: usize,
}

impl Series<'_> {
    /// Solid line in the series' colour with its marker shape.
    pub fn style(&self) -> Style {
        Style {
            colour: PALETTE[self.index % PALETTE.len()],
            dash: Dash::Solid,
            shape: Some(SHAPES[self.index % SHAPES.len()]),
            hollow: false,
        }
    }

    /// The runs in order of offered rate (a capacity search runs its steps out of order when it
    /// bisects).
    pub fn runs_by_rate(&self) -> Vec<&RunResult> {
        let mut runs = self.file.runs();
        runs.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
        runs
    }

    /// The run that stands for the series in the summary table and the CCDFs, and a phrase
    /// saying which it is: the run itself for a single run, the highest passing step for a
    /// capacity search (the lowest step when none passed).
    pub fn representative(&self) -> Option<(&RunResult, String)> {
        match self.file {
            ResultsFile::Capacity(c) => {
                let passing = c
                    .steps
                    .iter()
                    .filter(|s| s.attempted > 0 && s.failure_ratio() < c.max_failure)
                    .max_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
                match passing {
                    Some(step) => {
                        Some((step, format!("highest passing step, {} /s offered", html::sig(step.offered_rate, 4))))
                    }
                    None => c.steps.iter().min_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate)).map(|step| {
                        (step, format!("no step passed; lowest step, {} /s offered", html::sig(step.offered_rate, 4)))
                    }),
                }
            }
            _ => self.file.runs().first().map(|run| (*run, "single run".to_string())),
        }
    }
}

/// Names each file by its label, or its file name when the label is empty; names that would
/// repeat get the file name added, so the legend tells them apart.
pub(super) fn name_series(files: &[(PathBuf, ResultsFile)]) -> Vec<Series<'_>> {
    let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let base: Vec<String> = files
        .iter()
        .map(|(path, file)| {
            let label = file.label().trim();
            if label.is_empty() {
                file_name(path)
            } else {
                label.to_string()
            }
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (i, (path, _)) in files.iter().enumerate() {
        let mut name = base[i].clone();
        if base.iter().filter(|b| **b == name).count() > 1 && name != file_name(path) {
            name = format!("{name} ({})", file_name(path));
        }
        if names.contains(&name) {
            name = format!("{name} #{}", i + 1);
        }
        names.push(name);
    }
    files
        .iter()
        .zip(names)
        .enumerate()
        .map(|(index, ((path, file), name))| Series { name, path, file, index })
        .collect()
}

/// What the rate axis counts, from the kinds of run in the report.
pub(crate) fn rate_unit(series: &[Series]) -> &'static str {
    let kind = |s: &Series| match s.file {
        ResultsFile::Calls(_) | ResultsFile::Capacity(_) => "calls",
        ResultsFile::Register(_) => "registrations",
        ResultsFile::Users(_) => "transactions",
    };
    let first = series.first().map(kind).unwrap_or("calls");
    if series.iter().all(|s| kind(s) == first) {
        first
    } else {
        "operations"
    }
}
