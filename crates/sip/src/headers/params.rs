//! Generic parameters `*( SEMI name [ EQUAL value ] )` used by Via, name-addr headers,
//! Content-Type, Retry-After and others (RFC 3261 §25.1 generic-param).

use super::error::ValueError;
use super::lex;
use crate::scan;

/// A validated parameter list, kept as the raw text starting at the first `;`. Lookups re-scan
/// it: lists are short and most messages read one or two parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Params<'a> {
    raw: &'a [u8],
}

impl<'a> Params<'a> {
    /// Reads parameters starting at `s[i]` (LWS allowed around `;` and `=`). Stops at the end of
    /// `s` or at a top-level `,`. Returns the list and the index where it stopped.
    pub fn parse(s: &'a [u8], i: usize) -> Result<(Params<'a>, usize), ValueError> {
        Self::parse_visiting(s, i, |_, _| {})
    }

    /// [`Params::parse`] that also shows each checked parameter to `visit` as `(name, value)`,
    /// so a caller can pick out what it needs in the same pass.
    #[inline]
    pub fn parse_visiting(
        s: &'a [u8],
        i: usize,
        mut visit: impl FnMut(&'a [u8], Option<&'a [u8]>),
    ) -> Result<(Params<'a>, usize), ValueError> {
        let begin = lex::skip_lws(s, i);
        let mut j = begin;
        let mut last = begin;
        while s.get(j) == Some(&b';') {
            j = lex::skip_lws(s, j + 1);
            let name_end = lex::token_end(s, j);
            if name_end == j {
                return Err(ValueError::at(j, "empty or invalid parameter name"));
            }
            let name = &s[j..name_end];
            j = lex::skip_lws(s, name_end);
            last = name_end;
            let mut value = None;
            if s.get(j) == Some(&b'=') {
                j = lex::skip_lws(s, j + 1);
                let value_end = value_end(s, j).ok_or(ValueError::at(j, "bad parameter value"))?;
                value = Some(&s[j..value_end]);
                last = value_end;
                j = lex::skip_lws(s, value_end);
            }
            visit(name, value);
        }
        let raw = if last > begin { &s[begin..last] } else { &s[begin..begin] };
        Ok((Params { raw }, j))
    }

    /// The list as written, from its first `;` (empty when there is none).
    pub(crate) fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// A list [`Params::parse`] checked earlier, from its raw text.
    pub(crate) fn from_raw(raw: &'a [u8]) -> Params<'a> {
        Params { raw }
    }

    /// Value of the parameter `name` (case-insensitive): `Some(None)` for a flag such as `;lr`,
    /// `Some(Some(v))` with quotes kept for a quoted value.
    pub fn get(&self, name: &str) -> Option<Option<&'a str>> {
        // As `iter().find(..)`, without making text of the names and values that do not match.
        let s = self.raw;
        let mut pos = 0;
        while let Some(p) = step(s, pos) {
            if s[p.name.clone()].eq_ignore_ascii_case(name.as_bytes()) {
                return Some(p.value.map(|v| scan::ascii_str(&s[v])));
            }
            pos = p.next;
        }
        None
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn iter(&self) -> ParamIter<'a> {
        ParamIter { raw: self.raw, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The raw text, starting with `;`.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.raw
    }
}

/// `gen-value = token / host / quoted-string`; host covers IPv4 and `[IPv6]`, and RFC 5118 §4.5
/// requires accepting an unbracketed IPv6 address in `received`, so `:` is allowed too.
#[inline(always)]
fn value_end(s: &[u8], j: usize) -> Option<usize> {
    if s.get(j) == Some(&b'"') {
        return scan::quoted_string_end(s, j);
    }
    let k = lex::run(s, j, lex::VALUE);
    (k > j).then_some(k)
}

pub struct ParamIter<'a> {
    raw: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for ParamIter<'a> {
    type Item = (&'a str, Option<&'a str>);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.raw;
        let p = step(s, self.pos)?;
        self.pos = p.next;
        Some((scan::ascii_str(&s[p.name]), p.value.map(|v| scan::ascii_str(&s[v]))))
    }
}

/// One parameter of a checked list: where its name and value are, and where the next starts.
struct Step {
    name: std::ops::Range<usize>,
    value: Option<std::ops::Range<usize>>,
    next: usize,
}

/// The parameter at `s[pos]`, if a `;` starts one there. `s` is a list [`Params::parse`]
/// checked, so an unquoted value is known to be value characters up to the LWS or `;` after
/// it (or the end): that end is searched for 16 octets at a time rather than classified octet
/// by octet, as the lookups of `received`, `rport`, `tag`... walk past every branch before.
#[inline]
fn step(s: &[u8], pos: usize) -> Option<Step> {
    if s.get(pos) != Some(&b';') {
        return None;
    }
    let n0 = lex::skip_lws(s, pos + 1);
    let n1 = lex::token_end(s, n0);
    let mut next = lex::skip_lws(s, n1);
    let mut value = None;
    if s.get(next) == Some(&b'=') {
        let v0 = lex::skip_lws(s, next + 1);
        let v1 = match s.get(v0) {
            Some(b'"') => scan::quoted_string_end(s, v0),
            _ => lex::find_any(s, v0, [b';', b' ', b'\t', b'\r']),
        }
        .unwrap_or(s.len());
        value = Some(v0..v1);
        next = lex::skip_lws(s, v1);
    }
    Some(Step { name: n0..n1, value, next })
}

/// Removes the quotes and quoted-pair escapes of a quoted-string; borrowed when nothing is escaped.
pub fn unquote(v: &str) -> std::borrow::Cow<'_, str> {
    let Some(inner) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return v.into();
    };
    if !inner.contains('\\') {
        return inner.into();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up() {
        let s = b" ;branch=z9hG4bK1 ; lr;received=[2001:db8::9:255];x=\"a;b\" ,next";
        let (p, end) = Params::parse(s, 0).unwrap();
        assert_eq!(&s[end..], b",next");
        assert_eq!(p.get("BRANCH"), Some(Some("z9hG4bK1")));
        assert_eq!(p.get("lr"), Some(None));
        assert_eq!(p.get("received"), Some(Some("[2001:db8::9:255]")));
        assert_eq!(p.get("x"), Some(Some("\"a;b\"")));
        assert_eq!(p.get("nope"), None);
        assert_eq!(p.iter().count(), 4);
    }

    #[test]
    fn lookups_walk_a_checked_list_as_its_parse_did() {
        // `step` finds an unquoted value's end by searching for what may follow it in a checked
        // list; the parse classified it octet by octet. Both must give the same parameters.
        use proptest::prelude::*;
        let octet = prop_oneof![
            8 => proptest::sample::select(b"ab1.:[]".to_vec()),
            2 => proptest::sample::select(b";=".to_vec()),
            1 => proptest::sample::select(b" \"\t\\,\r\n\xc3".to_vec()),
        ];
        proptest::proptest!(|(tail in proptest::collection::vec(octet, 0..30))| {
            let mut s = b";".to_vec();
            s.extend_from_slice(&tail);
            let mut seen = Vec::new();
            if let Ok((p, _)) = Params::parse_visiting(&s, 0, |n, v| seen.push((n, v))) {
                let walked: Vec<_> = p.iter().collect();
                let parsed: Vec<_> = seen.iter().map(|(n, v)| (scan::ascii_str(n), v.map(scan::ascii_str))).collect();
                proptest::prop_assert_eq!(&walked, &parsed);
                for (n, _) in &parsed {
                    let first = parsed.iter().find(|(m, _)| m.eq_ignore_ascii_case(n)).map(|(_, v)| *v);
                    proptest::prop_assert_eq!(p.get(n), first);
                }
            }
        });
    }

    #[test]
    fn rejects_empty_names() {
        assert!(Params::parse(b";;", 0).is_err());
        assert!(Params::parse(b";a=", 0).is_err());
        assert!(Params::parse(b";a=\"x", 0).is_err());
    }

    #[test]
    fn unquoting() {
        assert_eq!(unquote("\"a\\\"b\""), "a\"b");
        assert_eq!(unquote("plain"), "plain");
    }
}
