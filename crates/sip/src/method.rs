//! SIP methods (RFC 3261 §7.1 plus the common extensions). Unknown methods are kept as written:
//! a proxy must forward them (RFC 3261 §16.1, RFC 4475 §3.1.1.2).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method<'a> {
    Invite,
    Ack,
    Bye,
    Cancel,
    Register,
    Options,
    Info,
    Prack,
    Subscribe,
    Notify,
    Update,
    Message,
    Refer,
    Publish,
    /// Any other token, case preserved. Methods are case-sensitive (RFC 3261 §7.1), so
    /// "invite" is an extension method, not INVITE.
    Extension(&'a str),
}

impl<'a> Method<'a> {
    /// Maps a method token; the caller has checked it is a non-empty token.
    ///
    /// Dispatched on the length and the first octet, then compared as a whole: a `match` on
    /// the strings compared the text with the names one after another (callgrind: about 50
    /// instructions per request and per CSeq, twice per message).
    #[inline]
    pub fn from_token(t: &'a str) -> Method<'a> {
        Method::known(t.as_bytes()).unwrap_or(Method::Extension(t))
    }

    /// The method these octets name exactly, when it is one this enum names (its name is then
    /// a token of ASCII letters); `None` for any other text. Always inlined: as a call from
    /// `CSeq::parse_text` its `Option<Method>` went through memory (callgrind: about 15
    /// instructions a message).
    #[inline(always)]
    pub(crate) fn known(b: &[u8]) -> Option<Method<'static>> {
        let known = match (b.len(), b.first()) {
            (3, Some(b'A')) if b == b"ACK" => Method::Ack,
            (3, Some(b'B')) if b == b"BYE" => Method::Bye,
            (4, Some(b'I')) if b == b"INFO" => Method::Info,
            (5, Some(b'P')) if b == b"PRACK" => Method::Prack,
            (5, Some(b'R')) if b == b"REFER" => Method::Refer,
            (6, Some(b'I')) if b == b"INVITE" => Method::Invite,
            (6, Some(b'C')) if b == b"CANCEL" => Method::Cancel,
            (6, Some(b'N')) if b == b"NOTIFY" => Method::Notify,
            (6, Some(b'U')) if b == b"UPDATE" => Method::Update,
            (7, Some(b'O')) if b == b"OPTIONS" => Method::Options,
            (7, Some(b'M')) if b == b"MESSAGE" => Method::Message,
            (7, Some(b'P')) if b == b"PUBLISH" => Method::Publish,
            (8, Some(b'R')) if b == b"REGISTER" => Method::Register,
            (9, Some(b'S')) if b == b"SUBSCRIBE" => Method::Subscribe,
            _ => return None,
        };
        Some(known)
    }

    pub fn as_str(&self) -> &'a str {
        match self {
            Method::Extension(s) => s,
            known => known.known_name().unwrap_or_default(),
        }
    }

    /// The name of a method this enum names, as a `'static` str (`None` for an extension): a
    /// transaction key holds it without allocating (herald-core's `MethodKey`).
    pub fn known_name(&self) -> Option<&'static str> {
        Some(match self {
            Method::Invite => "INVITE",
            Method::Ack => "ACK",
            Method::Bye => "BYE",
            Method::Cancel => "CANCEL",
            Method::Register => "REGISTER",
            Method::Options => "OPTIONS",
            Method::Info => "INFO",
            Method::Prack => "PRACK",
            Method::Subscribe => "SUBSCRIBE",
            Method::Notify => "NOTIFY",
            Method::Update => "UPDATE",
            Method::Message => "MESSAGE",
            Method::Refer => "REFER",
            Method::Publish => "PUBLISH",
            Method::Extension(_) => return None,
        })
    }

    pub fn is_known(&self) -> bool {
        !matches!(self, Method::Extension(_))
    }
}

impl fmt::Display for Method<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Method;

    /// The dispatch on length and first octet gives what a plain comparison with every name
    /// gives: each name maps to its method, and any other token (another case, one octet
    /// changed, cut or lengthened) is an extension kept as written.
    #[test]
    fn tokens_map_as_a_comparison_with_every_name() {
        let known = [
            Method::Invite,
            Method::Ack,
            Method::Bye,
            Method::Cancel,
            Method::Register,
            Method::Options,
            Method::Info,
            Method::Prack,
            Method::Subscribe,
            Method::Notify,
            Method::Update,
            Method::Message,
            Method::Refer,
            Method::Publish,
        ];
        let reference = |t: &str| known.iter().copied().find(|m| m.known_name() == Some(t));
        let mut tokens: Vec<String> = vec![String::new(), "X".into(), "INVITEX".into(), "SUBSCRIBEE".into()];
        for m in known {
            let name = m.known_name().expect("a known method");
            tokens.push(name.into());
            tokens.push(name.to_ascii_lowercase());
            tokens.push(name[..name.len() - 1].into());
            tokens.push(format!("{name}S"));
            for i in 0..name.len() {
                for b in [b'A', b'E', b'Z', b'-'] {
                    let mut t = name.as_bytes().to_vec();
                    t[i] = b;
                    tokens.push(String::from_utf8(t).expect("ASCII"));
                }
            }
        }
        for t in &tokens {
            let want = reference(t).unwrap_or(Method::Extension(t));
            assert_eq!(Method::from_token(t), want, "{t:?}");
        }
    }
}
