//! Header names: case-insensitive, with the compact forms of RFC 3261 §7.3.3 and §20 and the
//! registered compact forms of later RFCs.

use std::fmt;

macro_rules! header_names {
    ($( $variant:ident = $canonical:literal $(| $compact:literal)? ),* $(,)?) => {
        /// A header name known to herald, or `Other` (its text is kept in the message).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum HeaderName { $($variant,)* Other }

        impl HeaderName {
            /// Every name, `Other` last, in declaration order (`as usize` is the position).
            pub(crate) const ALL: &'static [HeaderName] = &[$(HeaderName::$variant,)* HeaderName::Other];

            /// Canonical (long) name, e.g. "Call-ID" for both "call-id" and "i".
            pub fn canonical(self) -> Option<&'static str> {
                match self { $(HeaderName::$variant => Some($canonical),)* HeaderName::Other => None }
            }

            /// The compact form, if the header has one.
            pub fn compact(self) -> Option<&'static str> {
                match self { $($(HeaderName::$variant => Some($compact),)?)* _ => None }
            }

            /// Recognises a name as written (any case, long or compact form). The names of
            /// nearly every line are recognised inline; the others in a call.
            #[inline]
            pub fn from_bytes(name: &[u8]) -> HeaderName {
                match common(name) {
                    Some(h) => h,
                    None => Self::uncommon(name),
                }
            }

            /// [`HeaderName::from_bytes`] for the names [`common`] does not know.
            #[inline(never)]
            fn uncommon(name: &[u8]) -> HeaderName {
                if name.len() == 1 {
                    let c = name[0].to_ascii_lowercase();
                    $($(if c == $compact.as_bytes()[0] { return HeaderName::$variant; })?)*
                    return HeaderName::Other;
                }
                // A length and first-byte check rejects almost every candidate in two compares.
                let (len, first) = (name.len(), name.first().map_or(0, u8::to_ascii_lowercase));
                $(if len == $canonical.len()
                    && first == $canonical.as_bytes()[0].to_ascii_lowercase()
                    && name.eq_ignore_ascii_case($canonical.as_bytes()) { return HeaderName::$variant; })*
                HeaderName::Other
            }
        }
    };
}

// Most frequent first: from_bytes tries them in this order.
header_names! {
    Via = "Via" | "v",
    From = "From" | "f",
    To = "To" | "t",
    CallId = "Call-ID" | "i",
    CSeq = "CSeq",
    MaxForwards = "Max-Forwards",
    ContentLength = "Content-Length" | "l",
    Contact = "Contact" | "m",
    Route = "Route",
    RecordRoute = "Record-Route",
    ContentType = "Content-Type" | "c",
    Expires = "Expires",
    Allow = "Allow",
    Supported = "Supported" | "k",
    UserAgent = "User-Agent",
    Authorization = "Authorization",
    ProxyAuthorization = "Proxy-Authorization",
    WwwAuthenticate = "WWW-Authenticate",
    ProxyAuthenticate = "Proxy-Authenticate",
    Path = "Path",
    MinExpires = "Min-Expires",
    Require = "Require",
    ProxyRequire = "Proxy-Require",
    Unsupported = "Unsupported",
    RetryAfter = "Retry-After",
    Server = "Server",
    Date = "Date",
    ContentEncoding = "Content-Encoding" | "e",
    Subject = "Subject" | "s",
    Event = "Event" | "o",
    AllowEvents = "Allow-Events" | "u",
    ReferTo = "Refer-To" | "r",
    ReferredBy = "Referred-By" | "b",
    SessionExpires = "Session-Expires" | "x",
    Identity = "Identity" | "y",
    Accept = "Accept",
    AcceptEncoding = "Accept-Encoding",
    AcceptLanguage = "Accept-Language",
    AlertInfo = "Alert-Info",
    AuthenticationInfo = "Authentication-Info",
    CallInfo = "Call-Info",
    ContentDisposition = "Content-Disposition",
    ContentLanguage = "Content-Language",
    ErrorInfo = "Error-Info",
    InReplyTo = "In-Reply-To",
    MimeVersion = "MIME-Version",
    Organization = "Organization",
    Priority = "Priority",
    Reason = "Reason",
    ReplyTo = "Reply-To",
    Timestamp = "Timestamp",
    Warning = "Warning",
}

/// The headers of nearly every message, dispatched on length first, then compared as two
/// machine words (see [`Folded`]) instead of byte by byte.
#[inline(always)]
fn common(name: &[u8]) -> Option<HeaderName> {
    let key = Folded::of(name)?;
    macro_rules! is {
        ($canonical:literal) => {{
            const C: Canonical = Canonical::new($canonical);
            C.matches(key)
        }};
    }
    let h = match name.len() {
        2 if is!("To") => HeaderName::To,
        3 if is!("Via") => HeaderName::Via,
        4 if is!("From") => HeaderName::From,
        4 if is!("CSeq") => HeaderName::CSeq,
        5 if is!("Route") => HeaderName::Route,
        5 if is!("Allow") => HeaderName::Allow,
        7 if is!("Call-ID") => HeaderName::CallId,
        7 if is!("Contact") => HeaderName::Contact,
        7 if is!("Expires") => HeaderName::Expires,
        9 if is!("Supported") => HeaderName::Supported,
        10 if is!("User-Agent") => HeaderName::UserAgent,
        12 if is!("Max-Forwards") => HeaderName::MaxForwards,
        12 if is!("Content-Type") => HeaderName::ContentType,
        12 if is!("Record-Route") => HeaderName::RecordRoute,
        13 if is!("Authorization") => HeaderName::Authorization,
        14 if is!("Content-Length") => HeaderName::ContentLength,
        _ => return None,
    };
    Some(h)
}

/// A name of 1 to 16 bytes as two little-endian words: its first and its last 8 bytes (4 for
/// names under 8 bytes, which then overlap; names under 4 bytes fill `head` alone with their
/// first, middle and last bytes). Together with the length, the two words hold every byte of
/// the name.
#[derive(Clone, Copy)]
struct Folded {
    head: u64,
    tail: u64,
}

impl Folded {
    #[inline]
    fn of(name: &[u8]) -> Option<Folded> {
        let n = name.len();
        let le4 = |b: &[u8]| b.try_into().map_or(0, |w: [u8; 4]| u64::from(u32::from_le_bytes(w)));
        let le8 = |b: &[u8]| b.try_into().map_or(0, u64::from_le_bytes);
        Some(match n {
            0 => return None,
            // The first, middle and last octets (the middle one again as the last of two, and
            // all three the one octet of one): three loads, where a fold over the octets was a
            // loop (callgrind: about 12 instructions more for each To and Via line).
            1..=3 => Folded {
                head: u64::from(name[0]) | u64::from(name[n / 2]) << 8 | u64::from(name[n - 1]) << 16,
                tail: 0,
            },
            4..=7 => Folded { head: le4(&name[..4]), tail: le4(&name[n - 4..]) },
            8..=16 => Folded { head: le8(&name[..8]), tail: le8(&name[n - 8..]) },
            _ => return None,
        })
    }
}

/// A canonical name prepared for [`Folded`] comparison: its lower-case words and a mask with
/// bit 0x20 set at each letter. `input | mask == lower` then holds exactly when every letter
/// matches in either case and every other byte (`-`) matches as is: OR-ing 0x20 maps only
/// 'A'..'Z' onto 'a'..'z' among the bytes that can equal a letter.
struct Canonical {
    lower: Folded,
    letters: Folded,
}

impl Canonical {
    const fn new(name: &str) -> Canonical {
        let b = name.as_bytes();
        let n = b.len();
        assert!(n >= 1 && n <= 16);
        let (w, tail_at) = match n {
            1..=3 => (n, usize::MAX),
            4..=7 => (4, n - 4),
            _ => (8, n - 8),
        };
        let (head_lower, head_letters) = match n {
            1..=3 => Self::short(b),
            _ => Self::word(b, 0, w),
        };
        let (tail_lower, tail_letters) = if tail_at == usize::MAX { (0, 0) } else { Self::word(b, tail_at, w) };
        Canonical {
            lower: Folded { head: head_lower, tail: tail_lower },
            letters: Folded { head: head_letters, tail: tail_letters },
        }
    }

    /// [`Canonical::word`] of a name of 1 to 3 octets as [`Folded::of`] reads one: its first,
    /// middle and last octets.
    const fn short(b: &[u8]) -> (u64, u64) {
        let n = b.len();
        let at = [0, n / 2, n - 1];
        let (mut lower, mut letters, mut i) = (0u64, 0u64, 0);
        while i < 3 {
            let c = b[at[i]];
            lower |= (c.to_ascii_lowercase() as u64) << (8 * i);
            if c.is_ascii_alphabetic() {
                letters |= 0x20 << (8 * i);
            }
            i += 1;
        }
        (lower, letters)
    }

    /// The `w` bytes at `at`, lower-cased, and their letter mask, as little-endian words.
    const fn word(b: &[u8], at: usize, w: usize) -> (u64, u64) {
        let (mut lower, mut letters, mut i) = (0u64, 0u64, 0);
        while i < w {
            let c = b[at + i];
            lower |= (c.to_ascii_lowercase() as u64) << (8 * i);
            if c.is_ascii_alphabetic() {
                letters |= 0x20 << (8 * i);
            }
            i += 1;
        }
        (lower, letters)
    }

    #[inline]
    fn matches(&self, key: Folded) -> bool {
        (key.head | self.letters.head) == self.lower.head && (key.tail | self.letters.tail) == self.lower.tail
    }
}

impl HeaderName {
    /// Headers whose value is a comma-separated list (RFC 3261 §7.3.1) that herald splits.
    /// Authorization-family headers are *not* lists: their commas separate auth-params.
    pub fn is_list(self) -> bool {
        matches!(
            self,
            HeaderName::Via
                | HeaderName::Contact
                | HeaderName::Route
                | HeaderName::RecordRoute
                | HeaderName::Path
                | HeaderName::Allow
                | HeaderName::Supported
                | HeaderName::Require
                | HeaderName::ProxyRequire
                | HeaderName::Unsupported
                | HeaderName::ContentEncoding
                | HeaderName::AllowEvents
                | HeaderName::Accept
                | HeaderName::AcceptEncoding
                | HeaderName::AcceptLanguage
                | HeaderName::ContentLanguage
                | HeaderName::InReplyTo
                | HeaderName::Warning
                | HeaderName::AlertInfo
                | HeaderName::CallInfo
                | HeaderName::ErrorInfo
                | HeaderName::Reason
        )
    }

    /// Headers that may appear at most once (RFC 3261 §20 and RFC 4475 §3.3.8).
    pub const fn is_single(self) -> bool {
        matches!(
            self,
            HeaderName::From
                | HeaderName::To
                | HeaderName::CallId
                | HeaderName::CSeq
                | HeaderName::MaxForwards
                | HeaderName::ContentLength
                | HeaderName::ContentType
                | HeaderName::Expires
                | HeaderName::MinExpires
                | HeaderName::RetryAfter
                | HeaderName::Date
        )
    }
}

/// The single-valued names ([`HeaderName::is_single`]) as a set of [`HeaderName::bit`]s.
pub(crate) const SINGLE_VALUED: u64 = {
    assert!(HeaderName::ALL.len() <= 64, "a name set is one u64");
    let (mut set, mut i) = (0u64, 0);
    while i < HeaderName::ALL.len() {
        if HeaderName::ALL[i].is_single() {
            set |= HeaderName::ALL[i].bit();
        }
        i += 1;
    }
    set
};

impl HeaderName {
    /// The name's bit in a set of names held in one `u64` (there are fewer than 64 names).
    #[inline]
    pub(crate) const fn bit(self) -> u64 {
        1 << (self as u32 % 64)
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.canonical().unwrap_or("(other)"))
    }
}

#[cfg(test)]
mod tests {
    use super::HeaderName;

    #[test]
    fn compact_and_case_insensitive() {
        assert_eq!(HeaderName::from_bytes(b"v"), HeaderName::Via);
        assert_eq!(HeaderName::from_bytes(b"V"), HeaderName::Via);
        assert_eq!(HeaderName::from_bytes(b"cALL-iD"), HeaderName::CallId);
        assert_eq!(HeaderName::from_bytes(b"i"), HeaderName::CallId);
        assert_eq!(HeaderName::from_bytes(b"l"), HeaderName::ContentLength);
        assert_eq!(HeaderName::from_bytes(b"NewFangledHeader"), HeaderName::Other);
        assert_eq!(HeaderName::from_bytes(b"q"), HeaderName::Other);
        assert_eq!(HeaderName::CallId.compact(), Some("i"));
        assert_eq!(HeaderName::CSeq.compact(), None);
    }

    /// Head scanning takes a recognised name for a token without checking its bytes.
    #[test]
    fn every_known_name_is_a_token() {
        for name in HeaderName::ALL {
            for text in [name.canonical(), name.compact()].into_iter().flatten() {
                assert!(text.bytes().all(crate::scan::is_token), "{text}");
                assert_eq!(HeaderName::from_bytes(text.as_bytes()), *name);
            }
        }
        assert_eq!(super::SINGLE_VALUED.count_ones(), 11);
    }

    /// The word comparison must be exactly case-insensitive for letters and exact for the rest:
    /// '-' (0x2D) differs from CR (0x0D) only in bit 0x20, and '@' from '`' likewise.
    #[test]
    fn folded_compare_is_exact_beyond_letter_case() {
        for name in ["To", "Via", "From", "CSeq", "Call-ID", "Max-Forwards", "Record-Route", "Content-Length"] {
            let upper = name.to_ascii_uppercase();
            let lower = name.to_ascii_lowercase();
            for spelled in [name, upper.as_str(), lower.as_str()] {
                assert_ne!(HeaderName::from_bytes(spelled.as_bytes()), HeaderName::Other, "{spelled}");
            }
            // Flipping bit 0x20 of a non-letter, or replacing any byte, never gives the same header.
            let want = HeaderName::from_bytes(name.as_bytes());
            for i in 0..name.len() {
                let mut b = name.as_bytes().to_vec();
                if !b[i].is_ascii_alphabetic() {
                    b[i] ^= 0x20;
                    assert_ne!(HeaderName::from_bytes(&b), want, "{:?}", String::from_utf8_lossy(&b));
                }
                b[i] = b'#';
                assert_ne!(HeaderName::from_bytes(&b), want, "{:?}", String::from_utf8_lossy(&b));
            }
        }
        assert_eq!(HeaderName::from_bytes(b"Call\rID"), HeaderName::Other);
        assert_eq!(HeaderName::from_bytes(b"Content-Lengthx"), HeaderName::Other);
        assert_eq!(HeaderName::from_bytes(b""), HeaderName::Other);
    }

    /// Every name of one to three octets drawn from letters of both cases, the octets one bit
    /// 0x20 away from them, digits, '-' and high octets is recognised as a plain
    /// case-insensitive compare with each known name recognises it (the short names are read
    /// as their first, middle and last octets).
    #[test]
    fn short_names_match_a_plain_compare() {
        let alphabet: Vec<u8> =
            b"aAtTvViIoO-@`\r\x0d\x2d0\x80\xe1\xf4\xd4\xd6\xc9".iter().copied().chain([0u8, b'z']).collect();
        let want = |name: &[u8]| {
            HeaderName::ALL
                .iter()
                .copied()
                .find(|h| {
                    [h.canonical(), h.compact()].into_iter().flatten().any(|t| t.as_bytes().eq_ignore_ascii_case(name))
                })
                .unwrap_or(HeaderName::Other)
        };
        for len in 1..=3 {
            let mut name = vec![0u8; len];
            for k in 0..alphabet.len().pow(len as u32) {
                let mut r = k;
                for b in name.iter_mut() {
                    *b = alphabet[r % alphabet.len()];
                    r /= alphabet.len();
                }
                assert_eq!(HeaderName::from_bytes(&name), want(&name), "{name:?}");
            }
        }
    }
}
