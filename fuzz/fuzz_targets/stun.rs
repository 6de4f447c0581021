//! STUN keep-alives (herald_core::inbound::stun, RFC 5626 §8) on arbitrary datagrams: never a
//! panic; an answer only to a Binding request, with its transaction id, never larger than the
//! request plus XOR-MAPPED-ADDRESS, and itself a well-formed STUN message (a response).
#![no_main]

use herald_core::inbound::stun::{self, Refused};
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;

fuzz_target!(|data: &[u8]| {
    let v4: SocketAddr = "192.0.2.1:32853".parse().unwrap();
    let v6: SocketAddr = "[2001:db8::1]:5060".parse().unwrap();
    let mapped: SocketAddr = "[::ffff:192.0.2.1]:5060".parse().unwrap();
    for (source, attribute) in [(v4, 12), (v6, 24), (mapped, 12)] {
        let Ok(answer) = stun::answer(data, source) else { continue };
        assert!(stun::is_stun(data), "answered something that is not STUN");
        assert_eq!(&data[..2], &[0x00, 0x01], "answered something other than a Binding request");
        assert_eq!(&answer[8..20], &data[8..20], "transaction id");
        assert!(answer.len() <= data.len() + attribute, "{} bytes answered {}", answer.len(), data.len());
        assert!(stun::is_stun(&answer));
        assert_eq!(stun::parse_binding_request(&answer), Err(Refused::NotBindingRequest), "malformed answer");
    }
});
