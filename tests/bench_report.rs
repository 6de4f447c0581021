//! `herald bench report` end to end: the real command on fixture results files (a herald and a
//! Kamailio capacity search and one single calls run, in tests/bench_report_data/), the page's
//! structure and escaping, the error exits, and a render in headless Chromium (Debian package
//! `chromium`) whose screenshot is kept at target/tmp/bench_report/report.png for a human to look
//! at.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bench_report_data").join(file)
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench_report").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herald")).args(["bench", "report"]).args(args).output().expect("run herald")
}

fn fixtures() -> Vec<PathBuf> {
    ["herald_capacity.json", "kamailio_capacity.json", "herald_calls_tcp.json"].iter().map(|f| data(f)).collect()
}

fn render(inputs: &[PathBuf], output: &Path, title: &str) -> String {
    let mut args: Vec<String> = Vec::new();
    for input in inputs {
        args.push("--input".into());
        args.push(input.display().to_string());
    }
    args.extend(["--output".into(), output.display().to_string(), "--title".into(), title.into()]);
    let out = report(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(output).unwrap()
}

#[test]
fn page_has_every_section_series_and_closed_svg() {
    let dir = scratch("sections");
    let html = render(&fixtures(), &dir.join("report.html"), "herald vs Kamailio");
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    for title in [
        "Achieved vs offered rate",
        "Failure ratio vs offered rate",
        "INVITE response time CCDF",
        "Session request delay (SRD) CCDF",
        "SRD percentiles vs offered rate",
        "Queueing model vs measurement",
        "Summary",
    ] {
        assert!(html.contains(title), "missing {title}");
    }
    for label in ["herald", "kamailio", "herald tcp"] {
        assert!(html.contains(&format!(">{label}</text>")), "no legend entry for {label}");
        assert!(html.contains(&format!("<th>{label}</th>")), "no summary column for {label}");
    }
    // Well-formed enough: every <svg> closed, nothing fetched, nothing run.
    let opened = html.matches("<svg").count();
    assert!(opened >= 5, "{opened} plots");
    assert_eq!(opened, html.matches("</svg>").count());
    assert_eq!(html.matches("<figure").count(), html.matches("</figure>").count());
    for forbidden in ["<script", "src=", "href=", "@import", "url(http"] {
        assert!(!html.contains(forbidden), "page contains {forbidden}");
    }
    // The CCDFs say which capacity step they show.
    assert!(html.contains("herald: highest passing step, 3250 /s offered."), "which step");
    assert!(html.contains("kamailio: highest passing step, 1750 /s offered."));
    // Capacity steps tables: 8 herald steps, 7 Kamailio steps.
    assert!(html.contains("herald: 8 steps, capacity 3250 /s"));
    assert!(html.contains("kamailio: 7 steps, capacity 1750 /s"));
    // The 0.01% criterion line and the zero-failure floor.
    assert!(html.contains(">0.01% criterion</text>"));
    assert!(html.contains("no failures (drawn on the floor line)"));
    // Failure reasons reach the summary.
    assert!(html.contains("timeout: "));
}

#[test]
fn model_section_plots_fits_and_explains_missing_data() {
    let dir = scratch("model");
    // A run without herald's metrics or server CPU: nothing to fit a service time to.
    let text = std::fs::read_to_string(data("herald_calls_tcp.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["label"] = "bare".into();
    value["server_metrics"] = serde_json::Value::Null;
    value["servers"] = serde_json::json!([]);
    let bare = dir.join("bare.json");
    std::fs::write(&bare, value.to_string()).unwrap();
    let mut inputs = fixtures();
    inputs.push(bare);
    let html = render(&inputs, &dir.join("report.html"), "model");
    let model = &html[html.find("id=\"model\"").expect("model section")..];
    assert!(model.contains("Model vs measured: waiting time"), "no waiting-time figure");
    assert!(model.contains("Model vs measured: drop rate"), "no drop figure");
    assert_eq!(model.matches("<svg").count(), 2);
    // herald exports service times; Kamailio only has its CPU per call.
    assert!(model.contains("herald: model fitted from herald metrics"), "{model}");
    assert!(model.contains("kamailio: model fitted from server CPU per call"), "{model}");
    assert!(model.contains("No model for bare: "), "{model}");
    // One table row per model point, predicted next to measured, for the three fitted series.
    assert_eq!(model.matches("<table class=\"model\">").count(), 3);
}

#[test]
fn hostile_labels_are_escaped_everywhere() {
    let dir = scratch("hostile");
    let text = std::fs::read_to_string(data("herald_calls_tcp.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let hostile = "<script>alert(\"x\")</script> & 'q'";
    value["label"] = hostile.into();
    value["target"] = "<img src=x onerror=alert(1)>".into();
    let input = dir.join("hostile.json");
    std::fs::write(&input, value.to_string()).unwrap();
    let html = render(&[input], &dir.join("report.html"), "<title> & \"quotes\"");
    assert!(!html.contains("<script"), "raw script tag");
    assert!(!html.contains("<img"), "raw img tag");
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"));
    assert!(html.contains("<h1>&lt;title&gt; &amp; &quot;quotes&quot;</h1>"));
}

#[test]
fn empty_label_falls_back_to_the_file_name() {
    let dir = scratch("nolabel");
    let text = std::fs::read_to_string(data("herald_calls_tcp.json")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["label"] = "".into();
    let input = dir.join("run-42.json");
    std::fs::write(&input, value.to_string()).unwrap();
    let html = render(&[input], &dir.join("report.html"), "t");
    assert!(html.contains(">run-42.json</text>"));
}

#[test]
fn bad_inputs_exit_2_naming_the_file() {
    let dir = scratch("bad");
    let out_file = dir.join("out.html");
    let out = out_file.to_str().unwrap();
    let missing = dir.join("missing.json");
    let not_json = dir.join("not-json.json");
    std::fs::write(&not_json, "{ this is not json").unwrap();
    let old_schema = dir.join("old.json");
    std::fs::write(&old_schema, r#"{"kind": "calls", "schema": 0}"#).unwrap();
    let wrong_shape = dir.join("shape.json");
    std::fs::write(&wrong_shape, r#"{"kind": "calls", "schema": 1, "attempted": "many"}"#).unwrap();
    for bad in [&missing, &not_json, &old_schema, &wrong_shape] {
        let good = data("herald_calls_tcp.json");
        let o = report(&["--input", good.to_str().unwrap(), "--input", bad.to_str().unwrap(), "--output", out]);
        assert_eq!(o.status.code(), Some(2), "{}", bad.display());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(bad.to_str().unwrap()), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!out_file.exists(), "wrote a page despite {}", bad.display());
    }
    // Usage errors: no input, no output.
    assert_eq!(report(&["--output", out]).status.code(), Some(2));
    assert_eq!(report(&["--input", data("herald_calls_tcp.json").to_str().unwrap()]).status.code(), Some(2));
    // An output that cannot be written.
    let unwritable = dir.join("no-such-dir/report.html");
    let o =
        report(&["--input", data("herald_calls_tcp.json").to_str().unwrap(), "--output", unwritable.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-dir"));
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Some((be(16), be(20)))
}

#[test]
fn renders_in_headless_chromium() {
    let dir = scratch("chromium");
    let page = dir.join("report.html");
    render(&fixtures(), &page, "herald vs Kamailio: capacity search, UDP, 2 workers");
    let png = dir.join("report.png");
    let profile = dir.join("profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--window-size=1400,4000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run chromium (Debian package chromium): {e}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = child.wait_with_output().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
    assert!(status.success(), "chromium: {status}\n{stderr}");
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}\n{stderr}", png.display()));
    assert_eq!(png_size(&bytes), Some((1400, 4000)), "not a 1400x4000 PNG");
    // A blank page compresses to a few kB; plots, text and tables take far more.
    assert!(bytes.len() > 100_000, "screenshot only {} bytes: nothing rendered?", bytes.len());
}
