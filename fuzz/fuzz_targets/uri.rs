//! Uri::parse of arbitrary bytes: never panics; an accepted URI keeps its exact text and is
//! equivalent to itself (RFC 3261 §19.1.4 comparison is reflexive).
//!
//! Only the core API (`parse`, `as_str`, `equivalent`, the `SipUri` fields) is used so that the
//! target survives changes to the uri module's helpers.
#![no_main]

use herald_sip::uri::Uri;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(u) = Uri::parse(data) {
        assert_eq!(u.as_str().as_bytes(), data, "as_str() is not the input");
        assert!(u.equivalent(&u), "URI not equivalent to itself: {:?}", u.as_str());
        if let Uri::Sip(s) = &u {
            std::hint::black_box((s.user, s.password, &s.host, s.port));
        }
    }
});
