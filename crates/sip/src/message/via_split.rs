//! The Via values as [`super::Head::scan`] splits them while it counts them against
//! `max_via`: how many there are and where the top one is, so that the receipt checks
//! ([`crate::Message::check`]) parse the top value without splitting the lines a second time.
//!
//! Callgrind counted the second split (a search for a separator in every Via line, and the list
//! iterator over the two values of every response's line) at about 1,000 instructions per
//! proxied call.

use crate::headers::ListIter;
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
}

impl Default for ViaSplit {
    fn default() -> ViaSplit {
        ViaSplit { clean: true, count: 0, top: Span::default() }
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
        match split(v) {
            Some((n, first)) => {
                if self.count == 0 {
                    self.top = Span::new(at + first.start as usize, at + first.end as usize);
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
}

/// The number of values of one line as [`ListIter`] yields them, and the first one's range in
/// `v`: `None` when it yields an error (an unbalanced quote or '<', an empty element) or
/// nothing. A clean split has as many values as top-level commas plus one, which is what the
/// limit counts. A line with no comma, quote or '<' is one value, all of it: the scan trimmed
/// its LWS, as the iterator would.
fn split(v: &[u8]) -> Option<(usize, Span)> {
    if scan::find_any(v, 0, [b',', b'"', b'<']).is_none() {
        return (!v.is_empty()).then(|| (1, Span::new(0, v.len())));
    }
    let mut n = 0;
    let mut first = Span::default();
    for value in ListIter::new(v) {
        let (at, bytes) = value.ok()?;
        if n == 0 {
            first = Span::new(at, at + bytes.len());
        }
        n += 1;
    }
    (n > 0).then_some((n, first))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clean lines split as the list iterator splits them; others are left to it.
    #[test]
    fn splits_as_the_list_iterator_does() {
        let lines: [&[u8]; 9] = [
            b"SIP/2.0/UDP h;branch=z9hG4bK1",
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
            let want = match listed.iter().all(|r| r.is_ok()) && !listed.is_empty() {
                true => Some((listed.len(), listed[0].map(|(at, b)| Span::new(at, at + b.len())).unwrap())),
                false => None,
            };
            assert_eq!(split(v), want, "{:?}", String::from_utf8_lossy(v));
        }
    }

    #[test]
    fn the_top_value_is_the_first_of_the_first_line() {
        let mut vias = ViaSplit::default();
        let count = |v: &[u8]| v.iter().filter(|b| **b == b',').count() + 1;
        assert_eq!(vias.add_line(b"SIP/2.0/UDP a, SIP/2.0/UDP b", 100, count), 2);
        assert_eq!(vias.add_line(b"SIP/2.0/UDP c", 200, count), 1);
        assert_eq!(vias, ViaSplit { clean: true, count: 3, top: Span::new(100, 113) });
        assert_eq!(vias.add_line(b"SIP/2.0/UDP d,,e", 300, count), 3);
        assert!(!vias.clean);
    }
}
