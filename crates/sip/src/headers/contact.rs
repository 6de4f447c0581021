//! Contact (RFC 3261 §20.10): `"*"` or a list of addresses with `q` and `expires` parameters.

use super::error::ValueError;
use super::name_addr::NameAddr;
use crate::scan;

/// One contact value (the list has been split at top-level commas).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contact<'a> {
    /// `Contact: *`, only meaningful in a REGISTER with `Expires: 0` (RFC 3261 §10.2.2).
    Star,
    Address(NameAddr<'a>),
}

impl<'a> Contact<'a> {
    pub fn parse(s: &'a [u8]) -> Result<Contact<'a>, ValueError> {
        let i = scan::skip_lws(s, 0);
        if s.get(i) == Some(&b'*') && scan::skip_lws(s, i + 1) == s.len() {
            return Ok(Contact::Star);
        }
        let addr = NameAddr::parse(s)?;
        // Check the scalar parameters now so that an out-of-range value is a parse error
        // (RFC 4475 §3.1.2.4: expires over 2**32-1) rather than a surprise later.
        if let Some(v) = addr.params.get("expires") {
            let v = v.ok_or(ValueError::at(0, "expires parameter without value"))?;
            scan::parse_u32(v.as_bytes()).ok_or(ValueError::at(0, "expires parameter out of range"))?;
        }
        if let Some(v) = addr.params.get("q") {
            parse_qvalue(v.unwrap_or("")).ok_or(ValueError::at(0, "bad q-value"))?;
        }
        Ok(Contact::Address(addr))
    }

    pub fn address(&self) -> Option<&NameAddr<'a>> {
        match self {
            Contact::Star => None,
            Contact::Address(a) => Some(a),
        }
    }

    /// The `expires` parameter in seconds.
    pub fn expires(&self) -> Option<u32> {
        self.address()?.params.get("expires").flatten().and_then(|v| scan::parse_u32(v.as_bytes()))
    }

    /// The `q` parameter in thousandths (0..=1000); `None` when absent.
    pub fn q(&self) -> Option<u16> {
        self.address()?.params.get("q").flatten().and_then(parse_qvalue)
    }
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, returned in thousandths.
pub fn parse_qvalue(v: &str) -> Option<u16> {
    let (int, frac) = match v.split_once('.') {
        Some((i, f)) => (i, f),
        None => (v, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_val = frac.bytes().fold(0u16, |a, d| a * 10 + u16::from(d - b'0')) * 10u16.pow(3 - frac.len() as u32);
    match int {
        "0" => Some(frac_val),
        "1" if frac_val == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_params() {
        assert_eq!(Contact::parse(b" * ").unwrap(), Contact::Star);
        let c = Contact::parse(b"<sip:a@b>;q=0.7;expires=3600").unwrap();
        assert_eq!(c.q(), Some(700));
        assert_eq!(c.expires(), Some(3600));
        assert!(Contact::parse(b"<sip:a@b>;expires=280297596632815").is_err());
        assert!(Contact::parse(b"<sip:a@b>;q=1.5").is_err());
    }

    #[test]
    fn qvalues() {
        assert_eq!(parse_qvalue("0"), Some(0));
        assert_eq!(parse_qvalue("0.33"), Some(330));
        assert_eq!(parse_qvalue("1.000"), Some(1000));
        assert_eq!(parse_qvalue("1.001"), None);
        assert_eq!(parse_qvalue("0.1234"), None);
        assert_eq!(parse_qvalue(""), None);
    }
}
