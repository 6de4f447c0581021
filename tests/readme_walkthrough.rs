//! The README's two-minute walk-through, run as written: the shell block between the
//! `walkthrough:begin` and `walkthrough:end` markers of README.md, in a private network
//! namespace (so that its port 5060 meets no other server on the machine), with herald on the
//! embedded default configuration. The one change: its first line builds the release binary
//! (minutes with fat LTO), and the test puts the binary cargo built for the tests in its place;
//! the test checks that line word for word, so the README cannot drift from what is tested.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BUILD_LINE: &str = "cargo build --release && H=$PWD/target/release/herald";

fn walkthrough() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("<!-- walkthrough:begin -->").expect("README has the walkthrough:begin marker");
    let end = readme.find("<!-- walkthrough:end -->").expect("README has the walkthrough:end marker");
    let block = &readme[start..end];
    let body: Vec<&str> =
        block.lines().skip_while(|l| !l.starts_with("```")).skip(1).take_while(|l| !l.starts_with("```")).collect();
    assert_eq!(body.first().copied(), Some(BUILD_LINE), "the walk-through starts by building herald");
    body[1..].join("\n")
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    if Command::new("unshare").args(["--net", "true"]).status().map(|s| !s.success()).unwrap_or(true) {
        eprintln!("skipped: `unshare --net` is unavailable (needs root): the walk-through binds port 5060");
        return;
    }
    let script =
        format!("set -euo pipefail\nip link set lo up\nH={}\n{}\n", env!("CARGO_BIN_EXE_herald"), walkthrough());
    // Output to files, not pipes: a process the script left behind would hold a pipe open.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme_walkthrough");
    std::fs::create_dir_all(&dir).unwrap();
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new("unshare")
        .args(["--net", "bash", "-c", &script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("unshare bash");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let tail = |s: &str| s.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    assert!(
        status.success(),
        "the walk-through failed ({status}):\n--- stdout\n{}\n--- stderr\n{}",
        tail(&out),
        tail(&err)
    );
    // herald said it drained and stopped after SIGTERM, and SIPp's 10 calls all succeeded
    // (SIPp exits 0 only then, which `set -e` checked).
    assert!(err.contains("herald serving"), "{}", tail(&err));
}
