//! `SIP-URI` / `SIPS-URI` (RFC 3261 §19.1.1, §25.1).
//!
//! ```text
//! SIP-URI  = "sip:"  [ userinfo ] hostport uri-parameters [ headers ]
//! SIPS-URI = "sips:" [ userinfo ] hostport uri-parameters [ headers ]
//! userinfo = ( user / telephone-subscriber ) [ ":" password ] "@"
//! ```

use std::borrow::Cow;
use std::fmt;

use super::escape::{self, check_chars};
use super::host::{parse_host_port, Host};
use super::{Uri, UriError};

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
    /// Parses a whole sip:/sips: URI; any other scheme is an error.
    pub fn parse(input: &'a [u8]) -> Result<SipUri<'a>, UriError> {
        match Uri::parse(input)? {
            Uri::Sip(u) => Ok(u),
            _ => Err(UriError::new(0, "not a sip or sips URI")),
        }
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
        // ';' is not a paramchar, so it always separates parameters (§25.1).
        let seg = match r.split_once(';') {
            Some((seg, more)) => {
                self.rest = Some(more);
                seg
            }
            None => {
                self.rest = None;
                r
            }
        };
        Some(match seg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (seg, None),
        })
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
    let (user, password, hostpart, hbase) = match rest.split_once('@') {
        Some((userinfo, after)) => {
            let (user, password) = parse_userinfo(userinfo, base)?;
            (Some(user), password, after, base + userinfo.len() + 1)
        }
        None => (None, None, rest, base),
    };

    // hostport ends at the first ';' (uri-parameters) or '?' (headers); neither can
    // occur inside a host, not even inside an IPv6reference.
    let (hp, tail) = match hostpart.find([';', '?']) {
        Some(i) => hostpart.split_at_checked(i).ok_or(UriError::new(hbase, "bad host"))?,
        None => (hostpart, ""),
    };
    let (host, port) = parse_host_port(hp.as_bytes()).map_err(|e| e.shift(hbase))?;

    let pbase = hbase + hp.len();
    let (params, headers) = match tail.split_once('?') {
        Some((p, h)) => (p, Some(h)),
        None => (tail, None),
    };
    check_params(params, pbase)?;
    let headers = match headers {
        Some(h) => {
            check_headers(h, pbase + params.len() + 1)?;
            h
        }
        None => "",
    };

    Ok(SipUri { scheme, user, password, host, port, raw, params, headers })
}

/// `userinfo = ( user / telephone-subscriber ) [ ":" password ]` (without the '@').
/// ':' is in neither the user nor the password charset, so the first one splits.
fn parse_userinfo(userinfo: &str, base: usize) -> Result<(&str, Option<&str>), UriError> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    // user = 1*( ... ): an empty user ("sip:@host", "sip::pw@host") is invalid.
    if user.is_empty() {
        return Err(UriError::new(base, "empty user part"));
    }
    check_chars(user, base, escape::is_user_char, "invalid character in user part")?;
    if let Some(p) = password {
        // password = *( ... ): may be empty.
        check_chars(p, base + user.len() + 1, escape::is_password_char, "invalid character in password")?;
    }
    Ok((user, password))
}

/// `uri-parameters = *( ";" uri-parameter )`, `other-param = pname [ "=" pvalue ]`,
/// `pname = 1*paramchar`, `pvalue = 1*paramchar` (§25.1). Known parameters
/// (transport, ttl, ...) are not checked beyond this generic syntax, so that unusual
/// but harmless values do not make the whole URI unusable; their accessors return
/// None when a value is malformed.
fn check_params(params: &str, base: usize) -> Result<(), UriError> {
    let body = match params.strip_prefix(';') {
        Some(b) => b,
        None if params.is_empty() => return Ok(()),
        None => return Err(UriError::new(base, "bad parameter")),
    };
    let mut pos = base + 1;
    for seg in body.split(';') {
        let (name, value) = match seg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (seg, None),
        };
        if name.is_empty() {
            return Err(UriError::new(pos, "empty parameter name"));
        }
        check_chars(name, pos, escape::is_param_char, "invalid character in parameter")?;
        if let Some(v) = value {
            let vpos = pos + name.len() + 1;
            if v.is_empty() {
                return Err(UriError::new(vpos, "empty parameter value"));
            }
            check_chars(v, vpos, escape::is_param_char, "invalid character in parameter")?;
        }
        pos += seg.len() + 1;
    }
    Ok(())
}

/// `headers = "?" header *( "&" header )`, `header = hname "=" hvalue`,
/// `hname = 1*(...)`, `hvalue = *(...)` (§25.1).
fn check_headers(headers: &str, base: usize) -> Result<(), UriError> {
    let mut pos = base;
    for seg in headers.split('&') {
        let (name, value) = seg.split_once('=').ok_or(UriError::new(pos, "header without '='"))?;
        if name.is_empty() {
            return Err(UriError::new(pos, "empty header name"));
        }
        check_chars(name, pos, escape::is_header_char, "invalid character in header")?;
        check_chars(value, pos + name.len() + 1, escape::is_header_char, "invalid character in header")?;
        pos += seg.len() + 1;
    }
    Ok(())
}
