//! Shortcuts into the header index, noted when [`super::Head::scan`] has found the header
//! lines: where the first line of each frequent header is, and whether a single-valued header
//! is repeated (RFC 4475 §3.3.8).
//!
//! A proxy looks headers up by name many times per message (the receipt checks, the
//! transaction key, the forwarding edits); callgrind counted these linear searches among the
//! larger costs of [`crate::Message::validate`]. With the first line of each frequent name at
//! hand a lookup is one load, and the duplicate check needs no second walk over the lines.

use super::line::HeaderField;
use crate::header_name::{HeaderName, SINGLE_VALUED};

/// How many header names have their first line noted: all of them (`HeaderName::bit` holds
/// every name in a `u64`, so `as usize % NOTED` is the name's own place). Noting every name
/// costs no test of which names are noted (callgrind: about 5 instructions per header line
/// with the first 16 names only), and a lookup of any name is one load.
const NOTED: usize = 64;

/// The position of a line past this one is not stored (the byte saturates): a lookup then
/// searches from this line on.
const FAR: u8 = u8::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderIndex {
    /// Per noted name: 0 when no line has it, else 1 + the index of its first line (or [`FAR`]).
    first: [u8; NOTED],
    /// The names of more than one line, as a set of [`HeaderName::bit`]s.
    repeated: u64,
}

impl Default for HeaderIndex {
    fn default() -> HeaderIndex {
        const { assert!(HeaderName::ALL.len() <= NOTED) };
        HeaderIndex { first: [0; NOTED], repeated: 0 }
    }
}

impl HeaderIndex {
    /// The shortcuts into `headers`.
    #[cfg(test)]
    pub fn of(headers: &[HeaderField]) -> HeaderIndex {
        let mut index = HeaderIndex::default();
        for (at, h) in headers.iter().enumerate() {
            index.note(at, h.name);
        }
        index
    }

    /// Notes line `at`, named `name`, as the scan finds the lines in order: the first line of a
    /// name keeps its place. Noted while scanning rather than in a second pass over the lines
    /// (callgrind: about 60 instructions per message). The repeated lines themselves are
    /// searched for only when a single-valued name is repeated, which a well-formed message
    /// never has.
    #[inline(always)]
    pub fn note(&mut self, at: usize, name: HeaderName) {
        // A noted place is never 0, so the slot itself says whether the name was seen (a
        // set of seen names beside it cost a load, a test and a store more per line).
        let first = &mut self.first[name as usize % NOTED];
        if *first != 0 {
            self.repeated |= name.bit();
            return;
        }
        *first = (at + 1).min(FAR as usize) as u8;
    }

    /// The index of the first line named `name`.
    #[inline(always)]
    pub fn first(&self, headers: &[HeaderField], name: HeaderName) -> Option<usize> {
        match self.first[name as usize % NOTED] {
            0 => None,
            FAR => Self::first_far(headers, name),
            i => Some(i as usize - 1),
        }
    }

    /// [`HeaderIndex::first`] of a name whose first line is past the noted places: out of
    /// line, so that a lookup inlined where the receipt checks read their values is a load
    /// and two tests (no message under 254 lines gets here).
    #[cold]
    #[inline(never)]
    fn first_far(headers: &[HeaderField], name: HeaderName) -> Option<usize> {
        let from = FAR as usize - 1;
        headers.get(from..)?.iter().position(|h| h.name == name).map(|i| from + i)
    }

    /// Where a search for the lines named `name` may start (`headers.len()` when there are none).
    #[inline]
    pub fn search_from(&self, headers: &[HeaderField], name: HeaderName) -> usize {
        match self.first[name as usize % NOTED] {
            0 => headers.len(),
            i => i as usize - 1,
        }
    }

    /// Whether some single-valued header has more than one line (RFC 4475 §3.3.8).
    pub fn repeats_single(&self) -> bool {
        self.repeated & SINGLE_VALUED != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn line(name: HeaderName) -> HeaderField {
        HeaderField { name, name_end: 0, value: Span::default(), line: Span::default() }
    }

    /// Lookups through the index agree with a plain search, also past the lines whose position
    /// no longer fits a byte and for names that are not noted.
    #[test]
    fn lookups_match_a_linear_search() {
        let names = [HeaderName::Via, HeaderName::Subject, HeaderName::Other, HeaderName::CSeq, HeaderName::Via];
        for filler in [0usize, 3, 300] {
            let mut headers: Vec<HeaderField> = (0..filler).map(|_| line(HeaderName::Date)).collect();
            headers.extend(names.iter().map(|n| line(*n)));
            let index = HeaderIndex::of(&headers);
            for name in names.iter().chain(&[HeaderName::From, HeaderName::Date, HeaderName::Warning]) {
                let want = headers.iter().position(|h| h.name == *name);
                assert_eq!(index.first(&headers, *name), want, "{name:?} after {filler}");
                let from = index.search_from(&headers, *name);
                assert_eq!(headers[from..].iter().position(|h| h.name == *name).map(|i| from + i), want);
                assert!(headers[..from].iter().all(|h| h.name != *name));
            }
            // Date is single-valued: with filler lines of it, the second one repeats it; Via is not.
            assert_eq!(index.repeats_single(), filler > 1);
        }
    }
}
