//! `herald bench report`: one self-contained HTML page (inline SVG and CSS, no scripts, no
//! external resources) comparing one or more results files, each drawn as one series, e.g.
//! herald against Kamailio.
//!
//! The figures follow the seed papers: achieved vs offered rate and failure ratio against the
//! 0.01% criterion (seeds 000 and 002), the response-time CCDF on log-log axes (seed 004,
//! figure 7), SRD percentiles vs load, and the queueing model against the measurement (seed 003,
//! tables 4.4 and 5.2).

mod figures;
mod html;
mod model_section;
mod page;
mod scale;
mod series;
mod summary;
mod svg_marks;
mod svg_plot;

use crate::results::ResultsFile;
use series::name_series;
use std::path::PathBuf;

/// Reads every results file; the first bad one is the error, naming its path.
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<(PathBuf, ResultsFile)>, String> {
    paths.iter().map(|p| ResultsFile::read(p).map(|f| (p.clone(), f))).collect()
}

/// The report page for these results files (path, contents), in the given order, under `title`.
/// Errors only when there is nothing to report; missing data in a file shows up on the page.
pub fn render(files: &[(PathBuf, ResultsFile)], title: &str) -> Result<String, String> {
    if files.is_empty() {
        return Err("no results files to report on".into());
    }
    let series = name_series(files);
    Ok(page::build(&series, title))
}

#[cfg(test)]
mod tests {
    use super::series::{rate_unit, Series};
    use super::*;
    use crate::results::{CapacityResult, RunResult};

    fn run(label: &str, offered: f64, attempted: u64, failed: u64) -> RunResult {
        RunResult {
            schema: 1,
            label: label.into(),
            offered_rate: offered,
            achieved_rate: offered,
            attempted,
            succeeded: attempted - failed,
            failed,
            ..RunResult::default()
        }
    }

    fn capacity(label: &str, steps: Vec<RunResult>) -> ResultsFile {
        ResultsFile::Capacity(CapacityResult {
            schema: 1,
            label: label.into(),
            max_failure: 0.0001,
            capacity_rate: 0.0,
            steps,
            ..CapacityResult::default()
        })
    }

    #[test]
    fn empty_input_is_an_error() {
        assert!(render(&[], "t").is_err());
    }

    #[test]
    fn names_fall_back_to_file_name_and_stay_distinct() {
        let files = vec![
            (PathBuf::from("/r/a.json"), ResultsFile::Calls(run("herald", 10.0, 10, 0))),
            (PathBuf::from("/r/b.json"), ResultsFile::Calls(run("herald", 20.0, 10, 0))),
            (PathBuf::from("/r/c.json"), ResultsFile::Calls(run(" ", 20.0, 10, 0))),
            (PathBuf::from("/r/c.json"), ResultsFile::Calls(run("", 20.0, 10, 0))),
        ];
        let names: Vec<String> = name_series(&files).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["herald (a.json)", "herald (b.json)", "c.json", "c.json #4"]);
    }

    #[test]
    fn capacity_representative_is_the_highest_passing_step() {
        let file = capacity(
            "k",
            vec![
                run("", 100.0, 10_000, 0),
                run("", 400.0, 10_000, 50),
                run("", 300.0, 10_000, 0),
                run("", 200.0, 10_000, 0),
            ],
        );
        let path = PathBuf::from("k.json");
        let s = Series { name: "k".into(), path: &path, file: &file, index: 0 };
        let (step, why) = s.representative().unwrap();
        assert_eq!(step.offered_rate, 300.0);
        assert!(why.contains("highest passing") && why.contains("300"), "{why}");
        let rates: Vec<f64> = s.runs_by_rate().iter().map(|r| r.offered_rate).collect();
        assert_eq!(rates, [100.0, 200.0, 300.0, 400.0]);

        let failing = capacity("k", vec![run("", 200.0, 100, 5), run("", 100.0, 100, 1)]);
        let s = Series { name: "k".into(), path: &path, file: &failing, index: 0 };
        let (step, why) = s.representative().unwrap();
        assert_eq!(step.offered_rate, 100.0);
        assert!(why.contains("no step passed"), "{why}");

        let empty = capacity("k", vec![]);
        let s = Series { name: "k".into(), path: &path, file: &empty, index: 0 };
        assert!(s.representative().is_none());
    }

    #[test]
    fn files_without_data_still_make_a_page() {
        // A capacity search with no steps, a run that attempted nothing, a registration run:
        // every figure still renders (as "no data" where nothing fits) and every <svg> closes.
        let files = vec![
            (PathBuf::from("empty.json"), capacity("", vec![])),
            (PathBuf::from("idle.json"), ResultsFile::Calls(run("idle", 0.0, 0, 0))),
            (PathBuf::from("reg.json"), ResultsFile::Register(run("reg", 50.0, 500, 0))),
        ];
        let html = render(&files, "t").unwrap();
        assert!(html.contains(">empty.json<"));
        assert!(html.contains("no data to plot"));
        assert!(html.contains("no runs in the file"));
        assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
        assert!(html.contains("offered rate (operations/s)"));
    }

    #[test]
    fn every_series_is_overlaid_on_the_rate_plots() {
        let files: Vec<(PathBuf, ResultsFile)> = (0..9)
            .map(|i| {
                let steps = vec![run("", 100.0, 1000, 0), run("", 200.0, 1000, 3)];
                (PathBuf::from(format!("s{i}.json")), capacity(&format!("series {i}"), steps))
            })
            .collect();
        let html = render(&files, "t").unwrap();
        let achieved = &html[html.find("Achieved vs offered").unwrap()..];
        let achieved = &html[..html.len() - achieved.len()];
        let first_svg = &achieved[achieved.rfind("<svg").unwrap()..];
        // One polyline per series; colours repeat after seven but marker shapes cycle with four.
        assert_eq!(first_svg.matches("<polyline").count(), 9);
        for i in 0..9 {
            assert!(first_svg.contains(&format!(">series {i}</text>")));
        }
    }

    #[test]
    fn rate_unit_follows_the_kinds() {
        let files = vec![
            (PathBuf::from("a"), ResultsFile::Calls(run("a", 1.0, 1, 0))),
            (PathBuf::from("b"), capacity("b", vec![])),
        ];
        assert_eq!(rate_unit(&name_series(&files)), "calls");
        let files = vec![
            (PathBuf::from("a"), ResultsFile::Calls(run("a", 1.0, 1, 0))),
            (PathBuf::from("b"), ResultsFile::Register(run("b", 1.0, 1, 0))),
        ];
        assert_eq!(rate_unit(&name_series(&files)), "operations");
    }
}
