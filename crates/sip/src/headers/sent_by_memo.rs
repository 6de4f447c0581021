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

/// A kept text as the words a Via's first 32 octets are compared with: the text in `words`
/// (zero past `len`), 0xff at each of its octets in `mask`. Compared whole, four words with
/// no call: the slice compare called `memcmp` (callgrind: about 35 instructions a Via with
/// the call, against some 15).
#[derive(Clone, Copy)]
struct Remembered {
    words: [u64; TEXT / 8],
    mask: [u64; TEXT / 8],
    /// 0: nothing kept.
    len: usize,
    addr: Ipv4Addr,
    port: Option<u16>,
}

impl Remembered {
    /// Whether `s` starts with the kept text (and the text is not empty).
    #[inline(always)]
    fn starts(&self, s: &[u8]) -> bool {
        match s.first_chunk::<TEXT>() {
            Some(window) => {
                let mut differ = 0;
                for (i, chunk) in window.chunks_exact(8).enumerate() {
                    let word = u64::from_le_bytes(chunk.try_into().expect("8 octets"));
                    differ |= (word & self.mask[i]) ^ self.words[i];
                }
                differ == 0 && self.len != 0
            }
            None => self.len != 0 && s.get(..self.len) == Some(&self.text()[..self.len]),
        }
    }

    /// The kept text's octets (zero past `len`).
    fn text(&self) -> [u8; TEXT] {
        let mut text = [0; TEXT];
        for (i, chunk) in text.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&self.words[i].to_le_bytes());
        }
        text
    }
}

const NOTHING: Remembered =
    Remembered { words: [0; TEXT / 8], mask: [0; TEXT / 8], len: 0, addr: Ipv4Addr::UNSPECIFIED, port: None };

/// Two kept texts and which one was used last (tried first, and kept when a new one comes):
/// the last used is an index rather than the first place, so that a hit on the other one
/// swaps no texts.
struct Kept {
    texts: [Remembered; 2],
    last: usize,
}

thread_local! {
    static KEPT: RefCell<Kept> = const { RefCell::new(Kept { texts: [NOTHING; 2], last: 0 }) };
}

/// The address and port that the plain read of `s[..len]` found, and `len`, when a kept text
/// starts `s` and an octet that ends a sent-by follows it.
#[inline(always)]
pub(crate) fn recall(s: &[u8]) -> Option<(Ipv4Addr, Option<u16>, usize)> {
    KEPT.with(|kept| {
        let mut kept = kept.try_borrow_mut().ok()?;
        let first = kept.last;
        for k in [first, first ^ 1] {
            let r = &kept.texts[k];
            if r.starts(s) && ends_sent_by(s.get(r.len)) {
                let found = (r.addr, r.port, r.len);
                kept.last = k;
                return Some(found);
            }
        }
        None
    })
}

/// Keeps `s[..len]` and what the plain read found in it, in place of the text used less
/// recently.
#[inline(never)]
pub(crate) fn remember(s: &[u8], addr: Ipv4Addr, port: Option<u16>, len: usize) {
    let Some(text) = s.get(..len).filter(|t| t.len() <= TEXT) else { return };
    KEPT.with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else { return };
        let mut padded = [0u8; TEXT];
        padded[..len].copy_from_slice(text);
        let mut ones = [0u8; TEXT];
        ones[..len].fill(0xff);
        let mut r = Remembered { len, addr, port, ..NOTHING };
        for i in 0..TEXT / 8 {
            let word = |b: &[u8; TEXT]| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 octets"));
            r.words[i] = word(&padded);
            r.mask[i] = word(&ones);
        }
        let older = kept.last ^ 1;
        kept.texts[older] = r;
        kept.last = older;
    });
}

/// Whether `next` may follow a plain sent-by (what [`super::PlainVia::read_prefix`] accepts).
#[inline(always)]
pub(crate) fn ends_sent_by(next: Option<&u8>) -> bool {
    matches!(next, None | Some(b';' | b'\r' | b' ' | b'\t' | b','))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word compare of a kept text answers as the slice compare does: every text of 1 to
    /// 32 octets against windows that hold it, differ from it in one octet (inside it or just
    /// past it), or are shorter than 32 octets.
    #[test]
    fn kept_texts_compare_as_slices() {
        let base: Vec<u8> = b"SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK1".to_vec();
        for len in 1..=TEXT {
            let mut r = NOTHING;
            KEPT.with(|k| *k.borrow_mut() = Kept { texts: [NOTHING; 2], last: 0 });
            remember(&base, Ipv4Addr::LOCALHOST, None, len);
            KEPT.with(|k| r = k.borrow().texts[k.borrow().last]);
            assert_eq!(&r.text()[..len], &base[..len]);
            for cut in [base.len(), TEXT, TEXT - 1, len, len.saturating_sub(1)] {
                for at in 0..=TEXT {
                    for octet in [b'x', 0, 0xff, b'S'] {
                        let mut s = base[..cut].to_vec();
                        if let Some(b) = s.get_mut(at) {
                            *b = octet;
                        }
                        let want = s.get(..len) == Some(&base[..len]);
                        assert_eq!(r.starts(&s), want, "len {len} cut {cut} at {at}");
                    }
                }
            }
        }
        assert!(!NOTHING.starts(&base));
    }
}
