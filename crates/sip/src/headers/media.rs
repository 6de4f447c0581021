//! Media types for Content-Type and Accept (RFC 3261 §20.15, §20.1; RFC 2045 §5.1).

use super::error::ValueError;
use super::params::Params;
use crate::scan;

/// `m-type SLASH m-subtype *( SEMI m-parameter )`; `*` is allowed by Accept's media-range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType<'a> {
    pub top: &'a str,
    pub sub: &'a str,
    pub params: Params<'a>,
}

impl<'a> MediaType<'a> {
    pub fn parse(s: &'a [u8]) -> Result<MediaType<'a>, ValueError> {
        let i = scan::skip_lws(s, 0);
        let te = scan::token_end(s, i);
        if te == i {
            return Err(ValueError::at(i, "missing media type"));
        }
        let slash = scan::skip_lws(s, te);
        if s.get(slash) != Some(&b'/') {
            return Err(ValueError::at(slash, "expected '/' in media type"));
        }
        let j = scan::skip_lws(s, slash + 1);
        let se = scan::token_end(s, j);
        if se == j {
            return Err(ValueError::at(j, "missing media subtype"));
        }
        let (params, end) = Params::parse(s, se)?;
        if end != s.len() {
            return Err(ValueError::at(end, "unexpected text after media type"));
        }
        Ok(MediaType { top: scan::ascii_str(&s[i..te]), sub: scan::ascii_str(&s[j..se]), params })
    }

    /// Case-insensitive comparison with "type/subtype".
    pub fn is(&self, mime: &str) -> bool {
        mime.split_once('/').is_some_and(|(t, s)| t.eq_ignore_ascii_case(self.top) && s.eq_ignore_ascii_case(self.sub))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let m = MediaType::parse(b"multipart/mixed;boundary=7a9cbec02ceef655").unwrap();
        assert!(m.is("Multipart/MIXED"));
        assert_eq!(m.params.get("boundary"), Some(Some("7a9cbec02ceef655")));
        assert!(MediaType::parse(b"application").is_err());
        assert!(MediaType::parse(b"application/").is_err());
    }
}
