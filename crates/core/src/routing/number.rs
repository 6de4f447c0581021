//! Number handling of a dial plan: what a rule does to the user part of the Request-URI sent
//! on (strip and prepend digits, `+` to and from an international prefix), and the tel: URI
//! (RFC 3966) as a gateway takes it: a sip: URI with `user=phone` (RFC 3261 §19.1.6).

use herald_sip::uri::{SipUri, TelUri, Uri};
use std::borrow::Cow;

/// What happens to a leading `+` (the global-number prefix, RFC 3966 §5.1.4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Plus {
    /// Left as it is.
    #[default]
    Keep,
    /// `+` becomes this international prefix: with `"00"`, `+441234` → `00441234`.
    ToPrefix(String),
    /// This international prefix becomes `+`: with `"00"`, `00441234` → `+441234`.
    FromPrefix(String),
}

/// The number rules of one rule, applied in this order: `plus`, `strip`, `prepend`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumberRules {
    pub plus: Plus,
    /// Leading characters removed.
    pub strip: usize,
    /// Prepended.
    pub prepend: String,
}

impl NumberRules {
    /// Whether the rules leave every number as it is.
    pub fn is_identity(&self) -> bool {
        self.plus == Plus::Keep && self.strip == 0 && self.prepend.is_empty()
    }

    /// The number after the rules. Stripping more than the number has leaves it empty.
    pub fn apply(&self, number: &str) -> String {
        let converted: Cow<'_, str> = match &self.plus {
            Plus::Keep => Cow::Borrowed(number),
            Plus::ToPrefix(p) => match number.strip_prefix('+') {
                Some(rest) => Cow::Owned(format!("{p}{rest}")),
                None => Cow::Borrowed(number),
            },
            Plus::FromPrefix(p) => match number.strip_prefix(p.as_str()).filter(|_| !p.is_empty()) {
                Some(rest) => Cow::Owned(format!("+{rest}")),
                None => Cow::Borrowed(number),
            },
        };
        let cut = converted.char_indices().nth(self.strip).map_or(converted.len(), |(i, _)| i);
        format!("{}{}", self.prepend, &converted[cut..])
    }
}

/// A telephone number as written, without its visual separators (RFC 3966 §5.1.1: they carry
/// no meaning and are ignored in comparisons).
pub fn without_separators(number: &str) -> Cow<'_, str> {
    if number.bytes().any(is_visual_separator) {
        Cow::Owned(number.chars().filter(|c| !c.is_ascii() || !is_visual_separator(*c as u8)).collect())
    } else {
        Cow::Borrowed(number)
    }
}

fn is_visual_separator(b: u8) -> bool {
    matches!(b, b'-' | b'.' | b'(' | b')')
}

/// The user the routing table matches for `uri`: a tel: URI's number, a `user=phone` SIP
/// URI's number (its user up to the first `;`), both without visual separators; else the
/// unescaped user part. `None` without a user.
pub fn match_user<'a>(uri: &Uri<'a>) -> Option<Cow<'a, str>> {
    match uri {
        Uri::Tel(t) => Some(without_separators(t.number)),
        Uri::Sip(s) => sip_user(s),
        Uri::Other(_) => None,
    }
}

fn sip_user<'a>(s: &SipUri<'a>) -> Option<Cow<'a, str>> {
    let raw = s.user?;
    if is_phone(s) {
        return Some(without_separators(raw.split(';').next().unwrap_or(raw)));
    }
    Some(match s.user_unescaped()? {
        Cow::Borrowed(b) => String::from_utf8_lossy(b),
        Cow::Owned(v) => Cow::Owned(String::from_utf8_lossy(&v).into_owned()),
    })
}

fn is_phone(s: &SipUri<'_>) -> bool {
    s.user_param().is_some_and(|p| p.eq_ignore_ascii_case("phone"))
}

/// The Request-URI to send on for `uri` after `rules`, or `None` when it stays as it is.
/// `tel_host`: where a tel: URI goes (a gateway, a next hop, a served domain): it becomes
/// `sip:NUMBER;PARAMS@HOST;user=phone` (RFC 3261 §19.1.6; a global number keeps its `+` unless
/// a rule changes it); without one a tel: URI stays a tel: URI.
pub fn rewrite(uri: &Uri<'_>, rules: &NumberRules, tel_host: Option<&str>) -> Option<String> {
    match uri {
        Uri::Tel(t) => rewrite_tel(t, rules, tel_host),
        Uri::Sip(s) => rewrite_sip(s, rules),
        Uri::Other(_) => None,
    }
}

fn rewrite_tel(t: &TelUri<'_>, rules: &NumberRules, tel_host: Option<&str>) -> Option<String> {
    let number = without_separators(t.number);
    let number = if rules.is_identity() { number.into_owned() } else { rules.apply(&number) };
    match tel_host {
        Some(host) => Some(format!("sip:{}{}@{host};user=phone", escape_user(&number), t.params_raw())),
        None if rules.is_identity() => None,
        None => Some(format!("tel:{}{}", escape_user(&number), t.params_raw())),
    }
}

fn rewrite_sip(s: &SipUri<'_>, rules: &NumberRules) -> Option<String> {
    if rules.is_identity() {
        return None;
    }
    let raw_user = s.user?;
    let (number, tail) = if is_phone(s) {
        let (n, t) = raw_user.split_at(raw_user.find(';').unwrap_or(raw_user.len()));
        (without_separators(n).into_owned(), t)
    } else {
        (sip_user(s)?.into_owned(), "")
    };
    let text = s.as_str();
    // The userinfo ends at the first '@': neither user, password nor the scheme may hold one
    // unescaped (RFC 3261 §25.1).
    let at = text.find('@')?;
    let scheme_end = text.find(':')? + 1;
    let password = s.password.map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!("{}{}{tail}{password}{}", &text[..scheme_end], escape_user(&rules.apply(&number)), &text[at..]))
}

/// `user = 1*( unreserved / escaped / user-unreserved )` (RFC 3261 §25.1): anything else is
/// %-escaped.
fn escape_user(user: &str) -> Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.!~*'()&=+$,;?/".contains(&b);
    if user.bytes().all(plain) {
        return Cow::Borrowed(user);
    }
    let mut out = String::with_capacity(user.len() + 8);
    for b in user.bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(out)
}
