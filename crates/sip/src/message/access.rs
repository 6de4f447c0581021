//! Typed accessors on [`Message`]: the API the proxy, registrar and tools use. They live with
//! the message, not in [`crate::headers`], because they read the message's memo
//! ([`crate::checked`]), which itself holds header values: the header types stay below both,
//! so the module graph has no cycle.

use super::{HeaderField, Message};
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::headers::{
    parse_call_id, parse_delta_seconds, parse_max_forwards, parse_token, parse_typed, tag_of, AuthValue, CSeq, Contact,
    ListIter, ListValue, MediaType, NameAddr, RetryAfter, Typed, ValueError, Via,
};
use crate::uri::{Host, Uri};

impl Message {
    /// Turns a value-relative error into a message-level one naming the header.
    pub fn value_error(&self, h: &HeaderField, e: ValueError) -> ParseError {
        ParseError::in_header(ErrorKind::HeaderValue(e.what), h.value.start as usize + e.at, self.name_of(h))
    }

    fn missing(&self, name: HeaderName) -> ParseError {
        let n = name.canonical().unwrap_or("header").as_bytes();
        ParseError::in_header(ErrorKind::MissingHeader, self.head_end(), n)
    }

    /// The typed value of one header line.
    pub fn typed(&self, h: &HeaderField) -> Result<Typed<'_>, ParseError> {
        parse_typed(h.name, self.value_of(h)).map_err(|e| self.value_error(h, e))
    }

    /// Every element of every line named `name`, in order (RFC 3261 §7.3.1: several lines of a
    /// list header are equivalent to one comma-separated line, order preserved).
    pub fn list_values(&self, name: HeaderName) -> impl Iterator<Item = Result<ListValue<'_>, ParseError>> + '_ {
        self.headers().iter().enumerate().filter(move |(_, h)| h.name == name).flat_map(move |(idx, h)| {
            ListIter::new(self.value_of(h)).map(move |r| match r {
                Ok((at, bytes)) => Ok(ListValue { field: idx, span: h.value.sub(at, at + bytes.len()), bytes }),
                Err(e) => Err(self.value_error(h, e)),
            })
        })
    }

    /// The first item of [`Message::list_values`] for `name`, without its iterator adapters:
    /// the lines before the first one of that name are skipped by the header index, and only
    /// the line holding the first element is split (up to that element).
    pub fn first_list_value(&self, name: HeaderName) -> Option<Result<ListValue<'_>, ParseError>> {
        let first = self.field_index(name)?;
        for (idx, h) in self.headers().iter().enumerate().skip(first).filter(|(_, h)| h.name == name) {
            match ListIter::new(self.value_of(h)).next() {
                Some(Ok((at, bytes))) => {
                    return Some(Ok(ListValue { field: idx, span: h.value.sub(at, at + bytes.len()), bytes }))
                }
                Some(Err(e)) => return Some(Err(self.value_error(h, e))),
                None => {}
            }
        }
        None
    }

    fn typed_list<'m, T: 'm>(
        &'m self,
        name: HeaderName,
        parse: impl Fn(&'m [u8]) -> Result<T, ValueError> + 'm,
    ) -> impl Iterator<Item = Result<T, ParseError>> + 'm {
        self.list_values(name).map(move |r| {
            let v = r?;
            let h = &self.headers()[v.field];
            let offset = (v.span.start - h.value.start) as usize;
            parse(v.bytes).map_err(|e| self.value_error(h, e.shifted(offset)))
        })
    }

    /// The first line of a single-valued header, parsed with `parse`; `Ok(None)` when absent.
    fn single<'m, T>(
        &'m self,
        name: HeaderName,
        parse: impl Fn(&'m [u8]) -> Result<T, ValueError>,
    ) -> Result<Option<T>, ParseError> {
        match self.field(name) {
            None => Ok(None),
            Some(h) => parse(self.value_of(h)).map(Some).map_err(|e| self.value_error(h, e)),
        }
    }

    fn required<'m, T>(
        &'m self,
        name: HeaderName,
        parse: impl Fn(&'m [u8]) -> Result<T, ValueError>,
    ) -> Result<T, ParseError> {
        self.single(name, parse)?.ok_or_else(|| self.missing(name))
    }

    /// All Via values, topmost first.
    pub fn vias(&self) -> impl Iterator<Item = Result<Via<'_>, ParseError>> + '_ {
        self.typed_list(HeaderName::Via, Via::parse)
    }

    /// The topmost Via: the one a server answers to (RFC 3261 §18.2.2).
    #[inline]
    pub fn top_via(&self) -> Result<Via<'_>, ParseError> {
        match self.memo() {
            Some(c) => Ok(c.top_via.view(self.as_bytes())),
            None => self.parsed_top_via(),
        }
    }

    /// [`Message::top_via`] of a message not checked (yet): parsed, out of line.
    #[cold]
    #[inline(never)]
    fn parsed_top_via(&self) -> Result<Via<'_>, ParseError> {
        // `vias().next()` without the iterator adapters.
        for h in self.fields(HeaderName::Via) {
            match ListIter::new(self.value_of(h)).next() {
                Some(Ok((at, bytes))) => return Via::parse(bytes).map_err(|e| self.value_error(h, e.shifted(at))),
                Some(Err(e)) => return Err(self.value_error(h, e)),
                None => {}
            }
        }
        Err(self.missing(HeaderName::Via))
    }

    /// `top_via()?.branch()`, from the memo of a checked message without making the whole
    /// [`Via`] (about 110 instructions each time): a transaction key needs only the branch and
    /// the sent-by, and the engine makes one for every message.
    #[inline]
    pub fn top_via_branch(&self) -> Option<&str> {
        match self.memo() {
            Some(c) => c.top_via.branch(self.as_bytes()),
            None => self.unchecked_top_via()?.branch(),
        }
    }

    /// The top Via's sent-by, host and port, as `top_via()` reads them (see
    /// [`Message::top_via_branch`]); `None` when there is no well-formed top Via.
    #[inline]
    pub fn top_via_sent_by(&self) -> Option<(Host<'_>, Option<u16>)> {
        match self.memo() {
            Some(c) => Some(c.top_via.sent_by(self.as_bytes())),
            None => self.unchecked_top_via().map(|v| (v.host, v.port)),
        }
    }

    /// `top_via()?.rport()` (see [`Message::top_via_branch`]): `None` when there is no
    /// well-formed top Via or it has no `rport`, `Some(None)` for a bare `rport` (RFC 3581 §3).
    #[inline]
    pub fn top_via_rport(&self) -> Option<Option<u16>> {
        match self.memo() {
            Some(c) => c.top_via.rport(self.as_bytes()),
            None => self.unchecked_top_via()?.rport(),
        }
    }

    /// `top_via()?.maddr()` (see [`Message::top_via_branch`]): where a response to a request
    /// goes (RFC 3261 §18.2.2), asked for every request a proxy answers.
    #[inline]
    pub fn top_via_maddr(&self) -> Option<&str> {
        match self.memo() {
            Some(c) => c.top_via.maddr(self.as_bytes()),
            None => self.unchecked_top_via()?.maddr(),
        }
    }

    /// The top Via of a message not checked (yet): out of line, so that the memo's reads
    /// above are small enough to be inlined where the engine asks (callgrind: about 20
    /// instructions of call and `Result` plumbing per read, some 50 reads per call).
    #[cold]
    #[inline(never)]
    fn unchecked_top_via(&self) -> Option<Via<'_>> {
        self.top_via().ok()
    }

    /// How many Via values the message carries (RFC 3261 §7.3.1: one line may hold several),
    /// as `vias().count()` counts them: from the memo of a checked message, which split them
    /// all, without parsing any.
    pub fn via_count(&self) -> usize {
        match self.memo() {
            Some(c) => c.via_count as usize,
            None => self.list_values(HeaderName::Via).count(),
        }
    }

    pub fn from_header(&self) -> Result<NameAddr<'_>, ParseError> {
        self.required(HeaderName::From, NameAddr::parse)
    }

    pub fn to_header(&self) -> Result<NameAddr<'_>, ParseError> {
        self.required(HeaderName::To, NameAddr::parse)
    }

    /// The From tag without parsing the From URI (see [`tag_of`]).
    #[inline]
    pub fn from_tag(&self) -> Result<Option<&str>, ParseError> {
        match self.memo() {
            Some(c) => Ok(c.from_tag.map(|t| crate::checked::text(self.as_bytes(), t))),
            None => self.unchecked(HeaderName::From, tag_of),
        }
    }

    /// The To tag without parsing the To URI (see [`tag_of`]).
    #[inline]
    pub fn to_tag(&self) -> Result<Option<&str>, ParseError> {
        match self.memo() {
            Some(c) => Ok(c.to_tag.map(|t| crate::checked::text(self.as_bytes(), t))),
            None => self.unchecked(HeaderName::To, tag_of),
        }
    }

    #[inline]
    pub fn call_id(&self) -> Result<&str, ParseError> {
        match self.memo() {
            Some(c) => Ok(crate::checked::text(self.as_bytes(), c.call_id)),
            None => self.unchecked(HeaderName::CallId, parse_call_id),
        }
    }

    #[inline]
    pub fn cseq(&self) -> Result<CSeq<'_>, ParseError> {
        match self.memo() {
            Some(c) => Ok(c.cseq(self.as_bytes())),
            None => self.unchecked(HeaderName::CSeq, CSeq::parse),
        }
    }

    #[inline]
    pub fn max_forwards(&self) -> Result<Option<u8>, ParseError> {
        match self.memo() {
            Some(c) => Ok(c.max_forwards),
            None => self.unchecked_single(HeaderName::MaxForwards, parse_max_forwards),
        }
    }

    /// [`Message::required`] for a message not checked (yet), out of line (see
    /// [`Message::unchecked_top_via`]).
    #[cold]
    #[inline(never)]
    fn unchecked<'m, T>(
        &'m self,
        name: HeaderName,
        parse: impl Fn(&'m [u8]) -> Result<T, ValueError>,
    ) -> Result<T, ParseError> {
        self.required(name, parse)
    }

    /// [`Message::single`] for a message not checked (yet), out of line.
    #[cold]
    #[inline(never)]
    fn unchecked_single<'m, T>(
        &'m self,
        name: HeaderName,
        parse: impl Fn(&'m [u8]) -> Result<T, ValueError>,
    ) -> Result<Option<T>, ParseError> {
        self.single(name, parse)
    }

    pub fn expires(&self) -> Result<Option<u32>, ParseError> {
        self.single(HeaderName::Expires, parse_delta_seconds)
    }

    pub fn min_expires(&self) -> Result<Option<u32>, ParseError> {
        self.single(HeaderName::MinExpires, parse_delta_seconds)
    }

    pub fn content_type(&self) -> Result<Option<MediaType<'_>>, ParseError> {
        self.single(HeaderName::ContentType, MediaType::parse)
    }

    pub fn retry_after(&self) -> Result<Option<RetryAfter<'_>>, ParseError> {
        self.single(HeaderName::RetryAfter, RetryAfter::parse)
    }

    pub fn routes(&self) -> impl Iterator<Item = Result<NameAddr<'_>, ParseError>> + '_ {
        self.typed_list(HeaderName::Route, NameAddr::parse)
    }

    pub fn record_routes(&self) -> impl Iterator<Item = Result<NameAddr<'_>, ParseError>> + '_ {
        self.typed_list(HeaderName::RecordRoute, NameAddr::parse)
    }

    pub fn paths(&self) -> impl Iterator<Item = Result<NameAddr<'_>, ParseError>> + '_ {
        self.typed_list(HeaderName::Path, NameAddr::parse)
    }

    pub fn contacts(&self) -> impl Iterator<Item = Result<Contact<'_>, ParseError>> + '_ {
        self.typed_list(HeaderName::Contact, Contact::parse)
    }

    /// Option tags or methods of a token-list header (Require, Proxy-Require, Supported,
    /// Unsupported, Allow).
    pub fn tokens(&self, name: HeaderName) -> impl Iterator<Item = Result<&str, ParseError>> + '_ {
        self.typed_list(name, parse_token)
    }

    /// Credentials or challenges: one per line of Authorization, Proxy-Authorization,
    /// WWW-Authenticate or Proxy-Authenticate.
    pub fn auth_values(&self, name: HeaderName) -> impl Iterator<Item = Result<AuthValue<'_>, ParseError>> + '_ {
        self.fields(name).map(move |h| AuthValue::parse(self.value_of(h)).map_err(|e| self.value_error(h, e)))
    }

    /// User-Agent or Server text.
    pub fn text(&self, name: HeaderName) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The scheme of a sip: or sips: Request-URI from the memo of a checked message, without
    /// making the URI (a `SipUri` view of the memo costs about 100 instructions, and the proxy
    /// asks for the scheme alone: §16.3 step 2, a SIPS Record-Route). `None` when the message
    /// is not checked or its Request-URI is not one the memo keeps: then ask
    /// [`Message::request_uri`], which `Some` agrees with (`Ok(Uri::Sip(u))`, `u.scheme`).
    pub fn checked_request_uri_scheme(&self) -> Option<crate::uri::Scheme> {
        self.memo()?.request_uri.as_ref().map(|u| u.scheme())
    }

    /// The Request-URI, parsed. RFC 3261 §19.1.5 forbids header components in a Request-URI
    /// (RFC 4475 §3.1.2.11: reject with 400 rather than forward them).
    #[inline]
    pub fn request_uri(&self) -> Result<Uri<'_>, ParseError> {
        match self.memo().and_then(|c| c.request_uri.as_ref()) {
            Some(u) => Ok(Uri::Sip(u.view(self.as_bytes()))),
            None => self.parsed_request_uri(),
        }
    }

    /// [`Message::request_uri`] when the memo does not hold it: parsed, out of line (see
    /// [`Message::unchecked_top_via`]).
    #[cold]
    #[inline(never)]
    fn parsed_request_uri(&self) -> Result<Uri<'_>, ParseError> {
        let crate::StartLine::Request { uri, .. } = *self.start_line() else {
            return Err(ParseError::new(ErrorKind::StartLine("a response has no Request-URI"), 0));
        };
        let bytes = self.slice(uri);
        let parsed = Uri::parse(bytes)
            .map_err(|e| ParseError::new(ErrorKind::RequestUri(e.reason), uri.start as usize + e.offset))?;
        if let Uri::Sip(sip) = &parsed {
            if !sip.headers_raw().is_empty() {
                return Err(ParseError::new(
                    ErrorKind::RequestUri("header components are not allowed in a Request-URI"),
                    uri.start as usize,
                ));
            }
        }
        Ok(parsed)
    }
}
