//! Small single-valued headers: CSeq, Call-ID, Max-Forwards, Expires and friends, Retry-After,
//! Date, and token lists (Require, Supported, Allow, ...).

use super::error::ValueError;
use super::lex;
use super::params::Params;
use crate::method::Method;
use crate::scan;

/// `CSeq = 1*DIGIT LWS Method` (RFC 3261 §20.16); the number must fit in 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CSeq<'a> {
    pub seq: u32,
    pub method: Method<'a>,
}

impl<'a> CSeq<'a> {
    pub fn parse(s: &'a [u8]) -> Result<CSeq<'a>, ValueError> {
        Self::parse_text(s).map(|(cseq, _)| cseq)
    }

    /// [`CSeq::parse`], with the method's text as written (the end of `s`): the receipt check
    /// keeps where it is (module `checked`) without finding it again from the method's name.
    #[inline]
    pub(crate) fn parse_text(s: &'a [u8]) -> Result<(CSeq<'a>, &'a str), ValueError> {
        // The digits are counted and read in one walk (at most 11 are read: over 10 is an error).
        let (mut digits, mut seq) = (0usize, 0u64);
        while let Some(d) = s.get(digits).filter(|b| b.is_ascii_digit() && digits <= 10) {
            seq = seq * 10 + u64::from(d - b'0');
            digits += 1;
        }
        if s.get(digits).is_some_and(u8::is_ascii_digit) {
            digits += s[digits..].iter().take_while(|b| b.is_ascii_digit()).count();
        }
        let seq = match u32::try_from(seq) {
            Ok(seq) if digits > 0 && digits <= 10 => seq,
            _ => return Err(ValueError::at(0, "sequence number missing or over 2**32-1")),
        };
        // One SP and then the method, as nearly every CSeq is written: where the LWS skip
        // stops too, without its loop (callgrind: about 8 instructions per message).
        let m = match (s.get(digits), s.get(digits + 1)) {
            (Some(b' '), Some(&b)) if b > b' ' => digits + 1,
            _ => lex::skip_lws(s, digits),
        };
        if m == digits {
            return Err(ValueError::at(m, "expected whitespace after sequence number"));
        }
        // A method herald knows, up to the end: its name is a token, so the token run below
        // would cover it and end at the end (callgrind: the run octet by octet through the
        // class table and the name's compare after it, about 40 instructions per message).
        if let Some(known) = s.get(m..).and_then(Method::known) {
            // SAFETY: the octets are those of a known method's name, ASCII letters.
            return Ok((CSeq { seq, method: known }, unsafe { lex::class_text(&s[m..]) }));
        }
        let me = lex::token_end(s, m);
        if me == m || me != s.len() {
            return Err(ValueError::at(me, "bad method"));
        }
        // SAFETY: the token run covered `s[m..me]`; token characters are ASCII.
        let text = unsafe { lex::class_text(&s[m..me]) };
        Ok((CSeq { seq, method: Method::from_token(text) }, text))
    }
}

/// `Call-ID = word [ "@" word ]` (RFC 3261 §20.8). Compared byte for byte.
pub fn parse_call_id(s: &[u8]) -> Result<&str, ValueError> {
    #[cfg(target_arch = "x86_64")]
    if let Some(outside) = lex::uncommon_in_16_to_32(s) {
        // Letters, digits, '-' and '.' (word characters) but for one '@' that is neither first
        // nor last: `word "@" word`, read in one vector pass over the value where the two
        // word runs below set up their tests twice (callgrind: about 40 instructions a
        // Call-ID of this length, as SIPp's and most phones' are). Anything else is read by
        // the runs.
        let at = outside.trailing_zeros() as usize;
        let one_inside = outside & outside.wrapping_sub(1) == 0 && at > 0 && at + 1 < s.len() && s[at] == b'@';
        if outside == 0 || one_inside {
            // SAFETY: letters, digits, '-', '.' and '@' are ASCII.
            return Ok(unsafe { lex::class_text(s) });
        }
    }
    parse_call_id_runs(s)
}

/// [`parse_call_id`] by word runs.
fn parse_call_id_runs(s: &[u8]) -> Result<&str, ValueError> {
    // '@' is not a word character, so the first word ends at the first '@' if it is valid.
    let first = lex::run(s, 0, lex::WORD);
    let ok = first > 0
        && match s.get(first) {
            None => true,
            Some(b'@') => s.len() > first + 1 && lex::run(s, first + 1, lex::WORD) == s.len(),
            Some(_) => false,
        };
    if !ok {
        let bad = s.iter().position(|&b| !scan::is_word(b) && b != b'@').unwrap_or(0);
        return Err(ValueError::at(bad, "Call-ID must be word[@word]"));
    }
    // SAFETY: word runs covered `s` but for one '@'; word characters are ASCII.
    Ok(unsafe { lex::class_text(s) })
}

/// `delta-seconds = 1*DIGIT` for Expires and Min-Expires; over 2**32-1 is an error
/// (RFC 4475 §3.1.2.4).
pub fn parse_delta_seconds(s: &[u8]) -> Result<u32, ValueError> {
    scan::parse_u32(s).ok_or(ValueError::at(0, "not a number of seconds within 0..=4294967295"))
}

/// Max-Forwards: RFC 3261 §20.22 gives 0..=255 as the range (RFC 4475 §3.1.2.4 rejects 300).
pub fn parse_max_forwards(s: &[u8]) -> Result<u8, ValueError> {
    scan::parse_u32(s).and_then(|v| u8::try_from(v).ok()).ok_or(ValueError::at(0, "not a number within 0..=255"))
}

/// `Retry-After = delta-seconds [ comment ] *( SEMI retry-param )` (RFC 3261 §20.33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryAfter<'a> {
    pub seconds: u32,
    pub comment: Option<&'a str>,
    pub params: Params<'a>,
}

impl<'a> RetryAfter<'a> {
    pub fn parse(s: &'a [u8]) -> Result<RetryAfter<'a>, ValueError> {
        let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let seconds = parse_delta_seconds(&s[..digits])?;
        let mut i = scan::skip_lws(s, digits);
        let mut comment = None;
        if s.get(i) == Some(&b'(') {
            let end = comment_end(s, i).ok_or(ValueError::at(i, "unterminated comment"))?;
            comment = Some(scan::utf8(&s[i..end]).map_err(|_| ValueError::at(i, "comment is not UTF-8"))?);
            i = scan::skip_lws(s, end);
        }
        let (params, end) = Params::parse(s, i)?;
        if end != s.len() {
            return Err(ValueError::at(end, "unexpected text"));
        }
        Ok(RetryAfter { seconds, comment, params })
    }
}

/// A parenthesised comment with nesting and quoted-pairs (RFC 3261 §25.1 `comment`).
fn comment_end(s: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    while j < s.len() {
        match s[j] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            b'\\' => j += 1,
            _ => {}
        }
        j += 1;
    }
    None
}

/// A token list element: Require, Proxy-Require, Supported, Unsupported, Allow (RFC 3261 §20).
pub fn parse_token(s: &[u8]) -> Result<&str, ValueError> {
    let e = scan::token_end(s, 0);
    if e == 0 || e != s.len() {
        return Err(ValueError::at(e, "expected a single token"));
    }
    Ok(scan::ascii_str(s))
}

/// `Date: rfc1123-date` with the mandatory "GMT" zone (RFC 3261 §20.17; RFC 4475 §3.1.2.12
/// rejects "EST"). Returns seconds since the Unix epoch.
pub fn parse_date(s: &[u8]) -> Result<u64, ValueError> {
    let text = std::str::from_utf8(s).map_err(|_| ValueError::at(0, "not ASCII"))?;
    let bad = |what| ValueError::at(0, what);
    // Exactly six fields; a fixed array, so a hostile value cannot make this allocate.
    let mut fields = text.split_ascii_whitespace();
    let mut parts = [""; 6];
    for p in parts.iter_mut() {
        *p = fields.next().ok_or(bad("expected 'Wkd, DD Mon YYYY HH:MM:SS GMT'"))?;
    }
    if fields.next().is_some() {
        return Err(bad("expected 'Wkd, DD Mon YYYY HH:MM:SS GMT'"));
    }
    let [wkday, day, month, year, time, zone] = parts;
    const WKDAYS: [&str; 7] = ["Mon,", "Tue,", "Wed,", "Thu,", "Fri,", "Sat,", "Sun,"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    if !WKDAYS.contains(&wkday) {
        return Err(bad("bad weekday"));
    }
    if zone != "GMT" {
        return Err(bad("time zone must be GMT"));
    }
    let num = |v: &str, len: usize| (v.len() == len).then(|| v.parse::<u64>().ok()).flatten();
    let day = num(day, 2).filter(|d| (1..=31).contains(d)).ok_or(bad("bad day"))?;
    let month = MONTHS.iter().position(|m| *m == month).ok_or(bad("bad month"))? as u64 + 1;
    let year = num(year, 4).ok_or(bad("bad year"))?;
    let mut hms = time.split(':').map(|v| num(v, 2));
    let (Some(Some(h)), Some(Some(m)), Some(Some(sec)), None) = (hms.next(), hms.next(), hms.next(), hms.next()) else {
        return Err(bad("bad time"));
    };
    if h > 23 || m > 59 || sec > 60 {
        return Err(bad("bad time"));
    }
    Ok(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y as i64 - 1 } else { y as i64 };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cseq() {
        let c = CSeq::parse(b"0009\r\n  INVITE").unwrap();
        assert_eq!((c.seq, c.method), (9, Method::Invite));
        assert!(CSeq::parse(b"36893488147419103232 REGISTER").is_err());
        assert!(CSeq::parse(b"1INVITE").is_err());
        assert!(CSeq::parse(b"1 INVITE x").is_err());
        assert_eq!(CSeq::parse(b"29344 RE%47IST%45R").unwrap().method, Method::Extension("RE%47IST%45R"));
    }

    #[test]
    fn cseq_matches_the_reference() {
        // The parse before the one-walk digits.
        fn reference(s: &[u8]) -> Option<(u32, Method<'_>)> {
            let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
            let seq = scan::parse_u32(&s[..digits])?;
            let m = scan::skip_lws(s, digits);
            let me = scan::token_end(s, m);
            (m != digits && me != m && me == s.len()).then(|| (seq, Method::from_token(scan::ascii_str(&s[m..me]))))
        }
        let octet = proptest::sample::select(b"0123456789 \tINVITEx\r\n-".to_vec());
        proptest::proptest!(|(s in proptest::collection::vec(octet, 0..16))| {
            proptest::prop_assert_eq!(CSeq::parse(&s).ok().map(|c| (c.seq, c.method)), reference(&s));
        });
        let fixed = [&b"4294967295 INVITE"[..], b"4294967296 INVITE", b"00000000001 ACK", b"99999999999 BYE", b"1 BYE"];
        // Around the one-SP shortcut: more white space, folding, nothing after the SP.
        let spaced = [&b"1  INVITE"[..], b"1 \tINVITE", b"1 \r\n INVITE", b"1 ", b"1 \r\nINVITE", b"2 A"];
        for s in fixed.into_iter().chain(spaced) {
            assert_eq!(CSeq::parse(s).ok().map(|c| (c.seq, c.method)), reference(s), "{s:?}");
        }
    }

    /// A known method read by its name gives what the token run gives, the text included:
    /// every known name, alone and with an octet added, dropped or changed at each end.
    #[test]
    fn known_methods_read_as_the_token_run() {
        fn reference(s: &[u8]) -> Option<(u32, Method<'_>, &str)> {
            let (seq, _) = reference_seq(s)?;
            let m = scan::skip_lws(s, s.iter().take_while(|b| b.is_ascii_digit()).count());
            let text = scan::ascii_str(&s[m..]);
            Some((seq, Method::from_token(text), text))
        }
        fn reference_seq(s: &[u8]) -> Option<(u32, ())> {
            let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
            let seq = scan::parse_u32(&s[..digits])?;
            let m = scan::skip_lws(s, digits);
            let me = scan::token_end(s, m);
            (m != digits && me != m && me == s.len()).then_some((seq, ()))
        }
        let names = ["INVITE", "ACK", "BYE", "CANCEL", "REGISTER", "OPTIONS", "INFO", "PRACK", "SUBSCRIBE", "NOTIFY"];
        let names = names.iter().chain(&["UPDATE", "MESSAGE", "REFER", "PUBLISH", "invite", "INVITES", "X"]);
        for name in names {
            let mut texts = vec![name.to_string(), format!("{name}x"), format!("x{name}"), format!("{name} ")];
            texts.extend([name[1..].to_string(), name[..name.len() - 1].to_string(), format!("{name}\0")]);
            for text in texts {
                for prefix in ["1 ", "2  ", "3\t", "4294967296 "] {
                    let s = format!("{prefix}{text}");
                    let got = CSeq::parse_text(s.as_bytes()).ok().map(|(c, t)| (c.seq, c.method, t));
                    assert_eq!(got, reference(s.as_bytes()), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn call_id_matches_the_reference() {
        // The check before the one-pass rewrite.
        let reference = |s: &[u8]| {
            let word = |w: &[u8]| !w.is_empty() && w.iter().all(|&b| scan::is_word(b));
            match s.iter().position(|&b| b == b'@') {
                Some(at) => word(&s[..at]) && word(&s[at + 1..]),
                None => word(s),
            }
        };
        proptest::proptest!(|(s in proptest::collection::vec(proptest::sample::select(b"ab@@ :\"<\\{\xff".to_vec()), 0..12))| {
            proptest::prop_assert_eq!(parse_call_id(&s).is_ok(), reference(&s));
        });
    }

    /// The vector read of a Call-ID of 16 to 32 octets gives what the word runs give: texts
    /// of 14 to 34 octets with one or two octets that matter ('@', other word characters, not
    /// word characters) at every place.
    #[test]
    fn call_ids_read_as_the_word_runs_read_them() {
        let odd = [b'@', b':', b'"', b' ', 0xff, b'-', b'.', b'/', b'{', b'\r'];
        let mut checked = 0;
        for len in 14..=34usize {
            for (a, b) in odd.iter().flat_map(|a| odd.iter().map(move |b| (*a, *b))) {
                for i in 0..len {
                    for j in (i..len).step_by(3) {
                        let mut v = vec![b'x'; len];
                        v[j] = b;
                        v[i] = a;
                        assert_eq!(parse_call_id(&v), parse_call_id_runs(&v), "{:?}", String::from_utf8_lossy(&v));
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000);
        assert_eq!(parse_call_id(b"1-29734@127.0.0.1"), Ok("1-29734@127.0.0.1"));
    }

    #[test]
    fn call_id() {
        assert_eq!(parse_call_id(b"a84b4c76e66710@pc33.atlanta.com").unwrap(), "a84b4c76e66710@pc33.atlanta.com");
        assert!(parse_call_id(b"a b").is_err());
        assert!(parse_call_id(b"a@").is_err());
        assert!(parse_call_id(b"").is_err());
    }

    #[test]
    fn scalars() {
        assert_eq!(parse_max_forwards(b"0068").unwrap(), 68);
        assert!(parse_max_forwards(b"300").is_err());
        assert!(parse_delta_seconds(b"10000000000").is_err());
    }

    #[test]
    fn retry_after() {
        let r = RetryAfter::parse(b"18000 (in a meeting);duration=3600").unwrap();
        assert_eq!(r.seconds, 18000);
        assert_eq!(r.comment, Some("(in a meeting)"));
        assert_eq!(r.params.get("duration"), Some(Some("3600")));
        assert!(RetryAfter::parse(b"949302838503028349304023988").is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date(b"Sat, 13 Nov 2010 23:29:00 GMT").unwrap(), 1_289_690_940);
        assert_eq!(parse_date(b"Thu, 01 Jan 1970 00:00:00 GMT").unwrap(), 0);
        assert!(parse_date(b"Fri, 01 Jan 2010 16:00:00 EST").is_err());
        assert!(parse_date(b"Fri, 1 Jan 2010 16:00:00 GMT").is_err());
    }
}
