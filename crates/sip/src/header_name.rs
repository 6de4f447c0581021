//! Header names: case-insensitive, with the compact forms of RFC 3261 §7.3.3 and §20 and the
//! registered compact forms of later RFCs.

use std::fmt;

macro_rules! header_names {
    ($( $variant:ident = $canonical:literal $(| $compact:literal)? ),* $(,)?) => {
        /// A header name known to herald, or `Other` (its text is kept in the message).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum HeaderName { $($variant,)* Other }

        impl HeaderName {
            /// Canonical (long) name, e.g. "Call-ID" for both "call-id" and "i".
            pub fn canonical(self) -> Option<&'static str> {
                match self { $(HeaderName::$variant => Some($canonical),)* HeaderName::Other => None }
            }

            /// The compact form, if the header has one.
            pub fn compact(self) -> Option<&'static str> {
                match self { $($(HeaderName::$variant => Some($compact),)?)* _ => None }
            }

            /// Recognises a name as written (any case, long or compact form).
            pub fn from_bytes(name: &[u8]) -> HeaderName {
                if let Some(h) = common(name) {
                    return h;
                }
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

/// The headers of nearly every message, dispatched on length first: one or two comparisons
/// instead of a walk over every known name.
#[inline]
fn common(name: &[u8]) -> Option<HeaderName> {
    let is = |canonical: &str| name.eq_ignore_ascii_case(canonical.as_bytes());
    let h = match name.len() {
        2 if is("To") => HeaderName::To,
        3 if is("Via") => HeaderName::Via,
        4 if is("From") => HeaderName::From,
        4 if is("CSeq") => HeaderName::CSeq,
        5 if is("Route") => HeaderName::Route,
        5 if is("Allow") => HeaderName::Allow,
        7 if is("Call-ID") => HeaderName::CallId,
        7 if is("Contact") => HeaderName::Contact,
        7 if is("Expires") => HeaderName::Expires,
        9 if is("Supported") => HeaderName::Supported,
        10 if is("User-Agent") => HeaderName::UserAgent,
        12 if is("Max-Forwards") => HeaderName::MaxForwards,
        12 if is("Content-Type") => HeaderName::ContentType,
        12 if is("Record-Route") => HeaderName::RecordRoute,
        13 if is("Authorization") => HeaderName::Authorization,
        14 if is("Content-Length") => HeaderName::ContentLength,
        _ => return None,
    };
    Some(h)
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
    pub fn is_single(self) -> bool {
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
}
