//! Request validation (RFC 3261 §16.3) and loop detection (§16.3 step 4, §16.6 step 8).

use super::identity::Identity;
use herald_sip::uri::Uri;
use herald_sip::{HeaderName, Message, Method};
use std::hash::{BuildHasher, Hasher};

/// A request the proxy must answer itself instead of forwarding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: u16,
    pub reason: &'static str,
    /// Extra headers for the response, e.g. `Unsupported` with a 420.
    pub headers: Vec<(&'static str, String)>,
}

impl Rejection {
    pub fn new(status: u16, reason: &'static str) -> Rejection {
        Rejection { status, reason, headers: Vec::new() }
    }
}

/// Option tags herald understands in Proxy-Require (RFC 3261 §16.3 step 5): Path (RFC 3327) and
/// Outbound (RFC 5626, as edge proxy and registrar: `crate::engine` flows, `crate::registrar`).
pub const SUPPORTED: &[&str] = &["path", "outbound"];

/// Steps 2 to 5 of RFC 3261 §16.3 (step 1, syntax, is `Message::validate`; step 6,
/// authorization, belongs to the authentication layer).
/// `loop_hash` is [`loop_hash`] of `msg`, computed once by the caller, which also needs it for
/// the branches it creates. `tel`: tel: Request-URIs (RFC 3966) are understood: a routing
/// table (`[[route]]`) may route them.
pub fn validate_request(msg: &Message, identity: &Identity, loop_hash: u64, tel: bool) -> Result<(), Rejection> {
    // Step 2: URI scheme. herald routes sip and sips (RFC 4475 §3.3.2/§3.3.3), and tel: when it
    // has a routing table. A checked message's memo knows a sip: or sips: one without making it.
    if msg.checked_request_uri_scheme().is_none() {
        match msg.request_uri() {
            Ok(Uri::Sip(_)) => {}
            Ok(Uri::Tel(_)) if tel => {}
            Ok(_) => return Err(Rejection::new(416, "Unsupported URI Scheme")),
            Err(_) => return Err(Rejection::new(400, "Bad Request-URI")),
        }
    }
    // Step 3: Max-Forwards. OPTIONS with 0 may be answered as a UAS (the caller handles that).
    if msg.max_forwards().ok().flatten() == Some(0) && msg.method() != Some(Method::Options) {
        return Err(Rejection::new(483, "Too Many Hops"));
    }
    // Step 4: loop detection.
    if is_loop(msg, identity, loop_hash) {
        return Err(Rejection::new(482, "Loop Detected"));
    }
    // Step 5: Proxy-Require, when the header index has one (collecting from `tokens`, which
    // walks every line, cost ~140 instructions per request without one, issue 21).
    if msg.field_index(HeaderName::ProxyRequire).is_none() {
        return Ok(());
    }
    let unsupported: Vec<&str> = msg
        .tokens(HeaderName::ProxyRequire)
        .filter_map(Result::ok)
        .filter(|t| !SUPPORTED.iter().any(|s| s.eq_ignore_ascii_case(t)))
        .collect();
    if !unsupported.is_empty() {
        let mut r = Rejection::new(420, "Bad Extension");
        r.headers.push(("Unsupported", unsupported.join(", ")));
        return Err(r);
    }
    Ok(())
}

/// The loop-detection hash of RFC 3261 §16.6 step 8: over From tag, Call-ID, Request-URI and
/// the CSeq *number* (step 8 names "the sequence number from the CSeq header field", not the
/// method). The Request-URI is the field whose change makes a returning request a spiral
/// rather than a loop; the others tie the hash to one request.
///
/// Deviations, each so that a request forwarded without state leaves with the branch of the
/// INVITE it belongs to (§16.11 computes that branch from "the CSeq number (but not method)"):
/// a CANCEL must reach the transaction it cancels (§9.1), and an ACK for a non-2xx answer the
/// INVITE's server transaction (§17.1.1.3):
/// * step 8 lists the To tag. The ACK for a non-2xx answer to an initial INVITE carries the
///   answer's To tag, which the INVITE had not. No proxy changes a To tag, so a looping request
///   comes back with the one it had: leaving it out never turns a loop into a spiral;
/// * step 8 also lists the topmost Via, but a looping request always comes back with another
///   hop's Via on top, so with it no loop would ever be detected; RFC 5393 §4.2 drops it too;
/// * step 8 adds Proxy-Require and Proxy-Authorization. A CANCEL carries neither (it cannot be
///   challenged, §22.1; it has no Require, §9.1), so with them an authenticated INVITE and its
///   CANCEL got different branches and the stateless CANCEL matched nothing downstream. A UAC
///   that adds credentials or changes Proxy-Require sends a new request with a new CSeq number
///   (§8.1.3.5, §22.2), which the hash already covers. Kamailio's branch hash (`char_msg_val`)
///   leaves both out as well.
///
/// foldhash with a fixed seed, eight bytes at a step: the same value in every process of a
/// build (the hash travels in our branches and is compared when the request comes back),
/// about a fifth of FNV-1a's byte-at-a-time cost (~1.2k instructions per request before).
/// Lengths go in before each part, so no two field lists hash alike by shifting a boundary.
pub fn loop_hash(msg: &Message) -> u64 {
    let from_tag = msg.from_tag().ok().flatten().unwrap_or("");
    let mut h = foldhash::fast::FixedState::with_seed(LOOP_HASH_SEED).build_hasher();
    for part in [
        from_tag.as_bytes(),
        msg.get(HeaderName::CallId).unwrap_or_default(),
        msg.request_uri_bytes().unwrap_or_default(),
        cseq_number(msg.get(HeaderName::CSeq).unwrap_or_default()),
    ] {
        h.write_usize(part.len());
        h.write(part);
    }
    h.finish()
}

/// The number of a CSeq value (`1*DIGIT LWS Method`, RFC 3261 §20.16): its leading digits
/// (the receipt check has already refused a value that does not start with them).
fn cseq_number(value: &[u8]) -> &[u8] {
    let end = value.iter().position(|b| !b.is_ascii_digit()).unwrap_or(value.len());
    &value[..end]
}

/// The loop hash's fixed seed ("herald-l" in ASCII): any constant, the same in every process.
const LOOP_HASH_SEED: u64 = 0x6865_7261_6c64_2d6c;

/// The separator between a branch's unique part and its loop hash.
pub const LOOP_SEP: char = '-';

/// A request loops if one of its Vias was put there by this proxy with the hash this request
/// has now: it came back unchanged. With a different hash it is a spiral (§16.3 step 4).
fn is_loop(msg: &Message, identity: &Identity, hash: u64) -> bool {
    // The 16 digits on the stack: a String cost an allocation per request.
    let want = herald_sip::text::hex16(hash);
    // A branch of ours carrying this hash has LOOP_SEP and its 16 digits somewhere in a Via
    // line: without them no Via is parsed (nearly every request; parsing each Via cost ~1,500
    // instructions). The separator is searched for, not the digits: building a substring
    // searcher (memmem) cost more than this whole test.
    let holds_hash =
        |line: &[u8]| memchr::memchr_iter(LOOP_SEP as u8, line).any(|at| line.get(at + 1..at + 17) == Some(&want[..]));
    if !msg.fields(HeaderName::Via).any(|f| holds_hash(msg.value_of(f))) {
        return false;
    }
    msg.vias().filter_map(Result::ok).any(|via| {
        identity.is_own_sent_by(&via.host, via.port)
            && via.branch().and_then(|b| b.rsplit_once(LOOP_SEP)).is_some_and(|(_, h)| h.as_bytes() == want)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_sip::Limits;

    fn msg(s: &str) -> Message {
        Message::parse(Bytes::from(s.replace('\n', "\r\n")), &Limits::default()).unwrap()
    }

    fn id() -> Identity {
        Identity::new(vec!["192.0.2.10:5060".parse().unwrap()], ["example.com".to_owned()])
    }

    const BASE: &str = "INVITE sip:bob@example.com SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKa\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=1\nTo: <sip:bob@example.com>\nCall-ID: c1\nCSeq: 1 INVITE\nContent-Length: 0\n\n";

    #[test]
    fn schemes_and_hops() {
        assert_eq!(validate_request(&msg(BASE), &id(), loop_hash(&msg(BASE)), false), Ok(()));
        let tel = BASE.replace("INVITE sip:bob@example.com", "INVITE tel:+15551234");
        assert_eq!(validate_request(&msg(&tel), &id(), loop_hash(&msg(&tel)), false).unwrap_err().status, 416);
        assert_eq!(validate_request(&msg(&tel), &id(), loop_hash(&msg(&tel)), true), Ok(()), "with a routing table");
        let zero = BASE.replace("Max-Forwards: 70", "Max-Forwards: 0");
        assert_eq!(validate_request(&msg(&zero), &id(), loop_hash(&msg(&zero)), false).unwrap_err().status, 483);
    }

    #[test]
    fn proxy_require() {
        let pr = BASE.replace("Max-Forwards: 70", "Max-Forwards: 70\nProxy-Require: path, foo, bar");
        let r = validate_request(&msg(&pr), &id(), loop_hash(&msg(&pr)), false).unwrap_err();
        assert_eq!(r.status, 420);
        assert_eq!(r.headers, vec![("Unsupported", "foo, bar".to_owned())]);
    }

    #[test]
    fn loops_and_spirals() {
        let first = msg(BASE);
        let h = format!("{:016x}", loop_hash(&first));
        // The request comes back through us unchanged: same hash below the top Via → loop.
        let back = BASE.replace(
            "Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKa",
            &format!("Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKa\nVia: SIP/2.0/UDP 192.0.2.10;branch=z9hG4bK-x1-{h}"),
        );
        assert_eq!(validate_request(&msg(&back), &id(), loop_hash(&msg(&back)), false).unwrap_err().status, 482);
        // With a different Request-URI (e.g. retargeted), it's a spiral.
        let spiral = back.replace("INVITE sip:bob@example.com", "INVITE sip:bob@example.org");
        assert_eq!(validate_request(&msg(&spiral), &id(), loop_hash(&msg(&spiral)), false), Ok(()));
    }
}
