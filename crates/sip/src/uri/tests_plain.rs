//! The plain read of a sip: URI (module `plain`) against the grammar's parse.

use super::any::Uri;
use super::host::Host;
use super::plain::PlainSip;
use super::sip::Scheme;

/// Wherever the plain read accepts a URI, the general parse gives the same parts; and it
/// accepts the usual Request-URIs.
#[test]
fn plain_uris_read_as_the_general_parse() {
    use proptest::prelude::*;
    let user = prop_oneof![
        Just(""),
        Just("bob@"),
        Just("sipp@"),
        Just("+4912345@"),
        Just("a;b=c@"),
        Just("a?b@"),
        Just("b%41b@"),
        Just("bob:pw@"),
        Just("@"),
        Just("a@b@"),
        Just("é@"),
    ];
    let host = prop_oneof![
        Just("127.0.0.1"),
        Just("192.0.2.255"),
        Just("1.2.3.256"),
        Just("1.2.3"),
        Just("1.2.3.4567"),
        Just("01.002.3.4"),
        Just("1.2.3.4x"),
        Just("1.2.3.4-"),
        Just("host.example.com"),
        Just("[2001:db8::1]"),
    ];
    let port = prop_oneof![
        Just(""),
        Just(":5060"),
        Just(":0"),
        Just(":65535"),
        Just(":65536"),
        Just(":0005060"),
        Just(":"),
        Just(":5060:1"),
        Just(":50a"),
    ];
    let param = prop_oneof![
        Just(";transport=UDP"),
        Just(";lr"),
        Just(";r2=on"),
        Just(";x=[2001:db8::1]"),
        Just(";"),
        Just(";=a"),
        Just(";a="),
        Just(";a=b=c"),
        Just(";%6C%72"),
        Just("?h=v"),
        Just(" "),
        Just(";a@b"),
        Just(";a=\u{e9}"),
    ];
    let scheme = prop_oneof![Just("sip:"), Just("SIP:"), Just("sips:"), Just("tel:")];
    proptest::proptest!(|(sc in scheme, u in user, h in host, p in port, ps in proptest::collection::vec(param, 0..4))| {
        let text = format!("{sc}{u}{h}{p}{}", ps.concat());
        let s = text.as_bytes();
        if let Some(plain) = PlainSip::read(s) {
            prop_assert_eq!(plain.clone().uri(s).map(Uri::Sip), Uri::parse_general(s).ok(), "{}", text);
            let Ok(Uri::Sip(general)) = Uri::parse_general(s) else {
                return Err(TestCaseError::fail(format!("the general parse refuses {text}")));
            };
            let (raw, params, headers) = general.raw_parts();
            prop_assert_eq!(general.scheme, Scheme::Sip, "{}", text);
            prop_assert_eq!(plain.user.and_then(|r| text.get(r)), general.user, "{}", text);
            prop_assert_eq!(general.password, None, "{}", text);
            prop_assert_eq!(Host::Ipv4(plain.addr), general.host, "{}", text);
            prop_assert_eq!(plain.port, general.port, "{}", text);
            prop_assert_eq!(raw, text.as_str());
            prop_assert_eq!(text.get(plain.params), Some(params), "{}", text);
            prop_assert_eq!(headers, "", "{}", text);
        }
    });
    for usual in ["sip:bob@127.0.0.1:5060", "sip:127.0.0.1:19102;transport=UDP", "sip:192.0.2.1;lr;r2=on"] {
        assert!(PlainSip::read(usual.as_bytes()).is_some(), "{usual}");
    }
}
