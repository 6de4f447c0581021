//! URI equivalence: RFC 3261 §19.1.4 (sip/sips), RFC 3966 §4 (tel), and a
//! conservative rule for other schemes. Allocation-free.

use super::any::{AbsoluteUri, Uri};
use super::escape::eq_escaped;
use super::sip::SipUri;
use super::tel::{is_visual_separator, TelUri};

impl Uri<'_> {
    /// URI equality per RFC 3261 §19.1.4 (for sip/sips), RFC 3966 §4 for tel, and
    /// case-insensitive scheme + exact rest for others. URIs of different kinds are
    /// never equivalent.
    pub fn equivalent(&self, other: &Uri<'_>) -> bool {
        match (self, other) {
            (Uri::Sip(a), Uri::Sip(b)) => a.equivalent(b),
            (Uri::Tel(a), Uri::Tel(b)) => a.equivalent(b),
            (Uri::Other(a), Uri::Other(b)) => a.equivalent(b),
            _ => false,
        }
    }
}

impl AbsoluteUri<'_> {
    /// Scheme case-insensitive (RFC 3986 §3.1), the rest byte-for-byte: we know
    /// nothing about the scheme's own normalisation rules, so we do not guess.
    pub fn equivalent(&self, other: &AbsoluteUri<'_>) -> bool {
        self.scheme.eq_ignore_ascii_case(other.scheme) && self.rest == other.rest
    }
}

/// uri-parameters that must match when present in EITHER URI (§19.1.4: "A user,
/// ttl, or method uri-parameter appearing in only one URI never matches, even if it
/// contains the default value"; "A URI that includes an maddr parameter will not
/// match a URI that contains no maddr parameter"; and transport, because "a URI
/// omitting any component with a default value will not match a URI explicitly
/// containing that component with its default value ... the same is true for the
/// transport-parameter").
const MUST_MATCH: [&str; 5] = ["user", "ttl", "method", "maddr", "transport"];

impl SipUri<'_> {
    /// RFC 3261 §19.1.4 equivalence.
    ///
    /// * sip and sips are never equivalent.
    /// * user and password: present in both or neither, compared case-sensitively
    ///   after unescaping non-reserved characters.
    /// * host case-insensitive (IP addresses by value; a name never equals an IP).
    /// * port: an explicit 5060 does NOT equal an absent port.
    /// * parameters: order irrelevant, names case-insensitive, values
    ///   case-insensitive; user/ttl/method/maddr/transport must match if present in
    ///   either URI, other parameters only if present in both.
    /// * headers are never ignored: both sets must be equal (names case-insensitive,
    ///   values case-sensitive).
    ///
    /// "Characters other than those in the reserved set are equivalent to their
    /// %HH encodings", so `%61lice` equals `alice` but `%3B` does not equal `;`.
    pub fn equivalent(&self, other: &SipUri<'_>) -> bool {
        self.scheme == other.scheme
            && opt_eq(self.user, other.user, false)
            && opt_eq(self.password, other.password, false)
            && self.host.eq_ignore_case(&other.host)
            && self.port == other.port
            && params_cover(self, other)
            && params_cover(other, self)
            && headers_cover(self, other)
            && headers_cover(other, self)
    }
}

fn opt_eq(a: Option<&str>, b: Option<&str>, ignore_case: bool) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => eq_escaped(x, y, ignore_case),
        _ => false,
    }
}

/// Every parameter of `a` is acceptable with respect to `b`. Duplicated names are
/// handled set-wise (some same-named parameter of `b` must match) so that the
/// relation stays reflexive and symmetric.
fn params_cover(a: &SipUri<'_>, b: &SipUri<'_>) -> bool {
    a.params().all(|(name, value)| {
        let mut seen = false;
        for (n2, v2) in b.params() {
            if eq_escaped(name, n2, true) {
                seen = true;
                if opt_eq(value, v2, true) {
                    return true;
                }
            }
        }
        // Present in both but no value matched: not equivalent. Present only in
        // `a`: ignored unless it is one of the must-match parameters.
        !seen && !MUST_MATCH.iter().any(|m| eq_escaped(name, m, true))
    })
}

/// "Any present header component MUST be present in both URIs and match" (§19.1.4).
/// Header values are compared case-sensitively after unescaping; header-specific
/// rules of §20 are out of scope for a URI module.
fn headers_cover(a: &SipUri<'_>, b: &SipUri<'_>) -> bool {
    a.headers()
        .all(|(name, value)| b.headers().any(|(n2, v2)| eq_escaped(name, n2, true) && eq_escaped(value, v2, false)))
}

impl TelUri<'_> {
    /// RFC 3966 §4 equivalence:
    ///
    /// * both global or both local;
    /// * numbers equal after removing visual separators (case-insensitive, so hex
    ///   digits of local numbers match in either case);
    /// * parameters compared as a set, by name regardless of order; a name present in
    ///   only one URI makes them different;
    /// * phone-context compared as a host name, or digit-by-digit without visual
    ///   separators when it is global-number-digits; ext likewise without separators;
    /// * everything case-insensitive.
    pub fn equivalent(&self, other: &TelUri<'_>) -> bool {
        self.is_global() == other.is_global()
            && digits_eq(self.number, other.number)
            && tel_params_cover(self, other)
            && tel_params_cover(other, self)
    }
}

/// Compare ignoring visual separators, ASCII case-insensitively.
fn digits_eq(a: &str, b: &str) -> bool {
    let x = a.bytes().filter(|b| !is_visual_separator(*b));
    let y = b.bytes().filter(|b| !is_visual_separator(*b));
    x.map(|c| c.to_ascii_lowercase()).eq(y.map(|c| c.to_ascii_lowercase()))
}

fn tel_value_eq(name: &str, a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let digits = name.eq_ignore_ascii_case("ext")
                || (name.eq_ignore_ascii_case("phone-context") && x.starts_with('+') && y.starts_with('+'));
            if digits {
                digits_eq(x, y)
            } else {
                eq_escaped(x, y, true)
            }
        }
        _ => false,
    }
}

fn tel_params_cover(a: &TelUri<'_>, b: &TelUri<'_>) -> bool {
    a.params()
        .all(|(name, value)| b.params().any(|(n2, v2)| name.eq_ignore_ascii_case(n2) && tel_value_eq(name, value, v2)))
}
