//! Splitting a header value into its comma-separated elements (RFC 3261 §7.3.1): commas inside
//! quoted strings and `<...>` do not separate.

use super::error::ValueError;
use super::lex;
use crate::scan;
use crate::span::Span;

/// One element of a comma-separated header, with where it sits in the buffer (for editing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListValue<'a> {
    /// Index of the header line in [`crate::Message::headers`].
    pub field: usize,
    pub span: Span,
    pub bytes: &'a [u8],
}

/// Yields `(offset in value, element)` with surrounding LWS trimmed. An empty element between
/// commas is an error (RFC 4475 §3.1.2.1 badinv01), an all-blank value yields nothing.
pub struct ListIter<'a> {
    s: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> ListIter<'a> {
    pub fn new(s: &'a [u8]) -> ListIter<'a> {
        let start = scan::skip_lws(s, 0);
        ListIter { s, pos: start, done: start >= s.len() }
    }
}

impl<'a> Iterator for ListIter<'a> {
    type Item = Result<(usize, &'a [u8]), ValueError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let s = self.s;
        let start = lex::skip_lws(s, self.pos);
        let Some(comma) = lex::find_top_level(s, start, b',') else {
            self.done = true;
            return Some(Err(ValueError::at(start, "unbalanced quote or '<'")));
        };
        let end = scan::trim_lws_end(s, comma).max(start);
        if comma >= s.len() {
            self.done = true;
        } else {
            self.pos = comma + 1;
        }
        if end == start {
            self.done = true;
            return Some(Err(ValueError::at(start, "empty list element")));
        }
        Some(Ok((start, &s[start..end])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(s: &[u8]) -> Vec<Result<(usize, &[u8]), ValueError>> {
        ListIter::new(s).collect()
    }

    #[test]
    fn splits_at_top_level() {
        let v = items(b"<sip:a,b@h>;x=\"1,2\" ,\r\n sip:c@d");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].unwrap().1, b"<sip:a,b@h>;x=\"1,2\"");
        assert_eq!(v[1].unwrap(), (24, &b"sip:c@d"[..]));
        assert!(items(b"  ").is_empty());
    }

    #[test]
    fn empty_elements_are_errors() {
        assert!(items(b"a,,b").iter().any(|r| r.is_err()));
        assert!(items(b"a,").iter().any(|r| r.is_err()));
        assert!(items(b"\"a,b").iter().any(|r| r.is_err()));
    }
}
