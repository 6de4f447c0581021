//! Authorization, Proxy-Authorization, WWW-Authenticate, Proxy-Authenticate and
//! Authentication-Info (RFC 3261 §20.7, §20.27, §20.28, §20.44, §25.1; RFC 7235 §2.1).
//!
//! Any scheme parses, not only Digest: a proxy must forward credentials it does not understand
//! unmodified (RFC 4475 §3.3.7).

use super::error::ValueError;
use crate::scan;

/// `auth-scheme LWS ( auth-param *(COMMA auth-param) / token68 )`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthValue<'a> {
    pub scheme: &'a str,
    pub params: AuthParams<'a>,
    /// RFC 7235 token68 form (e.g. Bearer), when the value is not a parameter list.
    pub token68: Option<&'a str>,
}

impl<'a> AuthValue<'a> {
    pub fn parse(s: &'a [u8]) -> Result<AuthValue<'a>, ValueError> {
        let i = scan::skip_lws(s, 0);
        let se = scan::token_end(s, i);
        if se == i {
            return Err(ValueError::at(i, "missing authentication scheme"));
        }
        let scheme = scan::ascii_str(&s[i..se]);
        let p = scan::skip_lws(s, se);
        if p == s.len() {
            return Ok(AuthValue { scheme, params: AuthParams { raw: &[] }, token68: None });
        }
        if p == se {
            return Err(ValueError::at(p, "expected whitespace after scheme"));
        }
        match AuthParams::parse(&s[p..]) {
            Ok(params) => Ok(AuthValue { scheme, params, token68: None }),
            Err(e) => {
                let t = &s[p..];
                let body = t.iter().take_while(|&&b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)).count();
                let pad = t[body..].iter().take_while(|&&b| b == b'=').count();
                if body > 0 && body + pad == t.len() {
                    Ok(AuthValue { scheme, params: AuthParams { raw: &[] }, token68: Some(scan::ascii_str(t)) })
                } else {
                    Err(ValueError::at(p + e.at, e.what))
                }
            }
        }
    }

    pub fn is_digest(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("Digest")
    }

    /// A parameter's value with the quotes of a quoted-string removed.
    pub fn param(&self, name: &str) -> Option<std::borrow::Cow<'a, str>> {
        self.params.get(name).map(super::unquote)
    }
}

/// A validated `auth-param *(COMMA auth-param)` list kept as raw text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthParams<'a> {
    raw: &'a [u8],
}

impl<'a> AuthParams<'a> {
    /// `auth-param = token EQUAL ( token / quoted-string )`; also the bare Authentication-Info
    /// list (RFC 3261 §20.6).
    pub fn parse(s: &'a [u8]) -> Result<AuthParams<'a>, ValueError> {
        let mut i = scan::skip_lws(s, 0);
        loop {
            let ne = scan::token_end(s, i);
            if ne == i {
                return Err(ValueError::at(i, "expected auth-param name"));
            }
            let eq = scan::skip_lws(s, ne);
            if s.get(eq) != Some(&b'=') {
                return Err(ValueError::at(eq, "expected '=' in auth-param"));
            }
            let v = scan::skip_lws(s, eq + 1);
            let ve = if s.get(v) == Some(&b'"') {
                scan::quoted_string_end(s, v).ok_or(ValueError::at(v, "unterminated quoted string"))?
            } else {
                scan::token_end(s, v)
            };
            if ve == v {
                return Err(ValueError::at(v, "empty auth-param value"));
            }
            i = scan::skip_lws(s, ve);
            match s.get(i) {
                None => return Ok(AuthParams { raw: s }),
                Some(b',') => i = scan::skip_lws(s, i + 1),
                Some(_) => return Err(ValueError::at(i, "expected ',' between auth-params")),
            }
        }
    }

    /// Raw value (quotes kept) of the parameter `name`, case-insensitive.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    pub fn iter(&self) -> AuthParamIter<'a> {
        AuthParamIter { s: self.raw, i: scan::skip_lws(self.raw, 0) }
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
}

/// Iterates `(name, raw value)` over a list that [`AuthParams::parse`] validated.
pub struct AuthParamIter<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Iterator for AuthParamIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.s;
        let ne = scan::token_end(s, self.i);
        if ne == self.i {
            return None;
        }
        let v = scan::skip_lws(s, scan::skip_lws(s, ne) + 1);
        let ve = if s.get(v) == Some(&b'"') { scan::quoted_string_end(s, v)? } else { scan::token_end(s, v) };
        let item = (scan::ascii_str(&s[self.i..ne]), std::str::from_utf8(&s[v..ve]).unwrap_or(""));
        let next = scan::skip_lws(s, ve);
        self.i = if s.get(next) == Some(&b',') { scan::skip_lws(s, next + 1) } else { s.len() };
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_credentials() {
        let v = AuthValue::parse(
            b"Digest username=\"bob\", realm=\"biloxi.com\",\r\n nonce=\"dcd98b\", uri=\"sip:bob@biloxi.com\", qop=auth, nc=00000001, cnonce=\"0a4f113b\", response=\"6629fae4\", algorithm=SHA-256",
        )
        .unwrap();
        assert!(v.is_digest());
        assert_eq!(v.param("username").as_deref(), Some("bob"));
        assert_eq!(v.params.get("nc"), Some("00000001"));
        assert_eq!(v.params.get("ALGORITHM"), Some("SHA-256"));
        assert_eq!(v.params.iter().count(), 9);
    }

    #[test]
    fn unknown_scheme_and_token68() {
        let v = AuthValue::parse(b"NoOneKnowsThisScheme opaque-data=here").unwrap();
        assert_eq!(v.scheme, "NoOneKnowsThisScheme");
        assert_eq!(v.params.get("opaque-data"), Some("here"));
        let b = AuthValue::parse(b"Bearer mF_9.B5f-4.1JqM==").unwrap();
        assert_eq!(b.token68, Some("mF_9.B5f-4.1JqM=="));
    }

    #[test]
    fn malformed() {
        assert!(AuthValue::parse(b"").is_err());
        assert!(AuthValue::parse(b"Digest realm=\"x").is_err());
        assert!(AuthValue::parse(b"Digest realm=x realm=y").is_err());
    }
}
