//! The copy of a response that goes upstream: its top Via (ours) cut out (RFC 3261 §16.7 step
//! 9, §18.2.2), provided the Via below it, which becomes the top one, is well-formed (§16.7
//! step 3).
//!
//! Per forwarded response this ran the Editor (an edit list, a sort, a buffer grown twice), the
//! list iterator adapters of `Message::list_values` and a full parse of the second Via: about
//! 2,200 instructions, three times per proxied call. Now the two values come from the scan's
//! split of the Via lines; the top one, alone on its line or first of one (SIPp's
//! `[last_Via:]` writes them all on one line), is cut out by its byte range into one buffer of
//! the final size; the second is nearly always the request's top Via copied back (§8.2.6.2),
//! which the receipt check parsed.
//!
//! The cut stays beside the Editor's `remove_list_value` although the Editor now writes its
//! copy in one pass: measured again in one build (session 16, callgrind, 500 SIPp calls), every
//! response through the Editor instead cost 1,196 instructions more per call over UDP and 1,852
//! over TCP (`without_top_via` about 740 per response through the Editor against 310 cut).

use bytes::{Buf, Bytes, BytesMut};
use herald_sip::headers::{ListIter, ListValue, Via};
use herald_sip::{Editor, HeaderField, HeaderName, Message, Span};

/// The first two Via values of `msg`, in order; `None` when it has fewer, or when a Via line
/// up to the second value does not split (the first two items of `Message::list_values`).
/// The scan split the lines already (`Message::top_two_via_spans`): only the lines they sit on
/// are looked up. Lines that did not all split cleanly are split again here.
pub(super) fn top_two_vias(msg: &Message) -> Option<(ListValue<'_>, ListValue<'_>)> {
    let first = msg.field_index(HeaderName::Via)?;
    let Some((top, second)) = msg.top_two_via_spans() else { return split_top_two_vias(msg, first) };
    // Every Via line yields a value, so the top one is on the first line, and the second on it
    // too or on the next Via line.
    // (Were a range anywhere else, a bug, the lines are walked instead.)
    let headers = msg.headers();
    let holds = |h: &HeaderField, s: Span| h.value.start <= s.start && s.end <= h.value.end;
    if !holds(&headers[first], top) {
        return split_top_two_vias(msg, first);
    }
    let second_field = if holds(&headers[first], second) {
        first
    } else {
        match headers[first + 1..].iter().position(|h| h.name == HeaderName::Via && holds(h, second)) {
            Some(i) => first + 1 + i,
            None => return split_top_two_vias(msg, first),
        }
    };
    let value = |field, span| ListValue { field, span, bytes: msg.slice(span) };
    Some((value(first, top), value(second_field, second)))
}

/// [`top_two_vias`] by walking the Via lines from the first, `first`.
fn split_top_two_vias(msg: &Message, first: usize) -> Option<(ListValue<'_>, ListValue<'_>)> {
    let mut top = None;
    for (field, h) in msg.headers().iter().enumerate().skip(first) {
        if h.name != HeaderName::Via {
            continue;
        }
        for value in ListIter::new(msg.value_of(h)) {
            let (at, bytes) = value.ok()?;
            let value = ListValue { field, span: h.value.sub(at, at + bytes.len()), bytes };
            match top {
                None => top = Some(value),
                Some(top) => return Some((top, value)),
            }
        }
    }
    None
}

/// Whether `next`, the Via below ours in a response, is well-formed: it is what the receiver
/// matches its transaction by (§17.1.3), and a malformed one must not go upstream (fuzz input
/// fuzz/regressions/engine_pipeline/lower-via-malformed-response). When it is byte for byte
/// the top Via of `request` (the request the response answers, as received), it parsed when
/// the request was checked (`Message::checked_top_via_value`); otherwise it is parsed here.
fn next_via_well_formed(next: &[u8], request: Option<&Message>) -> bool {
    if request.and_then(Message::checked_top_via_value) == Some(next) {
        return true;
    }
    Via::parse(next).is_ok()
}

/// The bytes the Editor's `remove_list_value(top)` removes when `top`, the first Via value, is
/// alone on its line (the line) or is followed on it by `next` (the value, the comma and the
/// LWS up to `next`); `None` in any other shape.
fn top_via_cut(resp: &Message, top: ListValue<'_>, next: ListValue<'_>) -> Option<Span> {
    let h = resp.headers()[top.field];
    if top.span == h.value {
        return Some(h.line);
    }
    if next.field != top.field || top.span.start != h.value.start {
        return None;
    }
    // SIPp's `[last_Via:]` writes all Vias on one line. The Editor removes up to the first
    // non-LWS byte after the comma that follows the value: where the list split put `next`,
    // when only blanks stand between the value and that comma.
    let s = resp.as_bytes();
    let gap = &s[top.span.end as usize..next.span.start as usize];
    let blanks = gap.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    (gap.get(blanks) == Some(&b',')).then_some(Span { start: top.span.start, end: next.span.start })
}

/// `resp` without its top Via value `top` (`next` is the one below it), with Content-Length
/// (mandatory over streams, RFC 3261 §18.3, for a copy that may leave over TCP). In the usual
/// shapes (see [`top_via_cut`]), in a response that has Content-Length, the Via is cut out by
/// its byte range into a buffer of the final size; any other case goes through the Editor
/// (`remove_list_value`, `ensure_content_length`), which writes the same bytes for those.
pub(super) fn without_top_via(resp: &Message, top: ListValue<'_>, next: ListValue<'_>) -> Bytes {
    if let Some(cut) = top_via_cut(resp, top, next).filter(|_| resp.content_length().is_some()) {
        let s = resp.as_bytes();
        let mut out = BytesMut::with_capacity(s.len() - cut.len());
        out.extend_from_slice(&s[..cut.start as usize]);
        out.extend_from_slice(&s[cut.end as usize..]);
        return out.freeze();
    }
    let mut e = Editor::new(resp);
    e.remove_list_value(top);
    e.ensure_content_length();
    e.finish()
}

/// The response without its top Via (ours), as forwarded upstream (§16.7 step 9). `None` when
/// no well-formed Via remains: §16.7 step 3, the response was meant for this element (or was
/// mangled on the way) and must not be forwarded. The Vias below the second travel on as
/// written (§16.3 step 1: the receipt check parsed only the top one). The engine forwards with
/// [`strip_top_via_owned`]; this form is what the tests hold it to.
#[cfg(test)]
pub(super) fn strip_top_via(resp: &Message, request: Option<&Message>) -> Option<Bytes> {
    let (top, next) = top_two_vias(resp)?;
    next_via_well_formed(next.bytes, request).then(|| without_top_via(resp, top, next))
}

/// [`strip_top_via`] of a response this element has no further use for: in the usual shapes
/// (those [`without_top_via`] cuts by range) the received buffer itself becomes the copy when
/// nothing else holds it, what precedes the cut moved up against what follows it (the start
/// line and at most the Via line's name, some 30 octets), instead of a new buffer of the
/// whole response (issue 21: an allocation, a copy of the response and a free, three times per
/// proxied call). The bytes are those of [`strip_top_via`] (`tests::in_place_copies_are_the_borrowed_ones`).
pub(super) fn strip_top_via_owned(resp: Message, request: Option<&Message>) -> Option<Bytes> {
    let (top, next) = top_two_vias(&resp)?;
    if !next_via_well_formed(next.bytes, request) {
        return None;
    }
    let Some(cut) = top_via_cut(&resp, top, next).filter(|_| resp.content_length().is_some()) else {
        return Some(without_top_via(&resp, top, next));
    };
    let (start, len) = (cut.start as usize, cut.len());
    Some(match resp.into_buffer().try_into_mut() {
        Ok(mut buf) => {
            buf.copy_within(..start, len);
            buf.advance(len);
            buf.freeze()
        }
        // Shared (a stream's read buffer, a traced copy): copied as `without_top_via` does.
        Err(buf) => {
            let mut out = BytesMut::with_capacity(buf.len() - len);
            out.extend_from_slice(&buf[..start]);
            out.extend_from_slice(&buf[start + len..]);
            out.freeze()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_sip::Limits;

    fn parse(s: &str) -> Message {
        let mut m = Message::parse(Bytes::copy_from_slice(s.as_bytes()), &Limits::default()).unwrap();
        m.check().unwrap();
        m
    }

    const CALLER_VIA: &str = "SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKcaller";

    fn request() -> Message {
        parse(&format!(
            "INVITE sip:b@h SIP/2.0\r\nVia: {CALLER_VIA}\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\n\
             Call-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        ))
    }

    fn response(vias: &str, tail: &str) -> Message {
        parse(&format!(
            "SIP/2.0 200 OK\r\n{vias}From: <sip:a@h>;tag=1\r\nTo: <sip:b@h>;tag=2\r\nCall-ID: c\r\n\
             CSeq: 1 INVITE\r\n{tail}"
        ))
    }

    /// What the forwarded copy was before the cut by byte range: the Editor's.
    fn by_editor(resp: &Message) -> Bytes {
        let top = resp.list_values(HeaderName::Via).next().unwrap().unwrap();
        let mut e = Editor::new(resp);
        e.remove_list_value(top);
        e.ensure_content_length();
        e.finish()
    }

    #[test]
    fn the_copy_is_the_editors_in_every_shape() {
        let ours = "SIP/2.0/UDP 198.51.100.1;branch=z9hG4bKours";
        let shapes = [
            // One Via per line, with and without Content-Length and a body.
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), "\r\n"),
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), "Content-Length: 4\r\n\r\nbody"),
            // Ours first of a line, or alone on a line with the rest on one, compact name, folded.
            (format!("Via: {ours}, {CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("v: {ours}\r\nv: {CALLER_VIA} ,\r\n SIP/2.0/TCP h;branch=z9hG4bK3\r\n"), "l: 0\r\n\r\n"),
            (format!("Via: {ours}\r\n\t;received=192.0.2.9\r\nVia: {CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            // All on one line (SIPp's `[last_Via:]`), with blanks, folding, or a third value.
            (format!("Via: {ours} \t, \t{CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours},{CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\n ,\r\n\t{CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours},\r\n {CALLER_VIA}, SIP/2.0/TCP h;branch=z9hG4bK3\r\n"), "l: 0\r\n\r\n"),
            (format!("Via: {ours}, {CALLER_VIA}\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK3\r\n"), "\r\n"),
        ];
        for (vias, tail) in shapes {
            let resp = response(&vias, tail);
            let (top, next) = top_two_vias(&resp).unwrap();
            assert_eq!(top, resp.list_values(HeaderName::Via).next().unwrap().unwrap());
            assert_eq!(next, resp.list_values(HeaderName::Via).nth(1).unwrap().unwrap());
            assert!(resp.top_two_via_spans().is_some());
            let first = resp.field_index(HeaderName::Via).unwrap();
            assert_eq!(split_top_two_vias(&resp, first), Some((top, next)));
            let copy = strip_top_via(&resp, Some(&request())).unwrap();
            assert_eq!(copy, by_editor(&resp), "{vias}{tail}");
            let copy = Message::parse(copy, &Limits::default()).unwrap();
            assert_eq!(copy.via_count(), resp.via_count() - 1);
            assert!(copy.content_length().is_some());
        }
    }

    /// The copy made in the received buffer is the one made beside it, in every shape, whether
    /// the buffer is the response's alone (edited in place) or shared (copied).
    #[test]
    fn in_place_copies_are_the_borrowed_ones() {
        let ours = "SIP/2.0/UDP 198.51.100.1;branch=z9hG4bKours";
        let shapes = [
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), "\r\n"),
            (format!("Via: {ours}, {CALLER_VIA}\r\n"), "Content-Length: 4\r\n\r\nbody"),
            (format!("v: {ours}\r\nv: {CALLER_VIA} ,\r\n SIP/2.0/TCP h;branch=z9hG4bK3\r\n"), "l: 0\r\n\r\n"),
            (format!("Via: {ours} \t, \t{CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\n ,\r\n\t{CALLER_VIA}\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\nVia: garbage;;\r\n"), "Content-Length: 0\r\n\r\n"),
            (format!("Via: {ours}\r\n"), "Content-Length: 0\r\n\r\n"),
        ];
        for (vias, tail) in shapes {
            let want = strip_top_via(&response(&vias, tail), Some(&request()));
            // A buffer of its own, as a received datagram's: edited in place where it is cut.
            let alone = response(&vias, tail);
            let at = alone.as_bytes().as_ptr();
            let got = strip_top_via_owned(alone, Some(&request()));
            assert_eq!(got, want, "{vias}{tail}");
            if let (Some(got), Some(_)) = (&got, &want) {
                let again = response(&vias, tail);
                let (top, next) = top_two_vias(&again).unwrap();
                let cut = top_via_cut(&again, top, next).filter(|_| !tail.starts_with("\r\n"));
                let cut_len = cut.map_or(0, |c| c.len());
                assert_eq!(got.as_ptr() == at.wrapping_add(cut_len), cut.is_some(), "in place: {vias}{tail}");
            }
            // A shared buffer: copied, the same bytes.
            let shared = response(&vias, tail);
            let held = shared.buffer().clone();
            assert_eq!(strip_top_via_owned(shared, Some(&request())), want, "{vias}{tail}");
            drop(held);
        }
    }

    #[test]
    fn vias_that_did_not_split_cleanly_are_split_again() {
        // A third Via line with an empty element: the scan's split is not used, the first two
        // values are still what the list iterator yields.
        let s =
            format!("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP p;branch=z9hG4bKp\r\nVia: {CALLER_VIA}\r\nVia: a,,b\r\n\r\n");
        let resp = Message::parse(Bytes::from(s), &Limits::default()).unwrap();
        assert_eq!(resp.top_two_via_spans(), None);
        let mut listed = resp.list_values(HeaderName::Via);
        let want = (listed.next().unwrap().unwrap(), listed.next().unwrap().unwrap());
        assert_eq!(top_two_vias(&resp), Some(want));
    }

    #[test]
    fn the_usual_shapes_are_cut_by_range() {
        let ours = "SIP/2.0/UDP 198.51.100.1;branch=z9hG4bKours";
        for (vias, cut) in [
            (format!("Via: {ours}\r\nVia: {CALLER_VIA}\r\n"), true),
            (format!("Via: {ours}, {CALLER_VIA}\r\n"), true),
            (format!("Via: {ours} ,{CALLER_VIA}\r\n"), true),
            (format!("Via: {ours}\r\n ,{CALLER_VIA}\r\n"), false),
        ] {
            let resp = response(&vias, "Content-Length: 0\r\n\r\n");
            let (top, next) = top_two_vias(&resp).unwrap();
            assert_eq!(top_via_cut(&resp, top, next).is_some(), cut, "{vias}");
        }
    }

    #[test]
    fn a_malformed_next_via_is_not_forwarded() {
        let ours = "Via: SIP/2.0/UDP 198.51.100.1;branch=z9hG4bKours\r\n";
        let tail = "Content-Length: 0\r\n\r\n";
        for bad in ["Via: SIP/2.0/UDP\r\n", "Via: garbage;;\r\n", "Via: SIP/2.0/UDP h:99999;branch=z\r\n"] {
            let resp = response(&format!("{ours}{bad}"), tail);
            assert_eq!(strip_top_via(&resp, Some(&request())), None, "{bad}");
            assert_eq!(strip_top_via(&resp, None), None, "{bad}");
        }
        // Only ours: the response was for this element.
        assert_eq!(strip_top_via(&response(ours, tail), Some(&request())), None);
    }

    #[test]
    fn the_next_via_is_parsed_unless_it_is_the_requests_top_via() {
        let req = request();
        assert!(next_via_well_formed(CALLER_VIA.as_bytes(), Some(&req)));
        assert!(next_via_well_formed(CALLER_VIA.as_bytes(), None));
        // A well-formed Via the request did not carry (a received parameter added) is parsed.
        let fixed = format!("{CALLER_VIA};received=192.0.2.9");
        assert!(next_via_well_formed(fixed.as_bytes(), Some(&req)));
        assert!(!next_via_well_formed(b"SIP/2.0/UDP", Some(&req)));
        // Only a checked request vouches for its top Via.
        let unchecked = Message::parse(req.buffer().clone(), &Limits::default()).unwrap();
        assert_eq!(unchecked.checked_top_via_value(), None);
        assert_eq!(req.checked_top_via_value(), Some(CALLER_VIA.as_bytes()));
    }
}
