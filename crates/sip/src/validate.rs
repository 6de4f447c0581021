//! Receipt checks (RFC 3261 §8.2.1-§8.2.2, §16.3 steps 1-2, RFC 4475 §3.1.2 and §3.3).

use crate::checked::{known_method, Checked, SipUriSpans, TextSpan, ViaSpans};
use crate::error::{ErrorKind, ParseError};
use crate::header_name::HeaderName;
use crate::headers::{parse_call_id, parse_delta_seconds, parse_max_forwards, tag_of, CSeq, ListIter, Via};
use crate::message::memo::Memo;
use crate::message::{CheckParts, Message};
use crate::span::Span;

impl Message {
    /// Checks what every element must check on receipt, to the depth a proxy routes on
    /// (RFC 3261 §16.3 step 1: "any components involved in the remaining Request Validation
    /// steps or the Request Forwarding section MUST be well-formed. Any other components,
    /// well-formed or not, SHOULD be ignored"): the Request-URI; the top Via (the values below
    /// it are split, not parsed: see `validated`); From and To to the depth of their tags
    /// (their URIs are not used for routing); Call-ID; CSeq and its method; Max-Forwards;
    /// Expires; no repeated single-valued header. Route values are checked where
    /// they are used, Contact by the registrar; [`Message::validate_all`] checks everything.
    pub fn validate(&self) -> Result<(), ParseError> {
        match self.memo() {
            Some(_) => Ok(()),
            None => self.validated().map(|_| ()),
        }
    }

    /// [`Message::validate`], remembering what it parsed: afterwards the top Via, the From and
    /// To tags, the Call-ID and the CSeq are read from the message's memo (module `checked`)
    /// instead of being parsed again. A second call costs nothing.
    pub fn check(&mut self) -> Result<(), ParseError> {
        // Not through `validated`: its `Result` would be one more copy of the memo.
        // `well_formed` writes the memo's fields where the message keeps them and confirms it
        // when every read passed (module `message::memo`); only a message it does not pass is
        // checked again by the path that names the error, whose memo is stored whole.
        if self.memo().is_none() {
            let (parts, memo) = self.check_parts_and_memo();
            if well_formed(&parts, memo).is_none() {
                let checked = self.validated_naming_the_error()?;
                self.set_memo(checked);
            }
        }
        Ok(())
    }

    /// Whether [`Message::check`] passed on this message.
    pub fn is_checked(&self) -> bool {
        self.memo().is_some()
    }

    fn validated(&self) -> Result<Checked, ParseError> {
        match self.validated_well_formed() {
            Some(checked) => Ok(checked),
            None => self.validated_naming_the_error(),
        }
    }

    /// [`Message::validated`] of a message that passes, without the error plumbing (see
    /// [`well_formed`]).
    fn validated_well_formed(&self) -> Option<Checked> {
        let mut memo = Memo::default();
        well_formed(&self.check_parts(), &mut memo)?;
        memo.get().copied()
    }

    /// [`Message::validated`] step by step, each failure with its error.
    fn validated_naming_the_error(&self) -> Result<Checked, ParseError> {
        self.check_no_duplicates()?;
        let method = self.method();
        let buf = self.as_bytes();
        let mut request_uri = None;
        if method.is_some() {
            if let crate::uri::Uri::Sip(u) = self.request_uri()? {
                request_uri = SipUriSpans::of(buf, &u);
            }
        }
        let Some(first_via) = self.field(HeaderName::Via) else {
            return Err(ParseError::in_header(ErrorKind::MissingHeader, self.head_end(), b"Via"));
        };
        // The top Via value is parsed; the values below it are split, not parsed. RFC 3261
        // §16.3 step 1: only what the remaining validation steps or the forwarding use MUST be
        // well-formed, "any other components, well-formed or not, SHOULD be ignored and remain
        // unchanged when the message is forwarded". On receipt only the top value is used
        // (§18.2.1 received/rport, §18.2.2 where to answer, §17.2.3 transaction matching,
        // §18.1.2 and §16.7 a response's top Via is ours); the values below it travel on as
        // written. Where herald reads one - loop detection (§16.3 step 4), the next hop of a
        // response forwarded statelessly (§16.11) - it parses it there and takes a malformed
        // one for absent. The list itself must split (no unbalanced quote or '<', no empty
        // element): the top value and the count depend on it. The torture messages with
        // several Vias (RFC 4475 wsinv, longreq, bcast, transports; RFC 5118
        // mult-ip-in-header) keep their verdicts (test `several_vias_check_as_they_validate`);
        // `validate_all` parses every Via. Parsing the second Via of every response cost
        // ~1,500 instructions.
        let (top_via, via_count) = match self.via_split() {
            // The scan split the lines already (module `message::via_split`): parse its top value.
            split if split.clean && split.count > 0 => {
                let at = (split.top.start - first_via.value.start) as usize;
                let via = Via::parse(self.slice(split.top)).map_err(|e| self.value_error(first_via, e.shifted(at)))?;
                (ViaSpans::of(buf, &via), split.count)
            }
            _ => self.split_vias()?,
        };
        let from_tag = self.from_tag()?.map(|t| TextSpan::within(buf, t));
        let to_tag = self.to_tag()?.map(|t| TextSpan::within(buf, t));
        let call_id = TextSpan::within(buf, self.call_id()?);
        let cseq = self.cseq()?;
        if let Some(method) = method {
            if cseq.method != method {
                let at = self.field(HeaderName::CSeq).map_or(0, |h| h.value.start as usize);
                let kind = ErrorKind::CSeqMethodMismatch { known_method: method.is_known() };
                return Err(ParseError::in_header(kind, at, b"CSeq"));
            }
        }
        let max_forwards = self.max_forwards()?;
        self.expires()?;
        // CSeq::parse accepts only a value that ends with the method token, spelled as the
        // method reads (known methods match exactly, extensions are kept as written).
        let cseq_value = self.field(HeaderName::CSeq).map_or(Span::default(), |h| h.value);
        let method_len = cseq.method.as_str().len() as u32;
        let cseq_method = TextSpan::ascii(buf, Span { start: cseq_value.end - method_len, end: cseq_value.end });
        Ok(Checked {
            method: method.and_then(known_method),
            request_uri,
            top_via,
            via_count,
            from_tag,
            to_tag,
            call_id,
            cseq_seq: cseq.seq,
            cseq_method,
            cseq_known: known_method(cseq.method),
            max_forwards,
        })
    }

    /// The top Via parsed and the Via values counted, splitting the lines (when the scan could
    /// not: one of them is malformed, and the error says which and where).
    fn split_vias(&self) -> Result<(ViaSpans, u32), ParseError> {
        let buf = self.as_bytes();
        let mut top_via = None;
        let mut via_count = 0u32;
        for h in self.fields(HeaderName::Via) {
            let line = self.value_of(h);
            let mut take = |at: usize, bytes: &[u8]| {
                if top_via.is_none() {
                    let via = Via::parse(bytes).map_err(|e| self.value_error(h, e.shifted(at)))?;
                    top_via = Some(ViaSpans::of(buf, &via));
                }
                via_count += 1;
                Ok::<_, ParseError>(())
            };
            for value in ListIter::new(line) {
                let (at, bytes) = value.map_err(|e| self.value_error(h, e))?;
                take(at, bytes)?;
            }
        }
        let top_via =
            top_via.ok_or_else(|| ParseError::in_header(ErrorKind::MissingHeader, self.head_end(), b"Via"))?;
        Ok((top_via, via_count))
    }

    /// [`Message::validate`] plus the grammar of every header herald knows (what
    /// `herald inspect` reports). Unknown headers are not checked: they pass through.
    pub fn validate_all(&self) -> Result<(), ParseError> {
        self.validate()?;
        self.from_header()?;
        self.to_header()?;
        for h in self.headers() {
            crate::headers::check_typed(h.name, self.value_of(h)).map_err(|e| self.value_error(h, e))?;
        }
        Ok(())
    }

    /// RFC 4475 §3.3.8: From, To, Call-ID, CSeq, Max-Forwards and the other single-valued
    /// headers appear at most once.
    /// The scan noted whether there is one (module `message::index`); only then are the lines
    /// searched for the first.
    fn check_no_duplicates(&self) -> Result<(), ParseError> {
        if !self.repeats_single() {
            return Ok(());
        }
        let mut seen: u64 = 0;
        for h in self.headers() {
            if h.name.is_single() {
                if seen & h.name.bit() != 0 {
                    return Err(ParseError::in_header(
                        ErrorKind::DuplicateHeader,
                        h.line.start as usize,
                        self.name_of(h),
                    ));
                }
                seen |= h.name.bit();
            }
        }
        Ok(())
    }
}

/// [`Message::validated`] of a message that passes, without the error plumbing: the same
/// parsers on the same values, each read through the header index, and `None` at the first
/// thing that does not pass, for [`Message::validated_naming_the_error`] to find and name.
/// Every value's `Result<_, ParseError>` through `required` and `map_err` cost about a
/// fifth of the receipt check (callgrind: ~50 instructions per header read, a dozen reads
/// per message). A malformed message is thus checked twice, the second time by the path
/// that names the error; both give the same memo (test `both_paths_give_the_same_memo`).
/// Each field is written into `memo` (the message's own, from [`Message::check`]) as it is
/// read, and the memo is confirmed when all passed (module `message::memo`). The order of
/// the reads decides nothing: any failure gives `None`. Inlined into [`Message::check`] (and
/// so where the server classifies a message): as a call of its own it cost about 10
/// instructions a message more in register saves and its frame (callgrind, `herald serve`).
#[inline(always)]
fn well_formed(m: &CheckParts<'_>, memo: &mut Memo) -> Option<()> {
    if m.repeats_single() {
        return None;
    }
    let split = m.vias;
    if !split.clean || split.count == 0 {
        return None;
    }
    let buf = m.buf;
    let c = memo.fields();
    let method = m.method();
    c.method = method.and_then(known_method);
    let mut request_uri = None;
    if let crate::StartLine::Request { uri: span, .. } = m.start {
        request_uri = SipUriSpans::read_plain(buf, span);
    }
    if let (None, Some(uri)) = (request_uri, m.request_uri_bytes()) {
        // What `request_uri` checks, without its error: §19.1.5, no header components.
        match crate::uri::Uri::parse(uri).ok()? {
            crate::uri::Uri::Sip(u) if !u.headers_raw().is_empty() => return None,
            crate::uri::Uri::Sip(u) => request_uri = SipUriSpans::of(buf, &u),
            _ => {}
        }
    }
    c.request_uri = request_uri;
    c.top_via = match split.top_plain {
        // Read by the header scan (module `message::via_split`).
        Some(plain) => ViaSpans::of_plain(split.top, plain),
        None => ViaSpans::read(buf, split.top)?,
    };
    c.via_count = split.count;
    c.from_tag = tag_of(m.value(HeaderName::From)?).ok()?.map(|t| TextSpan::within(buf, t));
    c.to_tag = tag_of(m.value(HeaderName::To)?).ok()?.map(|t| TextSpan::within(buf, t));
    c.call_id = TextSpan::within(buf, parse_call_id(m.value(HeaderName::CallId)?).ok()?);
    let (cseq, cseq_method) = CSeq::parse_text(m.value(HeaderName::CSeq)?).ok()?;
    if method.is_some_and(|m| m != cseq.method) {
        return None;
    }
    c.cseq_seq = cseq.seq;
    // The method token ends the value: the range `validated_naming_the_error` finds.
    c.cseq_method = TextSpan::within(buf, cseq_method);
    c.cseq_known = known_method(cseq.method);
    c.max_forwards = match m.value(HeaderName::MaxForwards) {
        Some(v) => Some(parse_max_forwards(v).ok()?),
        None => None,
    };
    if let Some(v) = m.value(HeaderName::Expires) {
        parse_delta_seconds(v).ok()?;
    }
    memo.confirm();
    Some(())
}

#[cfg(test)]
mod tests {
    use crate::{Limits, Message};
    use bytes::Bytes;

    /// Where the path without the error plumbing passes a message, the path that names the
    /// errors passes it too, with the same memo; and it passes the usual messages. Run over the
    /// benchmark messages, the RFC 4475/5118 torture corpus and every one of them with an octet
    /// replaced (at every 5th place, by octets that matter to the grammar), so that both the
    /// passing and the failing sides of each value's check are reached.
    #[test]
    fn both_paths_give_the_same_memo() {
        let (paths, usual) = crate::test_corpus::message_files();
        let limits = Limits::default();
        let (mut fast, mut slow_only) = (0usize, 0usize);
        for (n, path) in paths.iter().enumerate() {
            let original = std::fs::read(path).expect("message file");
            let mut variants = vec![original.clone()];
            for at in (0..original.len()).step_by(5) {
                for b in [b' ', b',', b';', b'"', b'<', b'>', b'\r', b'x', b'0', b':', b'@', 0x80] {
                    let mut v = original.clone();
                    v[at] = b;
                    variants.push(v);
                }
            }
            for (k, bytes) in variants.into_iter().enumerate() {
                let Ok(mut msg) = Message::parse(Bytes::from(bytes), &limits) else { continue };
                match msg.validated_well_formed() {
                    Some(checked) => {
                        fast += 1;
                        let named = msg.validated_naming_the_error();
                        assert_eq!(named, Ok(checked), "{} variant {k}", path.display());
                        // The memo's Request-URI scheme is the parsed one's.
                        msg.check().expect("it passed");
                        // Written in place, over the fields of the box's earlier messages
                        // (this thread's variants, passing or failing half-way).
                        assert_eq!(msg.memo(), Some(&checked), "{} variant {k}", path.display());
                        if let Some(scheme) = msg.checked_request_uri_scheme() {
                            let Ok(crate::uri::Uri::Sip(uri)) = msg.request_uri() else { panic!("a sip URI") };
                            assert_eq!(uri.scheme, scheme, "{} variant {k}", path.display());
                        }
                    }
                    None => {
                        // No memo from a check that failed half-way, and the whole named one
                        // from a check that passed the long way.
                        let named = msg.validated_naming_the_error().ok();
                        assert_eq!(msg.check().is_ok(), named.is_some(), "{} variant {k}", path.display());
                        assert_eq!(msg.memo(), named.as_ref(), "{} variant {k}", path.display());
                        slow_only += 1;
                        assert!(n >= usual || k > 0, "{} must pass without the error plumbing", path.display());
                    }
                }
            }
        }
        assert!(fast > 1000 && slow_only > 1000, "{fast} passed, {slow_only} went the long way");
    }
}
