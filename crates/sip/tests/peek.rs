//! `Peek` against the full parse: for every message `Message::parse` accepts, a peek reads the
//! same start line and the same first value of each wanted header (RFC 4475/5118 torture
//! messages, generated messages with compact, repeated, folded and oddly spaced lines, and
//! arbitrary bytes, which must never panic).

use bytes::Bytes;
use herald_sip::peek::Peek;
use herald_sip::{HeaderName, Limits, Message};
use proptest::prelude::*;
use std::path::PathBuf;

/// The name sets a reader asks for (the generator's: a response's call and transaction, an
/// ACK's dialog), and a few more.
const WANTED: [HeaderName; 6] =
    [HeaderName::CallId, HeaderName::CSeq, HeaderName::Via, HeaderName::To, HeaderName::Contact, HeaderName::From];

/// Compares the peek of `bytes` with its full parse, for several wanted sets; returns whether
/// the full parse accepted it.
fn agrees(bytes: &[u8]) -> Result<bool, String> {
    let limits = Limits::default();
    let full = Message::parse(Bytes::copy_from_slice(bytes), &limits);
    let peek = Peek::new(bytes, &limits);
    let Ok(msg) = full else {
        // Reading less, a peek may accept what the parse rejects; it must only not panic.
        if let Ok(p) = peek {
            let _ = p.first_of(WANTED);
        }
        return Ok(false);
    };
    let p = peek.map_err(|e| format!("peek failed where the parse did not: {e}"))?;
    let same = p.start_line() == *msg.start_line()
        && p.status() == msg.status()
        && p.method() == msg.method()
        && p.request_uri_bytes() == msg.request_uri_bytes();
    if !same {
        return Err("start lines differ".into());
    }
    let sets: [&[HeaderName]; 4] =
        [&WANTED, &[HeaderName::CallId, HeaderName::CSeq, HeaderName::Via], &[HeaderName::CallId], &[HeaderName::To]];
    for set in sets {
        let got = match set.len() {
            1 => p.first_of([set[0]]).map(|v| v.to_vec()),
            3 => p.first_of([set[0], set[1], set[2]]).map(|v| v.to_vec()),
            _ => p.first_of(WANTED).map(|v| v.to_vec()),
        }
        .map_err(|e| format!("first_of {set:?} failed where the parse did not: {e}"))?;
        for (name, value) in set.iter().zip(got) {
            if value != msg.get(*name) {
                return Err(format!(
                    "{name:?}: peek {:?}, parse {:?}",
                    value.map(String::from_utf8_lossy),
                    msg.get(*name)
                ));
            }
        }
    }
    // Every line of the wanted names, in order.
    let mut all = Vec::new();
    p.each_of(&WANTED, |name, value| all.push((name, value.to_vec())))
        .map_err(|e| format!("each_of failed where the parse did not: {e}"))?;
    let want: Vec<_> =
        msg.headers().iter().filter(|h| WANTED.contains(&h.name)).map(|h| (h.name, msg.value_of(h).to_vec())).collect();
    if all != want {
        return Err(format!("each_of: peek {all:?}, parse {want:?}"));
    }
    // Whole lines of the wanted names and of one name herald does not know, as indexed.
    let mut fields = Vec::new();
    let text = p.bytes();
    p.each_field(&WANTED, Some("x-other"), |f| {
        fields.push((
            f.name,
            text[f.name_span().range()].to_vec(),
            text[f.line.range()].to_vec(),
            text[f.value.range()].to_vec(),
        ))
    })
    .map_err(|e| format!("each_field failed where the parse did not: {e}"))?;
    let other =
        |h: &herald_sip::HeaderField| h.name == HeaderName::Other && msg.name_of(h).eq_ignore_ascii_case(b"X-Other");
    let want: Vec<_> = msg
        .headers()
        .iter()
        .filter(|h| WANTED.contains(&h.name) || other(h))
        .map(|h| (h.name, msg.name_of(h).to_vec(), msg.as_bytes()[h.line.range()].to_vec(), msg.value_of(h).to_vec()))
        .collect();
    if fields != want {
        return Err(format!("each_field: peek {fields:?}, parse {want:?}"));
    }
    Ok(true)
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/sip-torture");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("torture corpus").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "dat") {
                out.push((path.display().to_string(), std::fs::read(&path).expect("readable")));
            }
        }
    }
    out
}

#[test]
fn torture_messages_peek_as_they_parse() {
    let corpus = corpus();
    assert!(corpus.len() > 40, "torture corpus missing: {} files", corpus.len());
    let mut parsed = 0;
    for (name, bytes) in &corpus {
        parsed += usize::from(agrees(bytes).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    assert!(parsed > 20, "only {parsed} torture messages parsed");
}

/// A header line of one of the wanted names (or another), in one of the ways RFC 3261 allows it
/// to be written.
fn line() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        "Call-ID",
        "call-id",
        "i",
        "CSeq",
        "cseq",
        "Via",
        "v",
        "VIA",
        "To",
        "t",
        "Contact",
        "m",
        "From",
        "f",
        "Max-Forwards",
        "Record-Route",
        "X-Other",
        "Content-Type",
        "Subject",
        // Names that start as wanted ones do.
        "Content-Length",
        "l",
        "c",
        "Call-Info",
        "cALL-iD",
        "RECORD-ROUTE",
        "Require",
        "Route",
        "x-other",
        "Expires",
    ]);
    let values = prop::sample::select(vec![
        "a@b",
        "1 INVITE",
        "SIP/2.0/UDP h:5060;branch=z9hG4bK1",
        "<sip:b@c>;tag=9",
        "\"x, y\" <sip:x@y>",
        "folded\r\n value",
        "",
        "70",
    ]);
    let space = prop::sample::select(vec![": ", ":", " : ", ":\t", ":   ", "\t:  ", "\r\n : ", "\r\n\t:"]);
    let end = prop::sample::select(vec!["\r\n", " \r\n", "\t\r\n"]);
    (names, space, values, end).prop_map(|(n, s, v, e)| format!("{n}{s}{v}{e}"))
}

fn message() -> impl Strategy<Value = Vec<u8>> {
    let start = prop::sample::select(vec![
        "INVITE sip:bob@h SIP/2.0\r\n",
        "ACK sip:bob@h;transport=udp SIP/2.0\r\n",
        "SIP/2.0 180 Ringing\r\n",
        "SIP/2.0 200 OK\r\n",
        "\r\nSIP/2.0 100 Trying\r\n",
        "sip/2.0 486 Busy\r\n",
    ]);
    (start, prop::collection::vec(line(), 0..14), any::<bool>()).prop_map(|(start, lines, body)| {
        let mut m = start.to_string();
        lines.iter().for_each(|l| m.push_str(l));
        m.push_str(if body { "Content-Length: 4\r\n\r\nbody" } else { "\r\n" });
        m.into_bytes()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_messages_peek_as_they_parse(bytes in message()) {
        agrees(&bytes).map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&bytes))))?;
    }

    /// Cut anywhere, a message still peeks as it parses (or both fail).
    #[test]
    fn truncated_messages_peek_as_they_parse(bytes in message(), cut in 0usize..400) {
        let bytes = &bytes[..cut.min(bytes.len())];
        agrees(bytes).map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(bytes))))?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = agrees(&bytes);
    }
}

#[test]
fn the_generators_messages_peek_as_they_parse() {
    // The shapes herald relays to the load generator: at least one must match in full.
    let ringing = b"SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK1.2;rport=5070\r\n\
Record-Route: <sip:127.0.0.1:5060;lr>\r\nFrom: <sip:a@d>;tag=1\r\nTo: <sip:b@d>;tag=2\r\nCall-ID: c1.1.a@bench\r\n\
CSeq: 1 INVITE\r\nContact: <sip:b@127.0.0.1:5080>\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(agrees(ringing), Ok(true));
    let limits = Limits::default();
    let p = Peek::new(ringing, &limits).unwrap();
    let [id, cseq, via] = p.first_of([HeaderName::CallId, HeaderName::CSeq, HeaderName::Via]).unwrap();
    assert_eq!((id, cseq), (Some(&b"c1.1.a@bench"[..]), Some(&b"1 INVITE"[..])));
    assert_eq!(via, Some(&b"SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK1.2;rport=5070"[..]));
    assert_eq!(p.status(), Some(180));
    // A name the message lacks reads to the end of the header section and comes back None.
    assert_eq!(p.first_of([HeaderName::Route]).unwrap(), [None]);
    // What is past the wanted lines is not read: a broken line after them does not matter;
    // before them it is the parse's error when a wanted name could start it, and is stepped
    // over unread when none could.
    let limits = Limits::default();
    for (line, route_error) in [(&b"Rbad line\r\n"[..], true), (b"bad line\r\n", false)] {
        let broken = [&ringing[..ringing.len() - 2], line, b"\r\n"].concat();
        assert!(Message::parse(Bytes::from(broken.clone()), &limits).is_err());
        let p = Peek::new(&broken, &limits).unwrap();
        assert!(p.first_of([HeaderName::CallId]).is_ok());
        assert_eq!(p.first_of([HeaderName::Route]).is_err(), route_error);
    }
}
