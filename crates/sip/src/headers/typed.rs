//! One typed view for every header herald knows, used by `herald inspect` and by full
//! validation. Hot paths use the specific accessors in `access.rs` instead.

use super::auth::{AuthParams, AuthValue};
use super::contact::Contact;
use super::error::ValueError;
use super::list::ListIter;
use super::media::MediaType;
use super::name_addr::NameAddr;
use super::params::Params;
use super::simple::{
    parse_call_id, parse_date, parse_delta_seconds, parse_max_forwards, parse_token, CSeq, RetryAfter,
};
use super::via::Via;
use crate::header_name::HeaderName;
use crate::scan;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed<'a> {
    Vias(Vec<Via<'a>>),
    /// From, To, Reply-To, Refer-To, Referred-By.
    Address(NameAddr<'a>),
    /// Route, Record-Route, Path; also Alert-Info, Call-Info, Error-Info (`<URI> *params`).
    Addresses(Vec<NameAddr<'a>>),
    Contacts(Vec<Contact<'a>>),
    CallId(&'a str),
    CSeq(CSeq<'a>),
    MaxForwards(u8),
    /// Expires, Min-Expires, Session-Expires (its refresher parameter is ignored here).
    Seconds(u32),
    ContentLength(u32),
    MediaType(MediaType<'a>),
    MediaTypes(Vec<MediaType<'a>>),
    Tokens(Vec<&'a str>),
    Auth(AuthValue<'a>),
    AuthInfo(AuthParams<'a>),
    RetryAfter(RetryAfter<'a>),
    /// Seconds since the Unix epoch.
    Date(u64),
    /// Free text (User-Agent, Server, Subject, ...), UTF-8.
    Text(&'a str),
    /// A header herald does not interpret; forwarded byte for byte.
    Raw(&'a [u8]),
}

fn list<'a, T>(v: &'a [u8], parse: impl Fn(&'a [u8]) -> Result<T, ValueError>) -> Result<Vec<T>, ValueError> {
    ListIter::new(v).map(|r| r.and_then(|(at, item)| parse(item).map_err(|e| e.shifted(at)))).collect()
}

fn non_empty<T>(v: Vec<T>) -> Result<Vec<T>, ValueError> {
    if v.is_empty() {
        Err(ValueError::at(0, "empty value"))
    } else {
        Ok(v)
    }
}

fn text(v: &[u8]) -> Result<&str, ValueError> {
    scan::utf8(v).map_err(|valid_up_to| ValueError::at(valid_up_to, "text is not UTF-8"))
}

/// Parses `value` as the header `name` requires.
pub fn parse_typed(name: HeaderName, v: &[u8]) -> Result<Typed<'_>, ValueError> {
    use HeaderName as H;
    Ok(match name {
        H::Via => Typed::Vias(non_empty(list(v, Via::parse)?)?),
        H::From | H::To | H::ReplyTo | H::ReferTo | H::ReferredBy => Typed::Address(NameAddr::parse(v)?),
        H::Route | H::RecordRoute | H::Path => Typed::Addresses(non_empty(list(v, NameAddr::parse)?)?),
        H::AlertInfo | H::CallInfo | H::ErrorInfo => Typed::Addresses(list(v, NameAddr::parse)?),
        H::Contact => Typed::Contacts(non_empty(list(v, Contact::parse)?)?),
        H::CallId => Typed::CallId(parse_call_id(v)?),
        H::CSeq => Typed::CSeq(CSeq::parse(v)?),
        H::MaxForwards => Typed::MaxForwards(parse_max_forwards(v)?),
        H::Expires | H::MinExpires => Typed::Seconds(parse_delta_seconds(v)?),
        H::SessionExpires => {
            let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
            let (_, end) = Params::parse(v, digits)?;
            if end != v.len() {
                return Err(ValueError::at(end, "unexpected text"));
            }
            Typed::Seconds(parse_delta_seconds(&v[..digits])?)
        }
        H::ContentLength => Typed::ContentLength(parse_delta_seconds(v)?),
        H::ContentType => Typed::MediaType(MediaType::parse(v)?),
        H::Accept => Typed::MediaTypes(list(v, MediaType::parse)?),
        H::Require
        | H::ProxyRequire
        | H::Supported
        | H::Unsupported
        | H::Allow
        | H::ContentEncoding
        | H::AllowEvents
        | H::AcceptEncoding
        | H::ContentLanguage
        | H::InReplyTo => Typed::Tokens(list(v, parse_token_or_word)?),
        H::Authorization | H::ProxyAuthorization | H::WwwAuthenticate | H::ProxyAuthenticate => {
            Typed::Auth(AuthValue::parse(v)?)
        }
        H::AuthenticationInfo => Typed::AuthInfo(AuthParams::parse(v)?),
        H::RetryAfter => Typed::RetryAfter(RetryAfter::parse(v)?),
        H::Date => Typed::Date(parse_date(v)?),
        H::UserAgent | H::Server | H::Subject | H::Organization | H::Priority | H::Timestamp | H::MimeVersion => {
            Typed::Text(text(v)?)
        }
        H::Event | H::AcceptLanguage | H::ContentDisposition | H::Identity | H::Reason | H::Warning | H::Other => {
            Typed::Raw(v)
        }
    })
}

/// Checks `value` against the grammar of header `name` without building the typed value:
/// list elements are parsed one at a time and dropped, so checking a hostile 8 KiB line of
/// thousands of elements allocates nothing (unlike collecting them with [`parse_typed`]).
pub fn check_typed(name: HeaderName, v: &[u8]) -> Result<(), ValueError> {
    use HeaderName as H;
    fn each<'a, T>(
        v: &'a [u8],
        non_empty: bool,
        parse: impl Fn(&'a [u8]) -> Result<T, ValueError>,
    ) -> Result<(), ValueError> {
        let mut n = 0usize;
        for item in ListIter::new(v) {
            let (at, elem) = item?;
            parse(elem).map_err(|e| e.shifted(at))?;
            n += 1;
        }
        if non_empty && n == 0 {
            return Err(ValueError::at(0, "empty value"));
        }
        Ok(())
    }
    match name {
        H::Via => each(v, true, Via::parse),
        H::Route | H::RecordRoute | H::Path => each(v, true, NameAddr::parse),
        H::AlertInfo | H::CallInfo | H::ErrorInfo => each(v, false, NameAddr::parse),
        H::Contact => each(v, true, Contact::parse),
        H::Accept => each(v, false, MediaType::parse),
        H::Require
        | H::ProxyRequire
        | H::Supported
        | H::Unsupported
        | H::Allow
        | H::ContentEncoding
        | H::AllowEvents
        | H::AcceptEncoding
        | H::ContentLanguage
        | H::InReplyTo => each(v, false, parse_token_or_word),
        _ => parse_typed(name, v).map(|_| ()),
    }
}

/// In-Reply-To holds Call-IDs (words), the other token lists plain tokens.
fn parse_token_or_word(s: &[u8]) -> Result<&str, ValueError> {
    parse_token(s).or_else(|_| parse_call_id(s))
}
