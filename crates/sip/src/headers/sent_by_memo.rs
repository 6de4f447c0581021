//! The start of the last top Vias a thread read as plain (`SIP/2.0/UDP 192.0.2.1:5060`, the
//! sent-protocol and sent-by) and what they read as, so that a Via starting with the same
//! octets is not read again: a proxy gets its own Via back on top of every response (RFC 3261
//! §18.2.2, one text per listener), and a client's requests repeat theirs. Reading the
//! protocol, the IPv4 address and the port octet by octet cost about 135 instructions per
//! Via; comparing the text with a remembered one about 20.
//!
//! What a plain read of `sent-by` finds depends only on its octets and on the octet after
//! them (a digit there would lengthen the port or the address's last group): a remembered
//! text answers only when it is followed by one of the octets that may end a plain sent-by
//! (`;`, `,`, CR, SP, HT or the end), so the answer is the read's. Two texts are kept, the
//! last one used first.

use std::cell::RefCell;
use std::net::Ipv4Addr;

/// The longest text kept. The longest plain one, `SIP/2.0/UDP ` and `255.255.255.255:65535`,
/// is 33 octets and is not kept (`remember` skips it; it is read each time); the usual ones
/// are far shorter.
const TEXT: usize = 32;

#[derive(Clone, Copy)]
struct Remembered {
    text: [u8; TEXT],
    /// 0: nothing kept.
    len: usize,
    addr: Ipv4Addr,
    port: Option<u16>,
}

const NOTHING: Remembered = Remembered { text: [0; TEXT], len: 0, addr: Ipv4Addr::UNSPECIFIED, port: None };

thread_local! {
    static KEPT: RefCell<[Remembered; 2]> = const { RefCell::new([NOTHING; 2]) };
}

/// The address and port that the plain read of `s[..len]` found, and `len`, when a kept text
/// starts `s` and an octet that ends a sent-by follows it.
#[inline(always)]
pub(crate) fn recall(s: &[u8]) -> Option<(Ipv4Addr, Option<u16>, usize)> {
    KEPT.with(|kept| {
        let mut kept = kept.try_borrow_mut().ok()?;
        for k in 0..2 {
            let r = kept[k];
            if r.len != 0 && s.get(..r.len) == Some(&r.text[..r.len]) && ends_sent_by(s.get(r.len)) {
                if k == 1 {
                    kept.swap(0, 1);
                }
                return Some((r.addr, r.port, r.len));
            }
        }
        None
    })
}

/// Keeps `s[..len]` and what the plain read found in it (the older text is forgotten).
#[inline(never)]
pub(crate) fn remember(s: &[u8], addr: Ipv4Addr, port: Option<u16>, len: usize) {
    let Some(text) = s.get(..len).filter(|t| t.len() <= TEXT) else { return };
    KEPT.with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else { return };
        kept[1] = kept[0];
        let mut r = Remembered { text: [0; TEXT], len, addr, port };
        r.text[..len].copy_from_slice(text);
        kept[0] = r;
    });
}

/// Whether `next` may follow a plain sent-by (what [`super::PlainVia::read_prefix`] accepts).
#[inline(always)]
pub(crate) fn ends_sent_by(next: Option<&u8>) -> bool {
    matches!(next, None | Some(b';' | b'\r' | b' ' | b'\t' | b','))
}
