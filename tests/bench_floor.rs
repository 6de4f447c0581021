//! `herald bench floor` as a user runs it: the table, the JSON, and usage errors.

use serde_json::Value;
use std::process::Command;

#[test]
fn prints_the_costs_and_writes_floors_that_add_up() {
    let dir = std::env::temp_dir().join(format!("herald-bench-floor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("floor.json");
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["bench", "floor", "--count", "100", "--size", "500", "--json"])
        .arg(&json)
        .output()
        .expect("run herald");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("send, reader asleep") && text.contains("floor per call, proxy"), "{text}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["size"], 500);
    let c = &v["costs"];
    let (send, recv) = (c["send_to_sleeping_reader_us"].as_f64().unwrap(), c["recv_batched_us"].as_f64().unwrap());
    assert!(send > 0.0 && recv > 0.0, "{v}");
    // 7 sends and 6 receives per relayed call; 6 and 7 for the generator's two ends.
    assert!((v["proxy_floor_us"].as_f64().unwrap() - (7.0 * send + 6.0 * recv)).abs() < 1e-6, "{v}");
    assert!((v["generator_floor_us"].as_f64().unwrap() - (6.0 * send + 7.0 * recv)).abs() < 1e-6, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_of_range_arguments_are_usage_errors() {
    for args in [["--size", "0"], ["--size", "9000"], ["--count", "3"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_herald")).args(["bench", "floor"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
