//! A URI as a Request-URI may carry it. RFC 3261 §19.1.1 Table 1 allows neither the `method`
//! parameter nor header components (`?h=v`) in a Request-URI, and §16.6 step 2 has a proxy
//! remove what is not allowed when a target becomes the Request-URI. Targets carry them in
//! practice: a registered Contact may (Table 1, "reg./redir. Contact"; RFC 4475 §3.3.14
//! regescrt stores `?Route=...`), and a Route value that a strict router's rewrite promotes
//! (§16.4, §16.6 step 6) is whatever the previous hop wrote.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::borrow::Cow;

use super::any::Uri;
use super::escape;
use super::sip::{Params, SipUri};

fn is_method(name: &str) -> bool {
    escape::eq_escaped(name, "method", true)
}

impl<'a> SipUri<'a> {
    /// Whether the URI is a Request-URI as written: it has neither a `method` parameter nor
    /// header components.
    pub fn fits_request_uri(&self) -> bool {
        self.headers_raw().is_empty() && !self.params().any(|(name, _)| is_method(name))
    }

    /// The URI without its `method` parameter and header components; the text as written when
    /// it has neither (no allocation, the usual case).
    pub fn request_uri_form(&self) -> Cow<'a, str> {
        let (raw, params, headers) = self.raw_parts();
        if self.fits_request_uri() {
            return Cow::Borrowed(raw);
        }
        // `raw` ends with the parameters, then '?' and the headers when there are any.
        let tail = params.len() + if headers.is_empty() { 0 } else { headers.len() + 1 };
        let head = raw.get(..raw.len().saturating_sub(tail)).unwrap_or(raw);
        let mut out = String::with_capacity(raw.len());
        out.push_str(head);
        for (name, value) in Params::new(params).filter(|(name, _)| !is_method(name)) {
            out.push(';');
            out.push_str(name);
            if let Some(v) = value {
                out.push('=');
                out.push_str(v);
            }
        }
        Cow::Owned(out)
    }
}

impl<'a> Uri<'a> {
    /// [`SipUri::fits_request_uri`] for a sip/sips URI; any other URI fits as written.
    pub fn fits_request_uri(&self) -> bool {
        self.as_sip().is_none_or(SipUri::fits_request_uri)
    }

    /// [`SipUri::request_uri_form`] for a sip/sips URI; any other URI as written (tel and
    /// opaque URIs have no header components).
    pub fn request_uri_form(&self) -> Cow<'a, str> {
        match self {
            Uri::Sip(u) => u.request_uri_form(),
            other => Cow::Borrowed(other.as_str()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn form(text: &str) -> String {
        Uri::parse(text.as_bytes()).unwrap().request_uri_form().into_owned()
    }

    #[test]
    fn a_uri_without_method_or_headers_is_kept_as_written() {
        for text in ["sip:bob@192.0.2.4:5064", "SIP:Bob@Example.COM;Transport=TCP;lr", "tel:+1-201-555-0123"] {
            let uri = Uri::parse(text.as_bytes()).unwrap();
            assert!(uri.fits_request_uri(), "{text}");
            assert!(matches!(uri.request_uri_form(), Cow::Borrowed(t) if t == text), "{text}");
        }
    }

    #[test]
    fn header_components_and_method_are_removed() {
        for text in ["sip:u@h?a=b", "sip:u@h;Method=INVITE", "sip:u@h;%6Dethod=BYE"] {
            assert!(!Uri::parse(text.as_bytes()).unwrap().fits_request_uri(), "{text}");
        }
        assert_eq!(form("sip:user@example.com?Route=%3Csip:sip.example.com%3E"), "sip:user@example.com");
        assert_eq!(form("sip:192.0.2.10:5?rP3Pport=tcp"), "sip:192.0.2.10:5");
        assert_eq!(form("sip:u@h;transport=tcp;method=REGISTER;lr?a=b&c=d"), "sip:u@h;transport=tcp;lr");
        // Parameter names compare case-insensitively and after unescaping (§19.1.4).
        assert_eq!(form("sips:u@h;METHOD=INVITE;x;%6Dethod=BYE;maddr=192.0.2.1"), "sips:u@h;x;maddr=192.0.2.1");
        assert_eq!(form("sip:[2001:db8::1]:5070;method=INVITE"), "sip:[2001:db8::1]:5070");
    }

    #[test]
    fn the_form_is_a_valid_request_uri() {
        for text in [
            "sip:user@example.com?Route=%3Csip:sip.example.com%3E",
            "sip:u@h;transport=tcp;method=REGISTER;lr?a=b&c=d",
            "sip:%61lice:pw@h:1;method=x?subject=hi",
        ] {
            let form = form(text);
            let again = Uri::parse(form.as_bytes()).unwrap();
            let sip = again.as_sip().unwrap();
            assert!(sip.headers_raw().is_empty() && sip.param("method").is_none(), "{text} -> {form}");
            assert_eq!(again.request_uri_form(), form.as_str());
        }
    }
}
