//! Unit tests: tel URIs (RFC 3966) and other absolute URIs (RFC 4475 §3.3.2-3.3.4).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]

use super::*;

fn tel(s: &str) -> TelUri<'_> {
    match Uri::parse(s.as_bytes()) {
        Ok(Uri::Tel(t)) => t,
        other => panic!("{s:?} did not parse as tel: {other:?}"),
    }
}

fn equiv(a: &str, b: &str) -> bool {
    let x = Uri::parse(a.as_bytes()).unwrap();
    let y = Uri::parse(b.as_bytes()).unwrap();
    let r = x.equivalent(&y);
    assert_eq!(r, y.equivalent(&x), "equivalence must be symmetric: {a} / {b}");
    r
}

fn reason(s: &str) -> &'static str {
    Uri::parse(s.as_bytes()).unwrap_err().reason
}

#[test]
fn tel_global() {
    let t = tel("tel:+1-201-555-0123");
    assert_eq!(t.number, "+1-201-555-0123");
    assert!(t.is_global());
    assert_eq!(t.params().count(), 0);
    assert_eq!(t.phone_context(), None);
    assert_eq!(t.as_str(), "tel:+1-201-555-0123");
    assert_eq!(t.to_string(), "tel:+1-201-555-0123");
    let u = Uri::parse(b"TEL:+1(201)555.0123").unwrap();
    assert_eq!(u.scheme(), "TEL");
    assert!(u.as_tel().is_some() && u.as_sip().is_none());
}

#[test]
fn tel_local_and_params() {
    let t = tel("tel:7042;phone-context=example.com");
    assert!(!t.is_global());
    assert_eq!(t.number, "7042");
    assert_eq!(t.phone_context(), Some("example.com"));
    assert_eq!(t.param("PHONE-CONTEXT"), Some(Some("example.com")));
    let t = tel("tel:+1-201-555-0123;ext=1234;isub=a=b,c;x-flag;phone-context=+1-201");
    assert_eq!(t.number, "+1-201-555-0123");
    assert_eq!(t.param("ext"), Some(Some("1234")));
    assert_eq!(t.param("isub"), Some(Some("a=b,c")));
    assert_eq!(t.param("x-flag"), Some(None));
    assert_eq!(t.phone_context(), Some("+1-201"));
    assert_eq!(t.params_raw(), ";ext=1234;isub=a=b,c;x-flag;phone-context=+1-201");
    assert_eq!(t.params().count(), 4);
    // Local numbers may be hex, '*' and '#'.
    assert_eq!(tel("tel:*69#;phone-context=x.com").number, "*69#");
    assert_eq!(tel("tel:AbC1").number, "AbC1");
    assert_eq!(TelUri::parse(b"tel:+44").unwrap().number, "+44");
    assert_eq!(TelUri::parse(b"sip:h").unwrap_err().reason, "not a tel URI");
}

#[test]
fn tel_rejects() {
    assert_eq!(reason("tel:"), "bad telephone number");
    assert_eq!(reason("tel:+"), "bad telephone number");
    assert_eq!(reason("tel:+--"), "bad telephone number");
    assert_eq!(reason("tel:+1-2x"), "bad telephone number");
    assert_eq!(reason("tel:+12a"), "bad telephone number");
    assert_eq!(reason("tel:12g4"), "bad telephone number");
    assert_eq!(reason("tel:;phone-context=x"), "bad telephone number");
    assert_eq!(reason("tel:+1;"), "empty parameter name");
    assert_eq!(reason("tel:+1;=x"), "empty parameter name");
    assert_eq!(reason("tel:+1;ext="), "empty parameter value");
    assert_eq!(reason("tel:+1;a_b=1"), "invalid character in parameter");
    assert_eq!(reason("tel:+1;a%41=1"), "invalid character in parameter");
    assert_eq!(reason("tel:+1;a=%4"), "bad %-escape");
    assert_eq!(reason("tel:+1 234"), "whitespace in URI");
    assert_eq!(Uri::parse(b"tel:+1-2x").unwrap_err().offset, 8);
}

#[test]
fn tel_equivalence_rfc3966_4() {
    assert!(equiv("tel:+1-201-555-0123", "tel:+1.201.555.0123"));
    assert!(equiv("tel:+1-201-555-0123", "TEL:+1(201)5550123"));
    assert!(!equiv("tel:+1-201-555-0123", "tel:+1-201-555-0124"));
    assert!(!equiv("tel:+12015550123", "tel:12015550123;phone-context=+1"));
    assert!(equiv("tel:ab12;phone-context=x.com", "tel:AB-12;phone-context=x.com"));
    assert!(equiv("tel:7042;phone-context=example.com", "tel:7042;PHONE-CONTEXT=Example.COM"));
    assert!(!equiv("tel:7042;phone-context=example.com", "tel:7042;phone-context=example.net"));
    // A domain's '-' and '.' are significant; only a digits descriptor drops them.
    assert!(!equiv("tel:7042;phone-context=a-b.com", "tel:7042;phone-context=ab.com"));
    assert!(equiv("tel:7042;phone-context=+1-201", "tel:7042;phone-context=+1201"));
    assert!(equiv("tel:+1234;ext=5-6", "tel:+1234;ext=56"));
    // Parameters as a set: order irrelevant, a name in only one URI differs.
    assert!(equiv("tel:+1234;a=1;b=2", "tel:+1234;B=2;A=1"));
    assert!(!equiv("tel:+1234;a=1", "tel:+1234"));
    assert!(!equiv("tel:+1234;a=1", "tel:+1234;a=2"));
    assert!(!equiv("tel:+1234;a", "tel:+1234;a=1"));
    assert!(equiv("tel:+1234;a=%41", "tel:+1234;a=a"));
    assert!(!equiv("tel:+1234", "sip:+1234@h;user=phone"));
}

#[test]
fn other_schemes() {
    // RFC 4475 §3.3.2 unkscm
    let u = Uri::parse(b"nobodyknowsthisscheme:totallyopaquecontent").unwrap();
    match u {
        Uri::Other(o) => {
            assert_eq!(o.scheme, "nobodyknowsthisscheme");
            assert_eq!(o.rest, "totallyopaquecontent");
            assert_eq!(o.as_str(), "nobodyknowsthisscheme:totallyopaquecontent");
            assert_eq!(o.to_string(), o.as_str());
        }
        _ => panic!("expected Other"),
    }
    // RFC 4475 §3.3.3 novelsc
    let u = Uri::parse(b"soap.beep://192.0.2.103:3002").unwrap();
    assert_eq!(u.scheme(), "soap.beep");
    assert!(matches!(u, Uri::Other(AbsoluteUri { rest: "//192.0.2.103:3002", .. })));
    // RFC 4475 §3.3.4 unksm2 (after the caller strips <>)
    assert!(matches!(Uri::parse(b"isbn:2983792873"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"http://www.example.com"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"mailto:a@b.c"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"urn:service:sos"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"x+y-z.1:a"), Ok(Uri::Other(_))));
    // Unknown schemes still reject whitespace, brackets and quotes; rest non-empty.
    assert_eq!(reason("foo:"), "empty URI");
    assert_eq!(reason("foo:a b"), "whitespace in URI");
    assert_eq!(reason("<http://www.example.com>"), "angle bracket in URI");
    assert_eq!(reason("foo:a\"b"), "invalid character in URI");
    assert_eq!(Uri::parse(b"foo:a\"b").unwrap_err().offset, 5);
    // Comparison: scheme case-insensitive, rest exact.
    assert!(equiv("HTTP://www.example.com", "http://www.example.com"));
    assert!(!equiv("http://www.example.com", "http://WWW.example.com"));
    assert!(!equiv("http://x", "https://x"));
}
