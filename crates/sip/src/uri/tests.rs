//! Unit tests: sip/sips grammar, escapes, §19.1.4 comparison.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]

use std::borrow::Cow;

use super::any::screen;
use super::*;

fn sip(s: &str) -> SipUri<'_> {
    match Uri::parse(s.as_bytes()) {
        Ok(Uri::Sip(u)) => u,
        other => panic!("{s:?} did not parse as sip: {other:?}"),
    }
}

fn err(s: &str) -> UriError {
    match Uri::parse(s.as_bytes()) {
        Err(e) => e,
        Ok(u) => panic!("{s:?} should be rejected, got {u:?}"),
    }
}

fn equiv(a: &str, b: &str) -> bool {
    let x = Uri::parse(a.as_bytes()).unwrap();
    let y = Uri::parse(b.as_bytes()).unwrap();
    let r = x.equivalent(&y);
    assert_eq!(r, y.equivalent(&x), "equivalence must be symmetric: {a} / {b}");
    r
}

#[test]
fn basic_components() {
    let u = sip("sip:alice:secret@atlanta.com:5070;transport=tcp;lr?subject=hi&x=");
    assert_eq!(u.scheme, Scheme::Sip);
    assert_eq!(u.user, Some("alice"));
    assert_eq!(u.password, Some("secret"));
    assert_eq!(u.host, Host::Name("atlanta.com"));
    assert_eq!(u.port, Some(5070));
    assert_eq!(u.params_raw(), ";transport=tcp;lr");
    assert_eq!(u.headers_raw(), "subject=hi&x=");
    assert_eq!(u.transport(), Some("tcp"));
    assert!(u.lr());
    let params: Vec<_> = u.params().collect();
    assert_eq!(params, [("transport", Some("tcp")), ("lr", None)]);
    let headers: Vec<_> = u.headers().collect();
    assert_eq!(headers, [("subject", "hi"), ("x", "")]);
    assert_eq!(u.as_str(), "sip:alice:secret@atlanta.com:5070;transport=tcp;lr?subject=hi&x=");
}

#[test]
fn no_userinfo_no_params() {
    let u = sip("sip:example.com");
    assert_eq!((u.user, u.password, u.port), (None, None, None));
    assert_eq!(u.params().count(), 0);
    assert_eq!(u.headers().count(), 0);
    assert_eq!(u.params_raw(), "");
    assert_eq!(u.headers_raw(), "");
    assert!(!u.lr());
    // Empty password is allowed: password = *( ... ).
    assert_eq!(sip("sip:bob:@h").password, Some(""));
}

#[test]
fn scheme_case_insensitive() {
    let u = Uri::parse(b"SIP:user@host").unwrap();
    assert_eq!(u.scheme(), "SIP");
    assert_eq!(u.as_sip().unwrap().scheme, Scheme::Sip);
    let s = Uri::parse(b"SiPs:host").unwrap();
    assert_eq!(s.scheme(), "SiPs");
    assert_eq!(s.as_sip().unwrap().scheme, Scheme::Sips);
    assert!(equiv("SIP:user@host", "sip:user@host"));
    assert_eq!(Scheme::Sips.default_port(), 5061);
}

#[test]
fn known_params() {
    let u = sip("sip:h;TRANSPORT=udp;maddr=239.255.255.1;ttl=15;user=phone;method=INVITE;Lr");
    assert_eq!(u.transport(), Some("udp"));
    assert_eq!(u.maddr(), Some("239.255.255.1"));
    assert_eq!(u.ttl(), Some(15));
    assert_eq!(u.user_param(), Some("phone"));
    assert_eq!(u.method_param(), Some("INVITE"));
    assert!(u.lr());
    assert_eq!(u.param("lr"), Some(None));
    assert_eq!(u.param("nope"), None);
    assert_eq!(sip("sip:h;ttl=256").ttl(), None);
    assert_eq!(sip("sip:h;ttl=0255").ttl(), None);
    assert_eq!(sip("sip:h;ttl=255").ttl(), Some(255));
    assert!(sip("sip:h;lr=on").lr());
}

#[test]
fn rfc4475_intmeth_unusual_userinfo() {
    // §3.1.1.2: user contains '?', ';' and '/', all user-unreserved.
    let u = sip(
        "sip:1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*:&it+has=1,weird!*pas$wo~d_too.(doesn't-it)@example.com",
    );
    assert_eq!(u.user, Some("1_unusual.URI~(to-be!sure)&isn't+it$/crazy?,/;;*"));
    assert_eq!(u.password, Some("&it+has=1,weird!*pas$wo~d_too.(doesn't-it)"));
    assert_eq!(u.host, Host::Name("example.com"));
    assert_eq!(u.params().count(), 0);
    assert_eq!(u.headers().count(), 0);
}

#[test]
fn rfc4475_semiuri() {
    let u = sip("sip:user;par=u%40example.net@example.com");
    assert_eq!(u.user, Some("user;par=u%40example.net"));
    assert_eq!(u.host, Host::Name("example.com"));
    assert_eq!(u.params().count(), 0);
    assert_eq!(u.user_unescaped().unwrap().as_ref(), b"user;par=u@example.net");
    // Without '@' the ';' starts the parameters.
    let v = sip("sip:example.com;par=x");
    assert_eq!(v.user, None);
    assert_eq!(v.param("par"), Some(Some("x")));
}

#[test]
fn rfc4475_esc01() {
    let u = sip("sip:sips%3Auser%40example.com@example.net");
    assert_eq!(u.user, Some("sips%3Auser%40example.com"));
    assert_eq!(u.host, Host::Name("example.net"));
    assert_eq!(u.user_unescaped().unwrap().as_ref(), b"sips:user@example.com");
    let c = sip("sip:cal%6Cer@host5.example.net;%6C%72;n%61me=v%61lue%25%34%31");
    assert_eq!(c.user_unescaped().unwrap().as_ref(), b"caller");
    // Escaped parameter names are found by their unescaped name.
    assert!(c.lr());
    assert_eq!(c.param("name"), Some(Some("v%61lue%25%34%31")));
    let f = sip("sip:I%20have%20spaces@example.net");
    assert_eq!(f.user_unescaped().unwrap().as_ref(), b"I have spaces");
}

#[test]
fn rfc4475_esc01_param_value_comparison() {
    // "v%61lue%25%34%31" decodes once to "value%41": NOT "valueA".
    assert!(!equiv("sip:h;name=v%61lue%25%34%31", "sip:h;name=valueA"));
    assert!(equiv("sip:h;name=v%61lue%25%34%31", "sip:h;name=value%2541"));
    // A raw "value%41" is an escaped unreserved 'A' (§19.1.4): equal to valueA.
    assert!(equiv("sip:h;name=value%41", "sip:h;name=valueA"));
    assert!(equiv("sip:h;name=value%41", "sip:h;NAME=VALUEa"));
}

#[test]
fn rfc4475_escnull() {
    let a = sip("sip:%00@example.com");
    let b = sip("sip:%00%00@example.com");
    assert_eq!(a.user_unescaped().unwrap().as_ref(), [0u8]);
    assert_eq!(b.user_unescaped().unwrap().as_ref(), [0u8, 0]);
    assert!(!equiv("sip:%00@example.com", "sip:%00%00@example.com"));
    let n = sip("sip:null-%00-null@example.com");
    assert_eq!(n.user_unescaped().unwrap().as_ref(), b"null-\0-null");
}

#[test]
fn rfc4475_regescrt_headers() {
    let u = sip("sip:user@example.com?Route=%3Csip:sip.example.com%3E");
    let h: Vec<_> = u.headers().collect();
    assert_eq!(h, [("Route", "%3Csip:sip.example.com%3E")]);
    assert_eq!(u.params().count(), 0);
}

#[test]
fn rfc4475_cparam02_unknown_flag_param() {
    let u = sip("sip:user@host;unknownparam");
    assert_eq!(u.param("unknownparam"), Some(None));
    assert_eq!(u.param("UNKNOWNPARAM"), Some(None));
    let g = sip("sip:+19725552222@gw1.example.net;unknownparam");
    assert_eq!(g.user, Some("+19725552222"));
}

#[test]
fn rejects_whitespace_and_angle_brackets() {
    // RFC 4475 §3.1.2.8 lwsruri, §3.1.2.14 badaspec, §3.1.2.7 ltgtruri.
    assert_eq!(err("sip:user@example.com; lr").reason, "whitespace in URI");
    assert_eq!(err("sip:user@example.com; lr").offset, 21);
    assert_eq!(err("sip:j.user@example.com ").reason, "whitespace in URI");
    assert_eq!(err("sip:us er@h").reason, "whitespace in URI");
    assert_eq!(err("sip:h\t").reason, "whitespace in URI");
    assert_eq!(err("sip:h\r\n").reason, "whitespace in URI");
    assert_eq!(err("<sip:user@example.com>").reason, "angle bracket in URI");
    assert_eq!(err("sip:user@example.com>").offset, 20);
    assert_eq!(err("sip:us\u{e9}r@h").reason, "invalid character in URI");
    assert_eq!(err("sip:u\0@h").reason, "invalid character in URI");
}

#[test]
fn rejects_bad_syntax() {
    assert_eq!(err("sip:").reason, "empty host");
    assert_eq!(err("sip:user@").reason, "empty host");
    assert_eq!(err("sip:user@;lr").reason, "empty host");
    assert_eq!(err("sip:@host").reason, "empty user part");
    assert_eq!(err("sip::pw@host").reason, "empty user part");
    assert_eq!(err("sip:us\"er@host").reason, "invalid character in user part");
    assert_eq!(err("sip:us\"er@host").offset, 6);
    assert_eq!(err("sip:u:p:w@host").reason, "invalid character in password");
    assert_eq!(err("sip:a@b@c").reason, "bad host");
    assert_eq!(err("sip:host;").reason, "empty parameter name");
    assert_eq!(err("sip:host;=x").reason, "empty parameter name");
    assert_eq!(err("sip:host;a=").reason, "empty parameter value");
    assert_eq!(err("sip:host;a=b=c").reason, "invalid character in parameter");
    assert_eq!(err("sip:host;a=\"b\"").reason, "invalid character in parameter");
    assert_eq!(err("sip:host?").reason, "header without '='");
    assert_eq!(err("sip:host?a").reason, "header without '='");
    assert_eq!(err("sip:host?=v").reason, "empty header name");
    assert_eq!(err("sip:host?a=b&").reason, "header without '='");
    assert_eq!(err("sip:host?a=b;c").reason, "invalid character in header");
    assert_eq!(err("sip:ho_st!.com").reason, "bad host");
    assert_eq!(err("sip:host..com").reason, "bad host");
    assert_eq!(err("sip:.host").reason, "bad host");
    assert_eq!(err("sip:h~t").reason, "bad host");
    assert_eq!(err("host.com").reason, "missing scheme");
    assert_eq!(err("").reason, "missing scheme");
    assert_eq!(err(":x").reason, "bad scheme");
    assert_eq!(err("1ab:x").reason, "bad scheme");
    assert_eq!(err("a_b:x").reason, "bad scheme");
}

#[test]
fn rejects_bad_escapes() {
    assert_eq!(err("sip:%4@host").reason, "bad %-escape");
    assert_eq!(err("sip:%4@host").offset, 4);
    assert_eq!(err("sip:%GG@host").reason, "bad %-escape");
    assert_eq!(err("sip:u:%x1@host").reason, "bad %-escape");
    assert_eq!(err("sip:host;a=%2").reason, "bad %-escape");
    assert_eq!(err("sip:host;a%=1").reason, "bad %-escape");
    assert_eq!(err("sip:host?a=%").reason, "bad %-escape");
    assert_eq!(err("sip:host?a=%").offset, 11);
}

#[test]
fn ports() {
    assert_eq!(sip("sip:h:0").port, Some(0));
    assert_eq!(sip("sip:h:65535").port, Some(65535));
    assert_eq!(sip("sip:h:05060").port, Some(5060));
    assert_eq!(err("sip:h:65536").reason, "bad port");
    assert_eq!(err("sip:h:99999999999999999999999999").reason, "bad port");
    assert_eq!(err("sip:h:").reason, "bad port");
    assert_eq!(err("sip:h:;lr").reason, "bad port");
    assert_eq!(err("sip:h:50a0").reason, "bad port");
    assert_eq!(err("sip:h:50a0").offset, 8);
    assert_eq!(err("sip:h:-1").reason, "bad port");
    assert_eq!(err("sip:h:+1").reason, "bad port");
}

#[test]
fn percent_decode_strict() {
    assert!(matches!(percent_decode(b"abc").unwrap(), Cow::Borrowed(b"abc")));
    assert_eq!(percent_decode(b"%61%62c%2f%2F").unwrap().as_ref(), b"abc//");
    assert_eq!(percent_decode(b"%00%ff").unwrap().as_ref(), [0u8, 255]);
    assert_eq!(percent_decode(b"ab%4").unwrap_err().offset, 2);
    assert_eq!(percent_decode(b"%GG").unwrap_err().reason, "bad %-escape");
    assert!(percent_decode(b"%").is_err());
    assert!(percent_decode(b"%%41").is_err());
}

#[test]
fn length_limit() {
    let ok = format!("sip:{}@h", "a".repeat(MAX_URI_LEN - 6));
    assert_eq!(ok.len(), MAX_URI_LEN);
    assert!(Uri::parse(ok.as_bytes()).is_ok());
    let long = format!("sip:{}@h", "a".repeat(MAX_URI_LEN - 5));
    assert_eq!(err(&long).reason, "URI too long");
}

#[test]
fn error_display() {
    let e = err("sip:h:x");
    assert_eq!(e.to_string(), "bad port at byte 6");
    let _: &dyn std::error::Error = &e;
}

#[test]
fn rfc3261_19_1_4_equivalent_examples() {
    assert!(equiv("sip:%61lice@atlanta.com;transport=TCP", "sip:alice@AtLanTa.CoM;Transport=tcp"));
    assert!(equiv("sip:carol@chicago.com", "sip:carol@chicago.com;newparam=5"));
    assert!(equiv("sip:carol@chicago.com", "sip:carol@chicago.com;security=on"));
    assert!(equiv("sip:carol@chicago.com;newparam=5", "sip:carol@chicago.com;security=on"));
    assert!(equiv(
        "sip:biloxi.com;transport=tcp;method=REGISTER?to=sip:bob%40biloxi.com",
        "sip:biloxi.com;method=REGISTER;transport=tcp?to=sip:bob%40biloxi.com"
    ));
    assert!(equiv(
        "sip:alice@atlanta.com?subject=project%20x&priority=urgent",
        "sip:alice@atlanta.com?priority=urgent&subject=project%20x"
    ));
}

#[test]
fn rfc3261_19_1_4_not_equivalent_examples() {
    assert!(!equiv("SIP:ALICE@AtLanTa.CoM;Transport=udp", "sip:alice@AtLanTa.CoM;Transport=UDP"));
    assert!(!equiv("sip:bob@biloxi.com", "sip:bob@biloxi.com:5060"));
    assert!(!equiv("sip:bob@biloxi.com", "sip:bob@biloxi.com;transport=udp"));
    assert!(!equiv("sip:bob@biloxi.com", "sip:bob@biloxi.com:6000;transport=tcp"));
    assert!(!equiv("sip:carol@chicago.com", "sip:carol@chicago.com?Subject=next%20meeting"));
    assert!(!equiv("sip:bob@phone21.boxesbybob.com", "sip:bob@192.0.2.4"));
}

#[test]
fn comparison_rules() {
    assert!(!equiv("sip:alice@h", "sips:alice@h"));
    assert!(!equiv("sip:alice@h", "sip:h"));
    assert!(!equiv("sip:alice:pw@h", "sip:alice@h"));
    assert!(!equiv("sip:alice:pw@h", "sip:alice:PW@h"));
    assert!(equiv("sip:alice:p%77@h", "sip:alice:pw@h"));
    // Reserved characters are not equivalent to their escapes.
    assert!(!equiv("sip:a;b@h", "sip:a%3Bb@h"));
    assert!(equiv("sip:a%3bb@h", "sip:a%3Bb@h"));
    assert!(!equiv("sip:a%253Bb@h", "sip:a%3Bb@h"));
    assert!(equiv("sip:h:5060", "sip:H:5060"));
    assert!(equiv("sip:[2001:db8::1]", "sip:[2001:DB8:0::1]"));
    // Must-match parameters, present in only one URI.
    for p in ["user=phone", "ttl=1", "method=INVITE", "maddr=h", "transport=udp"] {
        assert!(!equiv("sip:h", &format!("sip:h;{p}")), "{p}");
    }
    assert!(!equiv("sip:h;user=phone", "sip:h;user=ip"));
    assert!(equiv("sip:h;lr", "sip:h"));
    assert!(equiv("sip:h;lr;a=1", "sip:h;A=1;LR"));
    assert!(!equiv("sip:h;lr", "sip:h;lr=on"));
    assert!(!equiv("sip:h;a=1", "sip:h;a=2"));
    assert!(equiv("sip:h;%6C%72", "sip:h;lr"));
    assert!(!equiv("sip:h;%6C%72", "sip:h;lr=x"));
    // Headers: names case-insensitive, values case-sensitive, both sets equal.
    assert!(equiv("sip:h?Subject=x", "sip:h?subject=x"));
    assert!(!equiv("sip:h?subject=x", "sip:h?subject=X"));
    assert!(equiv("sip:h?subject=%78", "sip:h?subject=x"));
    assert!(!equiv("sip:h?a=1", "sip:h?a=1&b=2"));
    // Different URI kinds.
    assert!(!equiv("sip:h", "tel:+1234"));
    let u = Uri::parse(b"sip:h").unwrap();
    assert!(u.equivalent(&u));
}

#[test]
fn uri_accessors_and_display() {
    let text = "sips:Bob@Biloxi.com:5061;transport=tls?x=y";
    let u = Uri::parse(text.as_bytes()).unwrap();
    assert_eq!(u.as_str(), text);
    assert_eq!(u.to_string(), text);
    assert_eq!(u.as_sip().unwrap().to_string(), text);
    assert!(u.as_tel().is_none());
    assert_eq!(SipUri::parse(text.as_bytes()).unwrap().host, Host::Name("Biloxi.com"));
    assert_eq!(SipUri::parse(b"tel:+1").unwrap_err().reason, "not a sip or sips URI");
    // Zero-copy: the parsed pieces point into the input buffer.
    let user = u.as_sip().unwrap().user.unwrap();
    assert_eq!(user.as_ptr(), text[5..].as_ptr());
    assert_eq!(u.as_sip().unwrap().password_unescaped(), None);
}

#[test]
fn class_table_matches_grammar() {
    // RFC 3261 §25.1: the unescaped characters of each component.
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b);
    let sets: [(u8, &[u8]); 4] = [
        (escape::USER, b"&=+$,;?/"),
        (escape::PASSWORD, b"&=+$,"),
        (escape::PARAM, b"[]/:&+$"),
        (escape::HEADER, b"[]/?:+$"),
    ];
    for b in 0..=255u8 {
        for (bit, extra) in sets {
            assert_eq!(escape::class(b) & bit != 0, unreserved(b) || extra.contains(&b), "{b:#x} / {bit:#x}");
        }
        let host = b.is_ascii_alphanumeric() || b"-_.".contains(&b);
        assert_eq!(escape::class(b) & escape::HOST != 0, host, "{b:#x}");
        assert_eq!(escape::class(b) & escape::DOT != 0, b == b'.');
        assert_eq!(escape::class(b) & escape::NUMERIC != 0, b.is_ascii_digit() || b == b'.');
        let scheme = b.is_ascii_alphanumeric() || b"+-.".contains(&b);
        assert_eq!(escape::class(b) & escape::SCHEME != 0, scheme, "{b:#x}");
        // `Uri::parse` only screens octets when the grammar rejects the input.
        if escape::class(b) != 0 {
            assert_eq!(screen(&[b]), Ok(()), "{b:#x}");
        }
    }
}

#[test]
fn screening_error_wins_over_grammar_error() {
    // The grammar fails first at the empty label, but the octet error is reported.
    assert_eq!(err("sip:a..b x"), UriError::new(8, "whitespace in URI"));
    assert_eq!(err("sip:h;=x\u{1}"), UriError::new(8, "invalid character in URI"));
    assert_eq!(err("sip:h?a\u{e9}"), UriError::new(7, "invalid character in URI"));
    assert_eq!(err("tel:x>"), UriError::new(5, "angle bracket in URI"));
    assert_eq!(err("x y"), UriError::new(1, "whitespace in URI"));
    // Same for hosts alone: a non-ASCII octet comes first.
    assert_eq!(parse_host_port(b"a..b\xc3\xa9").unwrap_err(), UriError::new(4, "bad host"));
    assert_eq!(Host::parse(b"1.2.3.4\xff").unwrap_err(), UriError::new(7, "bad host"));
}

#[test]
fn hosts_on_the_fast_path_and_off_it() {
    fn host(s: &str) -> Host<'_> {
        sip(s).host
    }
    assert_eq!(host("sip:u@192.0.2.4:5060;lr"), Host::Ipv4([192, 0, 2, 4].into()));
    assert_eq!(host("sip:01.002.3.4"), Host::Ipv4([1, 2, 3, 4].into()));
    assert_eq!(host("sip:1.2.3.4a"), Host::Name("1.2.3.4a"));
    assert_eq!(host("sip:1and1.com?x=y"), Host::Name("1and1.com"));
    assert_eq!(host("sip:a.:5"), Host::Name("a."));
    assert_eq!(host("sip:[::1]:5060;lr"), Host::Ipv6(std::net::Ipv6Addr::LOCALHOST));
    assert_eq!(err("sip:1.2.3.4.5"), UriError::new(4, "bad host"));
    assert_eq!(err("sip:256.1.1.1;lr"), UriError::new(4, "bad host"));
    assert_eq!(err("sip:1.2.3.4.;lr"), UriError::new(4, "bad host"));
    assert_eq!(err("sip:a..b:5:6"), UriError::new(10, "IPv6 address must be in brackets"));
    assert_eq!(err("sip:a..b:5x"), UriError::new(6, "bad host"));
    assert_eq!(err("sip:ab:5x"), UriError::new(8, "bad port"));
    assert_eq!(parse_host_port(b"h.example.com:5060"), Ok((Host::Name("h.example.com"), Some(5060))));
    assert_eq!(parse_host_port(b"h.example.com:5060;x").unwrap_err(), UriError::new(18, "bad port"));
    assert_eq!(parse_host_port(b"h.exa mple").unwrap_err(), UriError::new(5, "bad host"));
}

#[test]
fn scheme_dispatch() {
    assert_eq!(sip("SiPs:x").scheme, Scheme::Sips);
    assert!(matches!(Uri::parse(b"sipx:y"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"si:y"), Ok(Uri::Other(_))));
    assert!(matches!(Uri::parse(b"TEL:+1"), Ok(Uri::Tel(_))));
    assert_eq!(err("a+b;:x"), UriError::new(3, "bad scheme"));
}
