//! `tel:` URIs (RFC 3966 §3).
//!
//! ```text
//! telephone-uri        = "tel:" telephone-subscriber
//! telephone-subscriber = global-number / local-number
//! global-number-digits = "+" *phonedigit DIGIT *phonedigit
//! local-number-digits  = *phonedigit-hex (HEXDIG / "*" / "#") *phonedigit-hex
//! parameter            = ";" pname ["=" pvalue ]
//! pname                = 1*( alphanum / "-" )
//! visual-separator     = "-" / "." / "(" / ")"
//! ```

use std::fmt;

use super::error::UriError;
use super::escape::{self, check_chars, check_plain};
use super::sip::{find_param, Params};

/// A parsed tel: URI; borrows from the input.
///
/// The derived `PartialEq` is textual; use [`TelUri::equivalent`] for RFC 3966 §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelUri<'a> {
    /// As written, e.g. "+1-201-555-0123" (visual separators kept).
    pub number: &'a str,
    /// ";name[=value]..." ("" if none).
    params: &'a str,
    /// The whole URI text.
    raw: &'a str,
}

impl<'a> TelUri<'a> {
    /// A global number starts with '+' (RFC 3966 §5.1.4).
    pub fn is_global(&self) -> bool {
        self.number.starts_with('+')
    }

    /// Parameter lookup, name case-insensitive (RFC 3966 §3: "case-insensitive").
    /// `Some(None)` for a parameter without value. Value is raw.
    pub fn param(&self, name: &str) -> Option<Option<&'a str>> {
        find_param(self.params(), name)
    }

    /// All parameters in order, raw.
    pub fn params(&self) -> Params<'a> {
        Params::new(self.params)
    }

    /// Raw parameter text starting with ';' ("" if none).
    pub fn params_raw(&self) -> &'a str {
        self.params
    }

    /// The `phone-context` descriptor (RFC 3966 §5.1.5): a domain name or a
    /// global-number-digits prefix.
    pub fn phone_context(&self) -> Option<&'a str> {
        self.param("phone-context").flatten()
    }

    /// The exact original text.
    pub fn as_str(&self) -> &'a str {
        self.raw
    }

    /// The scheme as written (e.g. "TEL").
    pub(super) fn scheme_text(&self) -> &'a str {
        self.raw.get(..3).unwrap_or("tel")
    }
}

impl fmt::Display for TelUri<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw)
    }
}

/// `visual-separator = "-" / "." / "(" / ")"` (RFC 3966 §3).
pub(crate) fn is_visual_separator(b: u8) -> bool {
    matches!(b, b'-' | b'.' | b'(' | b')')
}

/// Parameter values: RFC 3966 `pvalue = 1*paramchar` (same set as SIP's paramchar),
/// widened to RFC 2396 `uric` minus ';' because `isub = ";isub=" 1*uric`.
fn is_tel_value_char(b: u8) -> bool {
    escape::is_param_char(b) || matches!(b, b'=' | b',' | b'?' | b'@')
}

fn is_pname_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Parses what follows "tel:". `raw` is the whole URI, `rest` its suffix starting at
/// byte offset `base`.
///
/// Lenient on one point: RFC 3966 §5.1.5 requires `phone-context` on local numbers
/// and the grammar only allows it there; we accept local numbers without it and
/// global numbers with it, leaving policy to the caller (`is_global`,
/// `phone_context`).
pub(super) fn parse_tel<'a>(raw: &'a str, rest: &'a str, base: usize) -> Result<TelUri<'a>, UriError> {
    let (number, params) = match rest.find(';') {
        Some(i) => rest.split_at_checked(i).ok_or(UriError::new(base, "bad telephone number"))?,
        None => (rest, ""),
    };
    check_number(number, base)?;
    check_tel_params(params, base + number.len())?;
    Ok(TelUri { number, params, raw })
}

fn check_number(number: &str, base: usize) -> Result<(), UriError> {
    let (digits, dbase, is_digit): (&str, usize, fn(u8) -> bool) = match number.strip_prefix('+') {
        // global-number-digits: phonedigit = DIGIT / visual-separator
        Some(d) => (d, base + 1, |b| b.is_ascii_digit()),
        // local-number-digits: phonedigit-hex = HEXDIG / "*" / "#" / visual-separator
        None => (number, base, |b| b.is_ascii_hexdigit() || b == b'*' || b == b'#'),
    };
    if let Some(i) = digits.bytes().position(|b| !(is_digit(b) || is_visual_separator(b))) {
        return Err(UriError::new(dbase + i, "bad telephone number"));
    }
    // At least one real digit: "tel:+" or "tel:--" are not numbers.
    if !digits.bytes().any(is_digit) {
        return Err(UriError::new(base, "bad telephone number"));
    }
    Ok(())
}

fn check_tel_params(params: &str, base: usize) -> Result<(), UriError> {
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
        check_plain(name, pos, is_pname_char, "invalid character in parameter")?;
        if let Some(v) = value {
            let vpos = pos + name.len() + 1;
            if v.is_empty() {
                return Err(UriError::new(vpos, "empty parameter value"));
            }
            check_chars(v, vpos, is_tel_value_char, "invalid character in parameter")?;
        }
        pos += seg.len() + 1;
    }
    Ok(())
}
