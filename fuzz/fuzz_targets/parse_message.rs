//! Message::parse of arbitrary bytes; on success every accessor, the canonical form and a
//! proxy-style Editor pass must behave.
#![no_main]

use bytes::Bytes;
use herald_sip::editor::canonical;
use herald_sip::{Editor, HeaderName, Limits, Message};
use libfuzzer_sys::fuzz_target;

/// Limits for re-parsing derived bytes: the originals plus exactly the growth the derived form
/// may legitimately add (long header names and ": " in the canonical form, one Via line and a
/// longer Max-Forwards value from the editor).
fn relaxed(limits: &Limits, headers: usize) -> Limits {
    Limits {
        max_message_size: limits.max_message_size + 32 * (headers + 2),
        max_headers: limits.max_headers + 2,
        max_header_line: limits.max_header_line + 32,
        max_via: limits.max_via + 1,
        ..limits.clone()
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(msg) = Message::parse(Bytes::copy_from_slice(data), &limits) else {
        return;
    };
    let valid = msg.validate_all().is_ok();
    let _ = msg.validate();
    for h in msg.headers() {
        let _ = msg.typed(h);
    }
    let _ = msg.request_uri();
    let _ = msg.top_via();
    let _ = msg.routes().count();
    let _ = msg.contacts().count();
    let loose = relaxed(&limits, msg.headers().len());

    let canon = canonical(&msg);
    let reparsed = Message::parse(canon.clone(), &loose);
    if valid {
        let re = reparsed.unwrap_or_else(|e| panic!("canonical form of a valid message does not parse: {e}"));
        re.validate_all().unwrap_or_else(|e| panic!("canonical form of a valid message does not validate: {e}"));
        assert_eq!(canonical(&re), canon, "canonical form is not idempotent");
        assert_eq!(re.body(), msg.body(), "canonical form changed the body");
        assert_eq!(re.headers().len(), msg.headers().len(), "canonical form changed the header count");
    }

    // A stateless proxy's edits: new top Via, decremented Max-Forwards, pop the top Route.
    let mut e = Editor::new(&msg);
    e.prepend_header("Via", b"SIP/2.0/UDP fuzz.invalid:5060;branch=z9hG4bKfuzz").set_max_forwards(69);
    if let Some(Ok(top)) = msg.list_values(HeaderName::Route).next() {
        e.remove_list_value(top);
    }
    let expected_len = e.len();
    let out = e.finish();
    assert_eq!(out.len(), expected_len, "Editor::len disagrees with its output");
    let edited = Message::parse(out, &loose).unwrap_or_else(|err| panic!("edited message does not parse: {err}"));
    assert_eq!(edited.body(), msg.body(), "edit changed the body");
    if valid {
        assert_eq!(edited.max_forwards().ok(), Some(Some(69)), "Max-Forwards not set");
    }
});
