//! The Via values as [`super::Head::scan`] splits them while it counts them against
//! `max_via`: how many there are and where the top one is, so that the receipt checks
//! ([`crate::Message::check`]) parse the top value without splitting the lines a second time.
//!
//! Callgrind counted the second split (a search for a separator in every Via line, and the list
//! iterator over the two values of every response's line) at about 1,000 instructions per
//! proxied call.

use crate::headers::{ListIter, PlainVia};
use crate::scan;
use crate::span::Span;

/// What the scan learnt of the Via lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ViaSplit {
    /// Whether every Via line split as [`ListIter`] splits it, without an error and into at
    /// least one value. Only then do `count` and `top` stand for the lines; otherwise the
    /// receipt checks split them again, and report what is wrong as they always did.
    pub clean: bool,
    /// How many values the lines hold.
    pub count: u32,
    /// The top value (the first of the first line), as a range of the message buffer.
    pub top: Span,
    /// The value below it (where a proxy forwards a response, RFC 3261 §18.2.2), when `count`
    /// is two or more.
    pub second: Span,
    /// The top value read as a [`PlainVia`] (places relative to `top.start`), when it is one
    /// (and `clean`: else it means nothing): read while its line is split, where the split
    /// would otherwise search the value for its end and the receipt check read it again.
    pub top_plain: Option<PlainVia>,
}

impl Default for ViaSplit {
    fn default() -> ViaSplit {
        ViaSplit { clean: true, count: 0, top: Span::default(), second: Span::default(), top_plain: None }
    }
}

impl ViaSplit {
    /// Notes the Via line whose value `v` starts at `at` in the buffer, and returns how many
    /// values it counts for the `max_via` limit (`count_values` of a line that does not split
    /// cleanly, as before).
    pub fn add_line(&mut self, v: &[u8], at: usize, count_values: impl Fn(&[u8]) -> usize) -> usize {
        if !self.clean {
            return count_values(v);
        }
        let parts = match self.count {
            0 => self.split_top(v),
            _ => split(v),
        };
        match parts {
            Some((n, first, second)) => {
                let shifted = |s: Span| Span::new(at + s.start as usize, at + s.end as usize);
                match self.count {
                    0 => {
                        self.top = shifted(first);
                        self.second = second.map_or(Span::default(), shifted);
                    }
                    1 => self.second = shifted(first),
                    _ => {}
                }
                self.count += n as u32;
                n
            }
            None => {
                self.clean = false;
                count_values(v)
            }
        }
    }

    /// [`split`] of the first Via line, its top value read as a [`PlainVia`] on the way when
    /// it is one (kept in `top_plain` when the line splits cleanly).
    fn split_top(&mut self, v: &[u8]) -> Option<(usize, Span, Option<Span>)> {
        let Some(end) = PlainVia::read_prefix(v, &mut self.top_plain) else { return split(v) };
        // A plain value holds no ',', '"' or '<' (its octets are the pattern's, digits, dots
        // and token and value characters) and ends at the end of `v` or at a ',': where the
        // search of `split` stops, found without the search.
        split_at(v, (end < v.len()).then_some(end))
    }
}

/// The number of values of one line as [`ListIter`] yields them, and the first and second
/// ones' ranges in `v`: `None` when it yields an error (an unbalanced quote or '<', an empty element) or
/// nothing. A clean split has as many values as top-level commas plus one, which is what the
/// limit counts.
fn split(v: &[u8]) -> Option<(usize, Span, Option<Span>)> {
    split_at(v, scan::find_any(v, 0, [b',', b'"', b'<']))
}

/// [`split`] of `v` whose first ',', '"' or '<' is at `k`. A line with none is one value,
/// all of it: the scan trimmed its LWS, as the iterator would.
#[inline(always)]
fn split_at(v: &[u8], k: Option<usize>) -> Option<(usize, Span, Option<Span>)> {
    let Some(k) = k else {
        return (!v.is_empty()).then(|| (1, Span::new(0, v.len()), None));
    };
    // Two values and nothing quoted or bracketed (`Via: ours, theirs` in the responses a proxy
    // forwards, as SIPp's `[last_Via:]` writes them): split at the comma, each side trimmed as
    // the iterator trims it. The iterator's walk cost about 170 instructions per such line.
    if v[k] == b',' && scan::find_any(v, k + 1, [b',', b'"', b'<']).is_none() {
        let first_start = scan::skip_lws(v, 0);
        let first_end = scan::trim_lws_end(v, k).max(first_start);
        let second_start = scan::skip_lws(v, k + 1);
        let second_end = scan::trim_lws_end(v, v.len()).max(second_start);
        if first_end == first_start || second_end == second_start {
            return None;
        }
        return Some((2, Span::new(first_start, first_end), Some(Span::new(second_start, second_end))));
    }
    split_listed(v)
}

/// [`split`] of a line with quotes, angle brackets or more than one comma, by the list
/// iterator: out of line (and cold), so that the scan's Via counting, where [`split`] is
/// inlined, keeps the registers of its usual lines (one or two plain values) free.
#[cold]
#[inline(never)]
fn split_listed(v: &[u8]) -> Option<(usize, Span, Option<Span>)> {
    let mut n = 0;
    let (mut first, mut second) = (Span::default(), None);
    for value in ListIter::new(v) {
        let (at, bytes) = value.ok()?;
        match n {
            0 => first = Span::new(at, at + bytes.len()),
            1 => second = Some(Span::new(at, at + bytes.len())),
            _ => {}
        }
        n += 1;
    }
    (n > 0).then_some((n, first, second))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clean lines split as the list iterator splits them; others are left to it.
    #[test]
    fn splits_as_the_list_iterator_does() {
        let lines: [&[u8]; 15] = [
            b"SIP/2.0/UDP h;branch=z9hG4bK1",
            b"SIP/2.0/UDP a;branch=z9hG4bK1;rport, SIP/2.0/UDP b;branch=z9hG4bK2",
            b"SIP/2.0/UDP a , \r\n SIP/2.0/UDP b \t",
            b" \tSIP/2.0/UDP a,SIP/2.0/UDP b",
            b",SIP/2.0/UDP b",
            b"SIP/2.0/UDP a, \r\n ",
            b"SIP/2.0/UDP a, SIP/2.0/UDP b;x=<c,d>",
            b"SIP/2.0/UDP a;branch=z9hG4bK1, SIP/2.0/UDP b;received=\"x,y\"",
            b"SIP/2.0/UDP a ,\r\n SIP/2.0/TCP b,SIP/2.0/UDP c",
            b"SIP/2.0/UDP a,,SIP/2.0/UDP b",
            b"SIP/2.0/UDP a,",
            b"SIP/2.0/UDP a;x=\"open",
            b"SIP/2.0/UDP a;x=<b",
            b"",
            b"SIP/2.0/UDP a;x=\"q\"",
        ];
        for v in lines {
            let listed: Vec<_> = ListIter::new(v).collect();
            let span = |r: &Result<(usize, &[u8]), _>| r.map(|(at, b)| Span::new(at, at + b.len())).unwrap();
            let want = match listed.iter().all(|r| r.is_ok()) && !listed.is_empty() {
                true => Some((listed.len(), span(&listed[0]), listed.get(1).map(span))),
                false => None,
            };
            assert_eq!(split(v), want, "{:?}", String::from_utf8_lossy(v));
        }
    }

    /// A first line whose top value is read as a plain Via on the way splits as it splits
    /// without that read, and the plain read is the top value's own
    /// ([`PlainVia::read`] of it): over Via lines built of plain and other values, commas,
    /// white space, quotes and brackets.
    #[test]
    fn the_top_value_read_on_the_way_is_the_split_ones() {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just("SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKf3a9c0d1e2b34a5c.0"),
            Just("SIP/2.0/UDP 127.0.0.1:19101;branch=z9hG4bK-29734-1-0;rport"),
            Just("SIP/2.0/UDP 192.0.2.1"),
            Just("SIP/2.0/TCP 192.0.2.1:5060;received=192.0.2.9;branch=z9hG4bK1"),
            Just("SIP/2.0/UDP h;branch=z9hG4bK2"),
            Just("SIP/2.0/UDP 192.0.2.1;x=\"a,b\""),
            Just("SIP/2.0/UDP 192.0.2.1;x=<c,d>"),
            Just("SIP/2.0/UDP 192.0.2.1 "),
            Just(""),
        ];
        let sep = prop_oneof![Just(","), Just(", "), Just(" ,"), Just(",\r\n "), Just(",,")];
        proptest::proptest!(|(first in value.clone(), rest in proptest::collection::vec((sep, value), 0..3))| {
            let line = format!("{first}{}", rest.iter().map(|(s, v)| format!("{s}{v}")).collect::<String>());
            let v = line.trim_matches(|c| c == ' ' || c == '\t').as_bytes();
            let mut read = ViaSplit::default();
            let parts = read.split_top(v);
            prop_assert_eq!(parts, split(v), "{}", line);
            if let (Some((_, top, _)), Some(plain)) = (parts, read.top_plain) {
                prop_assert_eq!(Some(plain), PlainVia::read(&v[top.range()]), "{}", line);
            }
            // A plain top value right before its comma (or alone) is read on the way.
            if let Some((_, top, _)) = parts {
                let at_comma = matches!(v.get(top.end as usize), None | Some(b','));
                if at_comma && PlainVia::read(&v[top.range()]).is_some() {
                    prop_assert!(read.top_plain.is_some(), "{}", line);
                }
            }
        });
    }

    #[test]
    fn the_top_value_is_the_first_of_the_first_line() {
        let mut vias = ViaSplit::default();
        let count = |v: &[u8]| v.iter().filter(|b| **b == b',').count() + 1;
        assert_eq!(vias.add_line(b"SIP/2.0/UDP a, SIP/2.0/UDP b", 100, count), 2);
        assert_eq!(vias.add_line(b"SIP/2.0/UDP c", 200, count), 1);
        let (top, second) = (Span::new(100, 113), Span::new(115, 128));
        assert_eq!(vias, ViaSplit { clean: true, count: 3, top, second, top_plain: None });
        // A first line of one value: the second is the first of the next line.
        let mut vias = ViaSplit::default();
        vias.add_line(b"SIP/2.0/UDP a", 100, count);
        vias.add_line(b"SIP/2.0/UDP b, SIP/2.0/UDP c", 200, count);
        assert_eq!((vias.top, vias.second), (Span::new(100, 113), Span::new(200, 213)));
        assert_eq!(vias.add_line(b"SIP/2.0/UDP d,,e", 300, count), 3);
        assert!(!vias.clean);
    }
}
