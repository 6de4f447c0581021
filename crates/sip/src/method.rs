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
    pub fn from_token(t: &'a str) -> Method<'a> {
        match t {
            "INVITE" => Method::Invite,
            "ACK" => Method::Ack,
            "BYE" => Method::Bye,
            "CANCEL" => Method::Cancel,
            "REGISTER" => Method::Register,
            "OPTIONS" => Method::Options,
            "INFO" => Method::Info,
            "PRACK" => Method::Prack,
            "SUBSCRIBE" => Method::Subscribe,
            "NOTIFY" => Method::Notify,
            "UPDATE" => Method::Update,
            "MESSAGE" => Method::Message,
            "REFER" => Method::Refer,
            "PUBLISH" => Method::Publish,
            other => Method::Extension(other),
        }
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
