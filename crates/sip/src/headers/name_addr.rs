//! name-addr / addr-spec with parameters: From, To, Contact, Route, Record-Route, Path, Reply-To,
//! Refer-To, Referred-By (RFC 3261 §20, §25.1).

use super::error::ValueError;
use super::lex;
use super::params::Params;
use crate::scan;
use crate::uri::Uri;

/// `( name-addr / addr-spec ) *( SEMI param )`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAddr<'a> {
    /// The display name as written: a quoted-string keeps its quotes (see [`super::unquote`]).
    pub display_name: Option<&'a str>,
    pub uri: Uri<'a>,
    /// Whether the URI was enclosed in `<>` (name-addr form).
    pub bracketed: bool,
    pub params: Params<'a>,
}

impl<'a> NameAddr<'a> {
    /// Parses one value; the list, if any, has already been split at top-level commas.
    pub fn parse(s: &'a [u8]) -> Result<NameAddr<'a>, ValueError> {
        let i = lex::skip_lws(s, 0);
        let (display_name, uri_start, bracketed) = display_and_uri_start(s, i)?;
        let (uri_end, after) = if bracketed {
            let close = lex::find_any(s, uri_start, [b'>']).ok_or(ValueError::at(uri_start, "missing '>'"))?;
            (close, close + 1)
        } else {
            // addr-spec form: RFC 3261 §20.10 says a URI containing ',', '?' or ';' must be in
            // <>, so the URI ends at the first of those or at whitespace.
            let end = lex::find_any(s, uri_start, [b';', b',', b' ', b'\t', b'\r', b'\n']).unwrap_or(s.len());
            if let Some(q) = lex::find_any(&s[..end], uri_start, [b'?']) {
                // RFC 4475 §3.1.2.13 (regbadct): headers in an unbracketed URI are an error.
                return Err(ValueError::at(q, "URI with '?' must be enclosed in <>"));
            }
            (end, end)
        };
        let uri = Uri::parse(&s[uri_start..uri_end]).map_err(|e| ValueError::at(uri_start + e.offset, e.reason))?;
        let (params, end) = Params::parse(s, after)?;
        if end != s.len() {
            return Err(ValueError::at(end, "unexpected text after address"));
        }
        Ok(NameAddr { display_name, uri, bracketed, params })
    }

    pub fn tag(&self) -> Option<&'a str> {
        self.params.get("tag").flatten()
    }
}

/// The `tag` parameter of a From or To value without parsing its URI: transaction and dialog
/// matching need only the tag (RFC 3261 §12, §17.2.3), and skipping the URI halves the cost of
/// a proxy's per-message parse. The parameters after the address are still fully checked.
pub fn tag_of(s: &[u8]) -> Result<Option<&str>, ValueError> {
    match plain_tag(s) {
        Some(tag) => Ok(tag),
        None => tag_of_any(s),
    }
}

/// [`tag_of`] for the values of nearly every From and To, `[display-name] <uri>` with no
/// leading white space or quote, then nothing or a lone `;tag=`: `None` for any other shape,
/// which [`tag_of_any`] then reads (it reads the same tag from these, test
/// `plain_tags_read_as_the_whole_reading`). Small enough to need no saved registers, with the
/// rest out of line: callgrind counted about 15 instructions of register saves and restores
/// per call when both were one function (twelve calls per proxied call).
#[inline(always)]
fn plain_tag(s: &[u8]) -> Option<Option<&str>> {
    // No LWS and no quoted display name at the start (where `tag_of_any` skips or reads one).
    let first = *s.first()?;
    if first <= b' ' || first == b'"' {
        return None;
    }
    let params_at = address_end(s)?;
    if params_at == s.len() {
        return Some(None);
    }
    lone_tag(s, params_at).map(Some)
}

/// Where the parameters after an address start: at the first `;` when no `<` comes before
/// it, else one past the first `>` after the first `<` (`None` when there is none), else at
/// the end. The first 16 octets are searched for all three at once: the `<` and its `>` are
/// mostly both there or the `>` in the next 16, where a search for `<` and `;` and then one
/// for `>` from the `<` loaded the octets between again (callgrind: about 10 instructions a
/// From or To, a dozen per call).
#[inline(always)]
fn address_end(s: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(chunk) = s.first_chunk::<16>() {
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
        // SAFETY: SSE2 is part of the x86-64 baseline, and `chunk` holds the 16 octets that
        // the unaligned load reads.
        let (opens, semis, closes) = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let at = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let semis = at(b';');
            let opens = _mm_movemask_epi8(_mm_or_si128(at(b'<'), semis)) as u32;
            (opens, _mm_movemask_epi8(semis) as u32, _mm_movemask_epi8(at(b'>')) as u32)
        };
        if opens != 0 {
            let k = opens.trailing_zeros();
            if semis & (1 << k) != 0 {
                return Some(k as usize);
            }
            // `>`s of these 16 after the `<` (k < 16: the shift cannot overflow).
            let after = closes & !((2u32 << k) - 1);
            return match after {
                0 => lex::find_any(s, 16, [b'>']).map(|g| g + 1),
                _ => Some(after.trailing_zeros() as usize + 1),
            };
        }
        return address_end_from(s, 16);
    }
    address_end_from(s, 0)
}

/// [`address_end`] by the two searches, from `from` (no `<` or `;` before it).
#[inline(always)]
fn address_end_from(s: &[u8], from: usize) -> Option<usize> {
    match lex::find_any(s, from, [b'<', b';']) {
        Some(k) if s[k] == b'<' => lex::find_any(s, k, [b'>']).map(|g| g + 1),
        Some(k) => Some(k),
        None => Some(s.len()),
    }
}

/// [`tag_of`] for any value (out of line: see [`plain_tag`]).
#[cold]
#[inline(never)]
fn tag_of_any(s: &[u8]) -> Result<Option<&str>, ValueError> {
    let i = lex::skip_lws(s, 0);
    let params_at = if s.get(i) == Some(&b'"') {
        let end = scan::quoted_string_end(s, i).ok_or(ValueError::at(i, "unterminated quoted display name"))?;
        let lt = lex::skip_lws(s, end);
        if s.get(lt) != Some(&b'<') {
            return Err(ValueError::at(lt, "expected '<' after display name"));
        }
        angle_end(s, lt)?
    } else {
        // name-addr if '<' comes before any ';' (an addr-spec cannot contain ';', §20.10).
        match lex::find_any(s, i, [b'<', b';']) {
            Some(k) if s[k] == b'<' => angle_end(s, k)?,
            Some(k) => k,
            None => s.len(),
        }
    };
    // What nearly every From and To ends with after the address: `;tag=` and a token up to the
    // end, read without the generic parameter walk below, which reads the same tag from it
    // (test `a_lone_tag_reads_as_the_parameter_walk_reads_it`).
    if let Some(tag) = lone_tag(s, params_at) {
        return Ok(Some(tag));
    }
    // Nothing after the address (a request's To before the dialog): no parameter, no tag.
    if params_at == s.len() {
        return Ok(None);
    }
    // The first `tag` parameter decides, as `params.get("tag")` would.
    let mut tag: Option<Option<&[u8]>> = None;
    let (_, end) = Params::parse_visiting(s, params_at, |name, value| {
        if tag.is_none() && name.eq_ignore_ascii_case(b"tag") {
            tag = Some(value);
        }
    })?;
    if end != s.len() {
        return Err(ValueError::at(end, "unexpected text after address"));
    }
    // RFC 3261 §19.3: a tag is a token. A quoted one is tolerated, one that is not even UTF-8
    // is refused: as text it would not be a view of the message, which keeps its tags as
    // ranges of the buffer (module `checked`).
    match tag.flatten() {
        Some(t) => scan::utf8(t).map(Some).map_err(|_| ValueError::at(params_at, "tag is not UTF-8")),
        None => Ok(None),
    }
}

/// The tag when `s[at..]` is exactly `;tag=` (the name in any case) and one or more unquoted
/// value characters: one parameter, no white space around its `;` or `=`.
#[inline]
fn lone_tag(s: &[u8], at: usize) -> Option<&str> {
    let rest = s.get(at..)?;
    let (word, eq, value) = (u32::from_le_bytes(*rest.first_chunk::<4>()?), rest.get(4)?, rest.get(5..)?);
    // `;tag` as one word (one load: taken apart into octets and put together again it cost
    // about 8 instructions more), the letters in either case: `b | 0x20` is a lower-case
    // letter exactly for that letter and its upper case (`eq_ignore_ascii_case` maps each
    // octet on its own: about 20 instructions, a dozen tags per call).
    let word = word | 0x2020_2000;
    if word != u32::from_le_bytes(*b";tag") || *eq != b'=' || value.is_empty() {
        return None;
    }
    if lex::run(s, at + 5, lex::VALUE) != s.len() {
        return None;
    }
    // SAFETY: the run covered `value`, and value characters are ASCII.
    Some(unsafe { lex::class_text(value) })
}

fn angle_end(s: &[u8], lt: usize) -> Result<usize, ValueError> {
    lex::find_any(s, lt, [b'>']).map(|k| k + 1).ok_or(ValueError::at(lt, "missing '>'"))
}

/// Reads an optional display name and finds where the URI starts.
/// `display-name = *(token LWS) / quoted-string`; RFC 4475 §3.1.1.6 (lwsdisp) requires accepting
/// no LWS between the display name and `<`.
fn display_and_uri_start(s: &[u8], i: usize) -> Result<(Option<&str>, usize, bool), ValueError> {
    match s.get(i) {
        Some(b'<') => return Ok((None, i + 1, true)),
        Some(b'"') => {
            let end = scan::quoted_string_end(s, i).ok_or(ValueError::at(i, "unterminated quoted display name"))?;
            let lt = lex::skip_lws(s, end);
            if s.get(lt) != Some(&b'<') {
                return Err(ValueError::at(lt, "expected '<' after display name"));
            }
            let name = scan::utf8(&s[i..end]).map_err(|_| ValueError::at(i, "display name is not UTF-8"))?;
            return Ok((Some(name), lt + 1, true));
        }
        None => return Err(ValueError::at(i, "empty address")),
        _ => {}
    }
    // A word directly followed by ':' is a URI scheme: the addr-spec form. Display-name
    // tokens are never followed by ':'.
    let mut e = lex::token_end(s, i);
    if s.get(e) == Some(&b':') {
        return Ok((None, i, false));
    }
    // Otherwise `token *(LWS token) [LWS] "<"` (the first token's end is known already).
    let mut j = i;
    loop {
        if e == j {
            break;
        }
        j = lex::skip_lws(s, e);
        if s.get(j) == Some(&b'<') {
            return Ok((Some(scan::ascii_str(&s[i..e])), j + 1, true));
        }
        if j == e {
            break;
        }
        e = lex::token_end(s, j);
    }
    if memchr::memchr(b'<', &s[i..]).is_some() {
        // Words followed by a non-token character before '<': RFC 4475 §3.1.2.15 (baddn).
        return Err(ValueError::at(j, "display name with non-token characters must be quoted"));
    }
    // No display name and no scheme: let the URI parser say precisely what is wrong.
    Ok((None, i, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search of the first 16 octets for all three finds what the two searches find:
    /// every place of a `<`, a `;` and a `>` in texts of 0 to 48 octets, and none of each.
    #[test]
    fn address_ends_as_the_two_searches_find_it() {
        let mut checked = 0;
        for len in 0..=48usize {
            let places = || (0..=len).map(|p| (p < len).then_some(p));
            for lt in places() {
                for semi in places().step_by(3) {
                    for gt in places() {
                        let mut v = vec![b'a'; len];
                        for (p, b) in [(gt, b'>'), (semi, b';'), (lt, b'<')] {
                            if let Some(p) = p {
                                v[p] = b;
                            }
                        }
                        assert_eq!(address_end(&v), address_end_from(&v, 0), "{:?}", String::from_utf8_lossy(&v));
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }

    /// Where the shortcut reads a tag, the parameter walk reads the same one; it declines
    /// everything else (quotes, LWS, more parameters, other names), which the walk then reads.
    #[test]
    fn plain_tags_read_as_the_whole_reading() {
        let displays: [&str; 6] = ["", "sipp ", "\"A b\" ", " sipp ", "a b ", "\t"];
        let addresses: [&str; 7] = ["<sip:a@h>", "<sip:a@h;x=1>", "sip:a@h", "<sip:a@h", "sip:a@h;x", "", "<>"];
        let tails: [&str; 13] = [
            "",
            ";tag=29734SIPpTag001",
            ";TAG=a",
            ";tag=a;x=1",
            ";x=1;tag=2",
            ";tag=",
            ";tag",
            ";tag=\"q\"",
            " ;tag=1",
            ";tag=a b",
            ";tag=\u{e9}",
            ";tag=a ",
            ">;tag=a",
        ];
        let mut plain = 0;
        for d in displays {
            for a in addresses {
                for tail in tails {
                    let text = format!("{d}{a}{tail}");
                    let s = text.as_bytes();
                    if let Some(tag) = plain_tag(s) {
                        plain += 1;
                        assert_eq!(Ok(tag), tag_of_any(s), "{text:?}");
                    }
                    assert_eq!(tag_of(s), tag_of_any(s), "{text:?}");
                }
            }
        }
        assert!(plain >= 40, "{plain} read the plain way");
        let usual = b"sipp <sip:sipp@127.0.0.1:19101>;tag=29734SIPpTag001";
        assert_eq!(plain_tag(usual), Some(Some("29734SIPpTag001")));
        assert_eq!(plain_tag(b"<sip:bob@127.0.0.1:5060>"), Some(None));
    }

    #[test]
    fn a_lone_tag_reads_as_the_parameter_walk_reads_it() {
        fn walk(s: &[u8], at: usize) -> Option<&str> {
            let mut tag = None;
            let (_, end) = Params::parse_visiting(s, at, |n, v| {
                if tag.is_none() && n.eq_ignore_ascii_case(b"tag") {
                    tag = Some(v);
                }
            })
            .ok()?;
            (end == s.len()).then_some(tag).flatten().flatten().and_then(|t| scan::utf8(t).ok())
        }
        let tails: [&[u8]; 17] = [
            b";tag=12345SIPpTag001",
            b";TaG=a",
            b";TAG=a",
            // ';' with bit 0x20 flipped, and a letter replaced by a control octet.
            b"\x1btag=a",
            b";t\x01g=a",
            b";tag=",
            b";tag",
            b";tag=a b",
            b";tag=a;x=1",
            b";tag=\"q\"",
            b";tag =a",
            b"; tag=a",
            b";tags=a",
            b";tag=a:b[c]",
            b";tag=a,b",
            b";tag=\xff",
            b"",
        ];
        for tail in tails {
            let mut s = b"<sip:a@h>".to_vec();
            s.extend_from_slice(tail);
            let lone = lone_tag(&s, 9);
            if lone.is_some() {
                assert_eq!(lone, walk(&s, 9), "{:?}", String::from_utf8_lossy(&s));
            }
            assert_eq!(tag_of(&s).ok().flatten(), walk(&s, 9), "{:?}", String::from_utf8_lossy(&s));
        }
        assert_eq!(lone_tag(b"<sip:a@h>;tag=12345SIPpTag001", 9), Some("12345SIPpTag001"));
    }

    #[test]
    fn forms() {
        let a = NameAddr::parse(b"\"Bob \\\"B\\\"\" <sip:bob@biloxi.com>;tag=a6c85cf").unwrap();
        assert_eq!(a.display_name, Some("\"Bob \\\"B\\\"\""));
        assert_eq!(a.tag(), Some("a6c85cf"));
        assert!(a.bracketed);
        let b = NameAddr::parse(b"sip:bob@biloxi.com ;   tag    = 1918181833n").unwrap();
        assert_eq!(b.display_name, None);
        assert_eq!(b.tag(), Some("1918181833n"));
        assert!(!b.bracketed);
        let c = NameAddr::parse(b"caller<sip:caller@example.com>;tag=323").unwrap();
        assert_eq!(c.display_name, Some("caller"));
        let d = NameAddr::parse(b"Alice  Smith <sip:a@b>").unwrap();
        assert_eq!(d.display_name, Some("Alice  Smith"));
    }

    #[test]
    fn params_belong_to_header_in_addr_spec_form() {
        let a = NameAddr::parse(b"sip:u@h;unknownparam").unwrap();
        assert!(a.params.contains("unknownparam"));
        let b = NameAddr::parse(b"<sip:u@h;unknownparam>").unwrap();
        assert!(b.params.is_empty());
    }

    #[test]
    fn a_tag_that_is_not_utf8_is_refused_not_replaced() {
        // As the stream_framer fuzz target found for Via branches: "" would not be a view of
        // the message, whose memo keeps the tag as a range of its buffer.
        assert_eq!(tag_of(b"<sip:a@b>;tag=\"t\x82\x00\"").unwrap_err().what, "tag is not UTF-8");
        assert_eq!(tag_of("<sip:a@b>;tag=\"té\"".as_bytes()).unwrap(), Some("\"té\""));
    }

    #[test]
    fn tags_without_uri_parsing() {
        for (v, tag) in [
            (&b"\"A, B\" <sip:a@b;x=1>;tag=t1"[..], Some("t1")),
            (b"<sip:a@b>;tag=t2;other", Some("t2")),
            (b"sip:a@b ;   tag    = 1918181833n", Some("1918181833n")),
            (b"Alice <sip:a@b>", None),
            (b"sip:a@b", None),
        ] {
            assert_eq!(tag_of(v).unwrap(), tag, "{}", String::from_utf8_lossy(v));
            // Same answer as the full parse.
            assert_eq!(NameAddr::parse(v).unwrap().tag(), tag);
        }
        assert!(tag_of(b"<sip:a@b").is_err());
        assert!(tag_of(b"<sip:a@b>;;").is_err());
    }

    #[test]
    fn rejects() {
        assert!(NameAddr::parse(b"Bell, Alexander <sip:a.g.bell@example.com>;tag=43").is_err());
        assert!(NameAddr::parse(b"\"Mr. J. User <sip:j.user@example.com>").is_err());
        assert!(NameAddr::parse(b"< sip:t.watson@example.org >").is_err());
        assert!(NameAddr::parse(b"sip:user@example.com?Route=%3Csip:x%3E").is_err());
        assert!(NameAddr::parse(b"<sip:a@b").is_err());
        assert!(NameAddr::parse(b"").is_err());
        assert!(NameAddr::parse(b"<sip:a@b> junk").is_err());
    }
}
