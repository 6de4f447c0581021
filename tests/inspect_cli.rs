//! Runs the real `herald inspect` binary on the RFC 4475 / RFC 5118 corpus and on edge inputs:
//! exit status 0 for well-formed, 1 for malformed, 2 for usage or I/O errors; JSON that says
//! what a server would do.

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn corpus() -> PathBuf {
    std::env::var("HERALD_TORTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/sip-torture"))
}

fn inspect(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("inspect")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run herald");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn json_of(file: &str) -> (i32, Value) {
    let path = corpus().join(file);
    let out = inspect(&["--json", path.to_str().unwrap()], None);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{file}: bad JSON: {e}"));
    (out.status.code().unwrap(), v)
}

#[test]
fn rfc4475_verdicts_from_the_command() {
    // (file, exit status, action for malformed: Some(status) answer / None discard)
    let malformed: &[(&str, Option<u64>)] = &[
        ("badinv01", Some(400)),
        ("clerr", Some(400)),
        ("ncl", Some(400)),
        ("scalar02", Some(400)),
        ("scalarlg", None),
        ("quotbal", Some(400)),
        ("ltgtruri", Some(400)),
        ("lwsruri", Some(400)),
        ("lwsstart", Some(400)),
        ("trws", Some(400)),
        ("escruri", Some(400)),
        ("baddate", Some(400)),
        ("regbadct", Some(400)),
        ("badaspec", Some(400)),
        ("baddn", Some(400)),
        ("badvers", Some(505)),
        ("mismatch01", Some(400)),
        ("mismatch02", Some(501)),
        ("bigcode", None),
        ("insuf", Some(400)),
        ("multi01", Some(400)),
        ("mcl01", Some(400)),
    ];
    for (name, status) in malformed {
        let (code, v) = json_of(&format!("rfc4475/{name}.dat"));
        assert_eq!(code, 1, "{name}");
        assert_eq!(v["well_formed"], Value::Bool(false), "{name}");
        match status {
            Some(s) => {
                assert_eq!(v["server_action"]["action"], "respond", "{name}");
                assert_eq!(v["server_action"]["status"].as_u64(), Some(*s), "{name}");
            }
            None => assert_eq!(v["server_action"]["action"], "discard", "{name}"),
        }
        assert!(v["error"]["offset"].is_u64(), "{name}: error names the offset");
    }
    let valid = [
        "wsinv",
        "intmeth",
        "esc01",
        "escnull",
        "esc02",
        "lwsdisp",
        "longreq",
        "dblreq",
        "semiuri",
        "transports",
        "mpart01",
        "unreason",
        "noreason",
        "badbranch",
        "unkscm",
        "novelsc",
        "unksm2",
        "bext01",
        "invut",
        "regaut01",
        "bcast",
        "zeromf",
        "cparam01",
        "cparam02",
        "regescrt",
        "sdp01",
        "inv2543",
    ];
    for name in valid {
        let (code, v) = json_of(&format!("rfc4475/{name}.dat"));
        assert_eq!(code, 0, "{name}: {}", v["error"]);
        assert_eq!(v["well_formed"], Value::Bool(true), "{name}");
    }
}

#[test]
fn notes_carry_the_proxy_verdicts_for_valid_messages() {
    let note = |name: &str, needle: &str| {
        let (_, v) = json_of(&format!("rfc4475/{name}.dat"));
        let notes = v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect::<Vec<_>>();
        assert!(notes.iter().any(|n| n.contains(needle)), "{name}: {notes:?}");
    };
    note("unkscm", "416");
    note("zeromf", "483");
    note("bext01", "420");
    note("bcast", "broadcast");
    note("dblreq", "ignored");
    note("esc02", "unknown method");
    note("unksm2", "400");
}

#[test]
fn json_shows_typed_values() {
    let (_, v) = json_of("rfc4475/escnull.dat");
    let contacts: Vec<&Value> =
        v["headers"].as_array().unwrap().iter().filter(|h| h["canonical"] == "Contact").collect();
    assert_eq!(contacts.len(), 2);
    assert_eq!(v["start_line"]["method"], "REGISTER");
    let (_, v) = json_of("rfc4475/semiuri.dat");
    assert_eq!(v["start_line"]["request_uri_parsed"]["user"], "user;par=u%40example.net");
    assert_eq!(v["start_line"]["request_uri_parsed"]["host"], "example.com");
}

#[test]
fn rfc5118_messages_from_the_command() {
    let dir = corpus().join("rfc5118-ersip-crlf");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let out = inspect(&[path.to_str().unwrap()], None);
        let expected = if name == "ipv6-bad" { 1 } else { 0 };
        assert_eq!(out.status.code(), Some(expected), "{name}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn stdin_transport_and_usage_errors() {
    let msg = b"OPTIONS sip:a@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:b@example.com>;tag=1\r\nTo: <sip:a@example.com>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\n\r\n";
    let out = inspect(&["-"], Some(msg));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("verdict  well-formed"));
    // The same bytes on a stream lack the mandatory Content-Length (RFC 3261 §18.3).
    let out = inspect(&["--transport", "tcp", "-"], Some(msg));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Content-Length"));
    let out = inspect(&["/nonexistent/file.sip"], None);
    assert_eq!(out.status.code(), Some(2));
    let out = inspect(&["--transport", "carrier-pigeon", "-"], Some(msg));
    assert_eq!(out.status.code(), Some(2));
    let out = inspect(&["-"], Some(b""));
    assert_eq!(out.status.code(), Some(1));
    let out = inspect(&["-"], Some(&vec![b'x'; 200_000]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("too large"));
}
