//! "Answer what you can": the identifying headers of a request the parser's limits refused.
//!
//! A request over a limit (1,000 Via or Route values, a 9 KB header line, 65 KB on a stream)
//! cannot be parsed, by design: the limits exist so that such input costs no more than a scan.
//! It is still owed an answer when the sender can be named (docs/config.md `[limits]`): 513 for
//! a message over the size limit (RFC 3261 §18.1.1, §21.5.14), 400 with the limit as reason
//! (§21.4.1) for the others. A response needs only the top Via, From, To, Call-ID and CSeq
//! (§8.2.6.2), so this module reads those from the raw bytes, line by line, without the limits
//! that refused the message, and writes them into a small stand-in request that the response
//! builder can answer.
//!
//! Only the **first** Via value is kept. It is the sender's (§18.2.1: each element adds its Via
//! on top), and it is all the response needs to reach it (§18.2.2). Copying 1,000 Via values
//! into the answer would both exceed the limits of the sender's own parser and turn herald into
//! an amplifier; a path that long is a loop or an attack, and the hop that sent it is the one
//! that must learn of the refusal.

use herald_sip::Limits;

/// The headers a response copies (RFC 3261 §8.2.6.2), in the order they are written.
const WANTED: [(&[u8], &[u8]); 5] =
    [(b"via", b"v"), (b"from", b"f"), (b"to", b"t"), (b"call-id", b"i"), (b"cseq", b"cseq")];

/// A stand-in for the request at the front of `raw` (its method, `sip:invalid.invalid`, and the
/// five headers), or `None` when one of the five is missing, is not complete in `raw`, or is
/// itself longer than `limits.max_header_line`. `raw` may end anywhere: a stream message over
/// the size limit is answered from the header lines that did arrive.
pub(super) fn stand_in(raw: &[u8], limits: &Limits) -> Option<Vec<u8>> {
    let (start, mut pos) = line_at(raw, 0)?;
    let method = method_of(start, limits);
    let mut found: [Option<&[u8]>; 5] = [None; 5];
    // The header being read: (name, value start, value end); folded lines extend it.
    let mut current: Option<(&[u8], usize, usize)> = None;
    loop {
        let Some((line, next)) = line_at(raw, pos) else {
            // Bytes without a line end yet: the header before them is complete unless they may
            // still be folded onto it.
            if raw.get(pos).is_some_and(|b| !matches!(b, b' ' | b'\t')) {
                if let Some((name, from, to)) = current.take() {
                    keep(&mut found, name, &raw[from..to]);
                }
            }
            break;
        };
        let folded = matches!(line.first(), Some(b' ' | b'\t'));
        if folded {
            if let Some(c) = current.as_mut() {
                c.2 = pos + line.len();
            }
        } else {
            if let Some((name, from, to)) = current.take() {
                keep(&mut found, name, &raw[from..to]);
            }
            if line.is_empty() {
                break; // end of the header section
            }
            // A line without a colon is skipped: the limits refused this message, not its syntax.
            current = memchr::memchr(b':', line).map(|c| (line[..c].trim_ascii(), pos + c + 1, pos + line.len()));
        }
        if found.iter().all(Option::is_some) {
            break;
        }
        pos = next;
    }
    let [Some(via), Some(from), Some(to), Some(call_id), Some(cseq)] = found else { return None };
    let via = first_value(via);
    if [via, from, to, call_id, cseq].iter().any(|v| v.is_empty() || v.len() > limits.max_header_line) {
        return None;
    }
    let mut head = Vec::with_capacity(64 + via.len() + from.len() + to.len() + call_id.len() + cseq.len());
    head.extend_from_slice(method);
    head.extend_from_slice(b" sip:invalid.invalid SIP/2.0\r\n");
    for (name, value) in [(&b"Via"[..], via), (b"From", from), (b"To", to), (b"Call-ID", call_id), (b"CSeq", cseq)] {
        head.extend_from_slice(name);
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    Some(head)
}

/// The line starting at `pos` without its line end, and where the next one starts; `None` when
/// no line end follows (the rest has not arrived, or was cut off).
fn line_at(raw: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let rest = raw.get(pos..)?;
    let nl = memchr::memchr(b'\n', rest)?;
    let line = &rest[..nl];
    Some((line.strip_suffix(b"\r").unwrap_or(line), pos + nl + 1))
}

/// The request's method when the start line begins with a token (RFC 3261 §25.1), so that an
/// ACK is recognised (never answered, §17.2.1); OPTIONS otherwise, as the answer copies no more
/// of the start line than that.
fn method_of<'a>(start: &'a [u8], limits: &Limits) -> &'a [u8] {
    let token = start.split(|b| *b == b' ').next().unwrap_or(b"");
    let ok = !token.is_empty()
        && token.len() <= 32.min(limits.max_start_line)
        && token.iter().all(|b| b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(b));
    if ok {
        token
    } else {
        b"OPTIONS"
    }
}

/// Records `value` as the first occurrence of the wanted header `name` (long or compact form).
fn keep<'a>(found: &mut [Option<&'a [u8]>; 5], name: &[u8], value: &'a [u8]) {
    for (i, (long, compact)) in WANTED.iter().enumerate() {
        if found[i].is_none() && (name.eq_ignore_ascii_case(long) || name.eq_ignore_ascii_case(compact)) {
            found[i] = Some(value.trim_ascii());
        }
    }
}

/// The first value of a Via header line that may carry many (`Via: a, b, c`, RFC 3261 §7.3.1):
/// up to the first comma outside a quoted string (a Via parameter may be quoted, §25.1).
fn first_value(via: &[u8]) -> &[u8] {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in via.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => return via[..i].trim_ascii(),
            _ => {}
        }
    }
    via.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(raw: &str) -> Option<String> {
        stand_in(raw.as_bytes(), &Limits::default()).map(|h| String::from_utf8(h).unwrap())
    }

    const HEADERS: &str =
        "From: <sip:b@example.com>;tag=1\r\nTo: <sip:a@example.com>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\n";

    #[test]
    fn keeps_the_first_via_value_of_a_thousand() {
        let mut raw = String::from("OPTIONS sip:a@example.com SIP/2.0\r\n");
        raw += "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1;x=\"a,b\", SIP/2.0/UDP h2;branch=z9hG4bK2\r\n";
        for i in 0..1000 {
            raw += &format!("v: SIP/2.0/UDP 198.51.100.{};branch=z9hG4bKx{i}\r\n", i % 250);
        }
        raw += HEADERS;
        raw += "Content-Length: 0\r\n\r\n";
        let head = text(&raw).unwrap();
        assert_eq!(
            head,
            format!(
                "OPTIONS sip:invalid.invalid SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1;x=\"a,b\"\r\n{HEADERS}\r\n"
            )
        );
    }

    #[test]
    fn reads_compact_and_folded_headers_and_an_unfinished_message() {
        let raw = "INVITE sip:a@example.com SIP/2.0\r\nv: SIP/2.0/TCP h;branch=z9hG4bK1\r\nf: <sip:b@x>\r\n ;tag=9\r\n\
                   t: <sip:a@x>\r\ni: id\r\nCSeq: 2 INVITE\r\nSubject: cut off in the midd";
        let head = text(raw).unwrap();
        assert!(head.starts_with("INVITE sip:invalid.invalid SIP/2.0\r\n"), "{head}");
        assert!(head.contains("From: <sip:b@x>\r\n ;tag=9\r\n"), "{head}");
        assert!(head.contains("Call-ID: id\r\n"), "{head}");
    }

    #[test]
    fn refuses_what_it_cannot_answer() {
        let base = format!("OPTIONS sip:a SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n{HEADERS}\r\n");
        assert!(text(&base).is_some());
        // A header missing, or not complete yet (its line may still be folded on).
        assert!(text(&base.replace("Call-ID: c1\r\n", "")).is_none());
        let cut = &base[..base.find("CSeq").unwrap() + 10];
        assert!(text(cut).is_none());
        // One of the five over the line limit.
        let long = base.replace("Call-ID: c1", &format!("Call-ID: {}", "x".repeat(9000)));
        assert!(text(&long).is_none());
        // Headers after the empty line are body.
        let body = base.replace("Call-ID: c1\r\n", "").replace("\r\n\r\n", "\r\n\r\nCall-ID: c1\r\n");
        assert!(text(&body).is_none());
        assert!(text("garbage").is_none());
    }

    #[test]
    fn a_bad_method_becomes_options() {
        let raw = format!("{} sip:a SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n{HEADERS}\r\n", "\u{1}X");
        assert!(text(&raw).unwrap().starts_with("OPTIONS "));
    }
}
