//! The Call-ID of a raw datagram without parsing it, for a UDP receiver that only needs to know
//! which engine shard (and so which worker) a message belongs to before handing its bytes on
//! (herald-server's `dispatch::balance`). A full parse is ~3.6k instructions a message
//! (callgrind, issue 21 item 4); this scan reads each header line's name and nothing else.
//!
//! Its one promise: when it answers `Some(id)`, [`Message::parse`](crate::Message::parse) of the
//! same bytes either fails or gives a message whose [`Message::call_id`](crate::Message::call_id)
//! is `Ok(id)`. So it answers `None` whenever it is unsure: a line not ended by CRLF (a bare CR
//! or LF), a folded line (RFC 3261 §7.3.1: a line starting with SP or HT continues the one
//! before), a line starting with `c` or `i` without a colon, no Call-ID or two (RFC 3261 §20.8 allows one), a
//! value that is not `word ["@" word]` (§25.1), or an unterminated header section. Whitespace
//! between the name and the colon and after it is skipped, as the parser does (`HCOLON`,
//! §25.1); names match case-insensitively, `Call-ID` or its compact form `i` (§7.3.3).

use crate::headers::parse_call_id;
use crate::scan;

/// The Call-ID value of `datagram` (see the module docs), or `None` when unsure.
pub fn call_id(datagram: &[u8]) -> Option<&[u8]> {
    // Leading CRLFs are skipped by the parser (RFC 3261 §7.5); the start line is not read.
    let start = datagram.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let s = &datagram[start..];
    let mut found = None;
    // Lines end at LF, as the parser's do (`scan::find_lf`, its own search); each LF must
    // follow a CR. A CR elsewhere starts no line for the parser either: inside a name it
    // matches neither name, inside a Call-ID value it fails the value's check.
    let mut line = match scan::find_lf(s, 0) {
        Some(lf) if lf > 0 && s[lf - 1] == b'\r' => lf + 1, // past the start line
        _ => return None,
    };
    while let Some(lf) = scan::find_lf(s, line) {
        if s[lf - 1] != b'\r' || lf == line {
            return None; // a bare LF
        }
        let text = &s[line..lf - 1];
        line = lf + 1;
        let Some(&first) = text.first() else {
            // The empty line ends the header section (§7): the body is not read.
            return found;
        };
        // Only a line starting with either name followed by white space or the colon can be
        // a Call-ID (a name is a token, with neither in it): the others are not read further.
        let name_len = match first {
            b' ' | b'\t' => return None, // folded
            b'c' | b'C' if text.len() > 7 && text[..7].eq_ignore_ascii_case(b"call-id") => 7,
            b'i' | b'I' => 1,
            _ => continue,
        };
        let after_name = trim_start(&text[name_len..]);
        match after_name.first() {
            Some(b':') => {}
            // Another name that starts alike ("Call-IDs", "In-Reply-To").
            Some(&b) if b != b' ' && b != b'\t' && name_len == text.len() - after_name.len() => continue,
            // A name, white space, and no colon: not a header line the parser takes.
            _ => return None,
        }
        if found.is_some() {
            return None; // two Call-IDs
        }
        // The parser's own check of the value (`word ["@" word]`, RFC 3261 §25.1); trailing
        // white space fails it, so the value must end the line.
        match parse_call_id(trim_start(&after_name[1..])) {
            Ok(id) => found = Some(id.as_bytes()),
            Err(_) => return None,
        }
    }
    None // no empty line: the header section does not end
}

fn trim_start(v: &[u8]) -> &[u8] {
    let skip = v.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &v[skip..]
}

#[cfg(test)]
mod tests {
    //! The scan against the full parse: whenever the scan answers, the parse fails or has that
    //! Call-ID (generated messages with compact, repeated, folded, oddly spaced and oddly ended
    //! lines; arbitrary bytes; the RFC 4475/5118 torture messages).
    use super::call_id;
    use crate::{Limits, Message};
    use bytes::Bytes;
    use proptest::prelude::*;

    /// Whether the scan of `bytes` agrees with the parse; `Some(answered)` when it does.
    fn agrees(bytes: &[u8]) -> Result<bool, String> {
        let Some(scanned) = call_id(bytes) else { return Ok(false) };
        let Ok(msg) = Message::parse(Bytes::copy_from_slice(bytes), &Limits::default()) else { return Ok(true) };
        match msg.call_id() {
            Ok(id) if id.as_bytes() == scanned => Ok(true),
            other => Err(format!("scan {:?}, parse {other:?}", String::from_utf8_lossy(scanned))),
        }
    }

    fn message(lines: &[String], ending: &str) -> Vec<u8> {
        let mut m = String::from("INVITE sip:bob@example.com SIP/2.0\r\n");
        for l in lines {
            m += l;
            m += ending;
        }
        m += "\r\nbody Call-ID: not-this\r\n";
        m.into_bytes()
    }

    fn plain(call_id_line: &str) -> Vec<u8> {
        let lines = [
            "Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK-1".to_string(),
            "From: <sip:alice@example.com>;tag=1".into(),
            "To: <sip:bob@example.com>".into(),
            call_id_line.to_string(),
            "CSeq: 1 INVITE".into(),
            "Max-Forwards: 70".into(),
            "Content-Length: 0".into(),
        ];
        message(&lines, "\r\n")
    }

    #[test]
    fn reads_what_the_parser_reads() {
        for line in ["Call-ID: a84b4c76e66710@pc33.example.com", "call-id:x", "I: abc", "i :\tabc@d", "CALL-ID  :   z"]
        {
            let m = plain(line);
            let msg = Message::parse(Bytes::from(m.clone()), &Limits::default()).expect(line);
            assert_eq!(call_id(&m), msg.call_id().ok().map(str::as_bytes), "{line}");
        }
    }

    #[test]
    fn unsure_is_none() {
        let folded = plain("Call-ID: abc\r\n more");
        let two = plain("Call-ID: abc\r\ni: def");
        let odd = [
            plain("Call-ID: abc "),
            plain("Call-ID: a b"),
            plain("Call-ID: @abc"),
            plain("Call-ID: a@b@c"),
            plain("Call-ID:"),
            plain("X-No-Colon"),
            folded,
            two,
            plain("Call-ID: abc\rX: y"),
            plain("Call-ID: abc\nX: y"),
            b"INVITE sip:b@c SIP/2.0\r\nCall-ID: abc\r\n".to_vec(),
            b"INVITE sip:b@c SIP/2.0\nCall-ID: abc\n\n".to_vec(),
        ];
        for m in odd {
            assert_eq!(call_id(&m), None, "{}", String::from_utf8_lossy(&m));
        }
        assert_eq!(call_id(&plain("From: x")), None, "no Call-ID");
    }

    fn header_line() -> impl Strategy<Value = String> {
        let name = prop::sample::select(vec![
            "Call-ID",
            "call-id",
            "CALL-ID",
            "i",
            "I",
            "Call-ID ",
            "i\t",
            "Call-Id",
            "Xi",
            "Call-IDs",
            "In-Reply-To",
            "Call-ID-X",
            "c",
        ]);
        let value = "[a-zA-Z0-9@.!%*_+`'~()<>:\\\"/\\[\\]?{}= \t-]{0,12}";
        let other = prop::sample::select(vec![
            "Via: SIP/2.0/UDP h;branch=z9hG4bK-1",
            "From: <sip:a@b>;tag=1",
            "To: <sip:b@c>",
            "CSeq: 1 INVITE",
            "Max-Forwards: 70",
            "Content-Length: 0",
            " folded",
            "\tfolded",
            "No-Colon",
            "",
        ]);
        prop_oneof![
            (name.clone(), "[ \t]{0,2}", value).prop_map(|(n, ws, v)| format!("{n}:{ws}{v}")),
            // No colon.
            (name, "[ \t]{0,2}[a-z]{0,3}").prop_map(|(n, rest)| format!("{n}{rest}")),
            other.prop_map(str::to_string),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn generated_messages_scan_as_they_parse(
            lines in prop::collection::vec(header_line(), 0..10),
            ending in prop::sample::select(vec!["\r\n", "\r\n", "\r\n", "\n", "\r"]),
        ) {
            let m = message(&lines, ending);
            prop_assert_eq!(agrees(&m).map(|_| ()), Ok(()));
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_agree(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(agrees(&bytes).map(|_| ()), Ok(()));
        }
    }

    #[test]
    fn torture_messages_scan_as_they_parse() {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/sip-torture");
        let (mut dirs, mut files, mut answered) = (vec![root], 0, 0);
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("torture corpus").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "dat") {
                    let bytes = std::fs::read(&path).expect("readable");
                    files += 1;
                    answered += usize::from(agrees(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
                }
            }
        }
        assert!(files > 40, "torture corpus missing: {files} files");
        assert!(answered > 10, "the scan answered only {answered} of {files}");
    }
}
