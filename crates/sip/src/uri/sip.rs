//! `SIP-URI` / `SIPS-URI` (RFC 3261 §19.1.1, §25.1).
//!
//! ```text
//! SIP-URI  = "sip:"  [ userinfo ] hostport uri-parameters [ headers ]
//! SIPS-URI = "sips:" [ userinfo ] hostport uri-parameters [ headers ]
//! userinfo = ( user / telephone-subscriber ) [ ":" password ] "@"
//! ```

use std::borrow::Cow;
use std::fmt;

use super::error::UriError;
use super::escape::{self, check_class};
use super::host::{host_port, host_port_prefix, Host};
use crate::scan;

/// `sip` or `sips` (RFC 3261 §19.1). The scheme is case-insensitive (§19.1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `sip:`
    Sip,
    /// `sips:` (TLS on every hop, RFC 3261 §19.1.1).
    Sips,
}

impl Scheme {
    /// Canonical lowercase spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Sip => "sip",
            Scheme::Sips => "sips",
        }
    }

    /// RFC 3261 §19.1.2: 5060 for sip, 5061 for sips. Note that an absent port is
    /// still not *equivalent* to an explicit default port (§19.1.4).
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Sip => 5060,
            Scheme::Sips => 5061,
        }
    }
}

/// A parsed sip:/sips: URI. Every field borrows from the input.
///
/// The derived `PartialEq` is structural/textual; use [`SipUri::equivalent`] for
/// RFC 3261 §19.1.4 equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SipUri<'a> {
    /// sip or sips, whatever the case in the input.
    pub scheme: Scheme,
    /// Raw, still %-escaped, e.g. "user;par=u%40example.net" (RFC 4475 §3.1.1.9
    /// semiuri: the user part may contain ';').
    pub user: Option<&'a str>,
    /// Raw, still %-escaped.
    pub password: Option<&'a str>,
    /// The host (RFC 3261 §25.1 `host`).
    pub host: Host<'a>,
    /// The explicit port, if any; None is not the same as 5060 (§19.1.4).
    pub port: Option<u16>,
    /// The whole URI text.
    raw: &'a str,
    /// ";name[=value]..." after hostport, up to '?' or end ("" if none).
    params: &'a str,
    /// "h=v&h2=v2" after '?' ("" if none).
    headers: &'a str,
}

impl<'a> SipUri<'a> {
    /// A URI from parts an earlier parse found (the message's memo, module `checked`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        scheme: Scheme,
        user: Option<&'a str>,
        password: Option<&'a str>,
        host: Host<'a>,
        port: Option<u16>,
        raw: &'a str,
        params: &'a str,
        headers: &'a str,
    ) -> SipUri<'a> {
        SipUri { scheme, user, password, host, port, raw, params, headers }
    }

    /// The raw text of the parameters (after hostport) and of the headers (after '?').
    pub(crate) fn raw_parts(&self) -> (&'a str, &'a str, &'a str) {
        (self.raw, self.params, self.headers)
    }

    /// Looks up a uri-parameter. Names are case-insensitive (§19.1.4) and compared
    /// after unescaping, so RFC 4475 §3.1.1.3 esc01's ";%6C%72" is found as "lr".
    /// `Some(None)` for a flag parameter such as ";lr"; the value is raw.
    pub fn param(&self, name: &str) -> Option<Option<&'a str>> {
        find_param(self.params(), name)
    }

    /// All uri-parameters in order, raw: (name, value).
    pub fn params(&self) -> Params<'a> {
        Params::new(self.params)
    }

    /// All `?h=v&...` headers in order, raw (still escaped): (hname, hvalue).
    pub fn headers(&self) -> Headers<'a> {
        Headers { rest: (!self.headers.is_empty()).then_some(self.headers) }
    }

    /// The raw parameter text, each parameter starting with ';' ("" if none).
    pub fn params_raw(&self) -> &'a str {
        self.params
    }

    /// The raw header text after '?' ("" if none).
    pub fn headers_raw(&self) -> &'a str {
        self.headers
    }

    /// `transport=` value, raw (RFC 3261 §19.1.1).
    pub fn transport(&self) -> Option<&'a str> {
        self.param("transport").flatten()
    }

    /// `maddr=` value, raw.
    pub fn maddr(&self) -> Option<&'a str> {
        self.param("maddr").flatten()
    }

    /// Presence of `lr` (RFC 3261 §19.1.1; loose routing). Any value (some old
    /// proxies send "lr=on") still counts as present.
    pub fn lr(&self) -> bool {
        self.param("lr").is_some()
    }

    /// `user=` value, raw (e.g. "phone", "ip").
    pub fn user_param(&self) -> Option<&'a str> {
        self.param("user").flatten()
    }

    /// `method=` value, raw.
    pub fn method_param(&self) -> Option<&'a str> {
        self.param("method").flatten()
    }

    /// `ttl = 1*3DIGIT` in 0..=255 (§25.1). None if absent or malformed.
    pub fn ttl(&self) -> Option<u8> {
        let v = self.param("ttl").flatten()?;
        if v.is_empty() || v.len() > 3 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse().ok()
    }

    /// %-decoded user; bytes because %00 is legal (RFC 4475 §3.1.1.4 escnull).
    pub fn user_unescaped(&self) -> Option<Cow<'a, [u8]>> {
        self.user.and_then(|u| escape::percent_decode(u.as_bytes()).ok())
    }

    /// %-decoded password.
    pub fn password_unescaped(&self) -> Option<Cow<'a, [u8]>> {
        self.password.and_then(|p| escape::percent_decode(p.as_bytes()).ok())
    }

    /// The exact original text.
    pub fn as_str(&self) -> &'a str {
        self.raw
    }

    /// The scheme as written (e.g. "SIP").
    pub(super) fn scheme_text(&self) -> &'a str {
        let n = self.scheme.as_str().len();
        self.raw.get(..n).unwrap_or(self.scheme.as_str())
    }
}

impl fmt::Display for SipUri<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw)
    }
}

/// Shared by sip and tel: first parameter whose name matches (case-insensitive,
/// escapes decoded).
pub(super) fn find_param<'a>(mut params: Params<'a>, name: &str) -> Option<Option<&'a str>> {
    params.find(|(n, _)| escape::eq_escaped(n, name, true)).map(|(_, v)| v)
}

/// Iterator over `;name[=value]` parameters: (name, value), both raw.
#[derive(Debug, Clone)]
pub struct Params<'a> {
    rest: Option<&'a str>,
}

impl<'a> Params<'a> {
    /// `raw` is either empty or starts with ';'.
    pub(super) fn new(raw: &'a str) -> Params<'a> {
        Params { rest: raw.strip_prefix(';') }
    }
}

impl<'a> Iterator for Params<'a> {
    type Item = (&'a str, Option<&'a str>);

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.rest?;
        // ';' is not a paramchar, so it always separates parameters (§25.1). One pass finds the
        // '=' and the ';' (byte offsets of ASCII octets, so the slices below are on char
        // boundaries); `str::split_once` would search twice, each time through a generic searcher.
        let bytes = r.as_bytes();
        let (seg_end, eq) = match next_of(bytes, 0, |b| matches!(b, b';' | b'=')) {
            Some(k) if bytes.get(k) == Some(&b'=') => (next_of(bytes, k + 1, |b| b == b';'), Some(k)),
            found => (found, None),
        };
        let seg = match seg_end {
            Some(end) => {
                self.rest = r.get(end + 1..);
                r.get(..end)?
            }
            None => {
                self.rest = None;
                r
            }
        };
        Some(match eq {
            Some(k) => (seg.get(..k)?, Some(seg.get(k + 1..)?)),
            None => (seg, None),
        })
    }
}

/// The first octet at or after `from` that `stop` picks, where `stop` picks only octets outside
/// `paramchar` (';', '='): the parameter text between them is skipped four octets per step
/// through the class table, what is not a paramchar (an escape's '%') octet by octet.
#[inline]
fn next_of(bytes: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> Option<usize> {
    let mut k = from;
    loop {
        k = escape::run(bytes, k, escape::PARAM);
        if stop(*bytes.get(k)?) {
            return Some(k);
        }
        k += 1;
    }
}

/// Iterator over `?hname=hvalue&...` headers: (hname, hvalue), both raw.
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.rest?;
        // '&' is not an hnv char, so it always separates headers (§25.1).
        let seg = match r.split_once('&') {
            Some((seg, more)) => {
                self.rest = Some(more);
                seg
            }
            None => {
                self.rest = None;
                r
            }
        };
        Some(seg.split_once('=').unwrap_or((seg, "")))
    }
}

/// Parses what follows "sip:"/"sips:". `raw` is the whole URI, `rest` its suffix
/// starting at byte offset `base`.
pub(super) fn parse_sip<'a>(raw: &'a str, scheme: Scheme, rest: &'a str, base: usize) -> Result<SipUri<'a>, UriError> {
    // Userinfo ends at '@'. No other component may contain a raw '@' (user,
    // password, paramchar and hnv chars all exclude it, §25.1), so the first '@' is
    // the only one a valid URI can have. We must NOT stop the search at ';' or '?':
    // both are user-unreserved, see RFC 4475 §3.1.1.9 semiuri
    // ("sip:user;par=u%40example.net@example.com") and §3.1.1.2 intmeth (user
    // containing "crazy?,/;;*"). With no '@', there is no userinfo and a ';' starts
    // the uri-parameters.
    let (user, password, hostpart, hbase) = match scan::find_any(rest.as_bytes(), 0, [b'@']) {
        Some(at) => {
            let (userinfo, after) = split_around(rest, at).ok_or(UriError::new(base, "bad user part"))?;
            let (user, password) = parse_userinfo(userinfo, base)?;
            (Some(user), password, after, base + at + 1)
        }
        None => (None, None, rest, base),
    };

    // hostport ends at the first ';' (uri-parameters) or '?' (headers); neither can
    // occur inside a host, not even inside an IPv6reference.
    let (host, port, hp_len) = match host_port_prefix(hostpart) {
        // The common forms, found without searching for the end first.
        Some((host, port, len)) if matches!(hostpart.as_bytes().get(len), None | Some(b';' | b'?')) => {
            (host, port, len)
        }
        _ => {
            let len = memchr::memchr2(b';', b'?', hostpart.as_bytes()).unwrap_or(hostpart.len());
            let hp = hostpart.get(..len).ok_or(UriError::new(hbase, "bad host"))?;
            let (host, port) = host_port(hp).map_err(|e| e.shift(hbase))?;
            (host, port, len)
        }
    };
    let tail = hostpart.get(hp_len..).ok_or(UriError::new(hbase + hp_len, "bad host"))?;
    let (params, headers) = check_tail(tail, hbase + hp_len)?;
    Ok(SipUri { scheme, user, password, host, port, raw, params, headers })
}

/// `s` without its byte `at`, as the text before and after it (`at` must be the
/// index of an ASCII byte).
fn split_around(s: &str, at: usize) -> Option<(&str, &str)> {
    Some((s.get(..at)?, s.get(at + 1..)?))
}

/// `userinfo = ( user / telephone-subscriber ) [ ":" password ]` (without the '@').
/// ':' is in neither the user nor the password charset, so the first one splits.
fn parse_userinfo(userinfo: &str, base: usize) -> Result<(&str, Option<&str>), UriError> {
    let bytes = userinfo.as_bytes();
    let user_end = match escape::scan(bytes, 0, escape::USER) {
        Ok(i) if matches!(bytes.get(i), None | Some(b':')) => i,
        Ok(i) => return Err(UriError::new(base + i, "invalid character in user part")),
        Err(i) => return Err(UriError::new(base + i, "bad %-escape")),
    };
    // user = 1*( ... ): an empty user ("sip:@host", "sip::pw@host") is invalid.
    if user_end == 0 {
        return Err(UriError::new(base, "empty user part"));
    }
    if user_end == bytes.len() {
        return Ok((userinfo, None));
    }
    let (user, password) = split_around(userinfo, user_end).ok_or(UriError::new(base, "bad user part"))?;
    // password = *( ... ): may be empty.
    check_class(password, base + user_end + 1, escape::PASSWORD, "invalid character in password")?;
    Ok((user, Some(password)))
}

/// Checks what follows hostport (`tail`, at offset `base`): `uri-parameters [ "?"
/// headers ]`, and splits it into the parameters and the header text after '?'.
///
/// `uri-parameters = *( ";" uri-parameter )`, `other-param = pname [ "=" pvalue ]`,
/// `pname = 1*paramchar`, `pvalue = 1*paramchar` (§25.1). Known parameters
/// (transport, ttl, ...) are not checked beyond this generic syntax, so that unusual
/// but harmless values do not make the whole URI unusable; their accessors return
/// None when a value is malformed.
///
/// Neither ';', '=' nor '?' is a paramchar, so a single left-to-right scan finds the
/// parameter boundaries and the start of the headers.
fn check_tail(tail: &str, base: usize) -> Result<(&str, &str), UriError> {
    let bytes = tail.as_bytes();
    let err = |i: usize, reason| UriError::new(base + i, reason);
    let param_chars = |from| escape::scan(bytes, from, escape::PARAM).map_err(|i| err(i, "bad %-escape"));
    let mut i = 0;
    while bytes.get(i) == Some(&b';') {
        let name = i + 1;
        let mut end = param_chars(name)?;
        match bytes.get(end) {
            None | Some(b';' | b'=' | b'?') if end == name => return Err(err(name, "empty parameter name")),
            Some(b'=') => {
                let value = end + 1;
                end = param_chars(value)?;
                if end == value && matches!(bytes.get(end), None | Some(b';' | b'?')) {
                    return Err(err(value, "empty parameter value"));
                }
            }
            _ => {}
        }
        match bytes.get(end) {
            None | Some(b';' | b'?') => i = end,
            Some(_) => return Err(err(end, "invalid character in parameter")),
        }
    }
    match bytes.get(i) {
        None => Ok((tail, "")),
        Some(b'?') => {
            let (params, headers) = split_around(tail, i).ok_or(err(i, "bad header"))?;
            check_headers(headers, base + i + 1)?;
            Ok((params, headers))
        }
        Some(_) => Err(err(0, "bad parameter")),
    }
}

/// `headers = "?" header *( "&" header )`, `header = hname "=" hvalue`,
/// `hname = 1*(...)`, `hvalue = *(...)` (§25.1). `headers` is the text after '?'.
fn check_headers(headers: &str, base: usize) -> Result<(), UriError> {
    let bytes = headers.as_bytes();
    let err = |i: usize, reason| UriError::new(base + i, reason);
    let header_chars = |from| escape::scan(bytes, from, escape::HEADER);
    let mut seg = 0;
    loop {
        // hname, up to the '=' that every header must have.
        let name_end = match header_chars(seg) {
            Ok(i) if bytes.get(i) == Some(&b'=') => i,
            stop => {
                // Report the missing '=' first, as a split on '&' then '=' would.
                let seg_bytes = bytes.get(seg..).unwrap_or_default();
                let seg_len = memchr::memchr(b'&', seg_bytes).unwrap_or(seg_bytes.len());
                if !seg_bytes.get(..seg_len).unwrap_or_default().contains(&b'=') {
                    return Err(err(seg, "header without '='"));
                }
                return Err(match stop {
                    Ok(i) => err(i, "invalid character in header"),
                    Err(i) => err(i, "bad %-escape"),
                });
            }
        };
        if name_end == seg {
            return Err(err(seg, "empty header name"));
        }
        match header_chars(name_end + 1) {
            Ok(i) => match bytes.get(i) {
                None => return Ok(()),
                Some(b'&') => seg = i + 1,
                Some(_) => return Err(err(i, "invalid character in header")),
            },
            Err(i) => return Err(err(i, "bad %-escape")),
        }
    }
}
