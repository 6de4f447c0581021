//! The message files the tests read (tests only): the benchmark messages of `benches/messages`
//! and the RFC 4475/5118 torture corpus of `../shared/testdata/sip-torture`.

use std::path::{Path, PathBuf};

/// Every `.sip` and `.dat` file: the benchmark messages first, then the torture corpus, and
/// how many of them are benchmark messages (each parses and passes the checks).
pub(crate) fn message_files() -> (Vec<PathBuf>, usize) {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    files(&manifest.join("benches/messages"), &mut paths);
    let usual = paths.len();
    files(&manifest.join("../../../shared/testdata/sip-torture"), &mut paths);
    assert!(paths.len() > usual + 40, "the torture corpus is missing");
    (paths, usual)
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        match path.is_dir() {
            true => files(&path, out),
            false if path.extension().is_some_and(|e| e == "dat" || e == "sip") => out.push(path),
            false => {}
        }
    }
}
