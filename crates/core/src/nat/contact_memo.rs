//! The last two Contact texts the private-address filter ([`super::may_name_private_address`])
//! read on this thread, with its answers, so that the same text again is answered by comparing
//! a few words.
//!
//! With the default detection every request herald forwards for its first hop, and every 1xx/2xx
//! of a responder that may be behind NAT, has its Contact text filtered (~200 instructions for
//! `<sip:sipp@127.0.0.1:5061;transport=UDP>`, four times per proxied call, issue 21). A dialog's
//! requests repeat their UA's Contact (INVITE, ACK, BYE: RFC 3261 §12.2.1.1), and its two UAs
//! alternate, hence two texts. A hit needs the exact octets, so the answer is the filter's own;
//! what the memo holds changes only how long the answer takes (a miss costs ~40 instructions
//! more). Per thread, as `transaction::grid_memo`: a worker's engine shards all run on it. In the
//! benchmark every Contact hits (SIPp writes one Contact for all calls of each side); between
//! many phones' dialogs interleaved on one thread most would miss.

use std::cell::Cell;

/// Texts longer than this are filtered every time (a usual Contact line is 25 to 60 octets).
const KEPT_OCTETS: usize = 64;
const WORDS: usize = KEPT_OCTETS / 8;

/// One kept text: its length and its octets as little-endian words, the last one's octets
/// past the end zero, and the filter's answer for it.
struct Kept {
    /// The text's length plus one; 0 while nothing is kept.
    len: Cell<usize>,
    words: [Cell<u64>; WORDS],
    answer: Cell<bool>,
}

thread_local! {
    static KEPT: ([Kept; 2], Cell<usize>) = const {
        (
            [const { Kept { len: Cell::new(0), words: [const { Cell::new(0) }; WORDS], answer: Cell::new(false) } }; 2],
            // Which of the two was kept or found last: a miss replaces the other.
            Cell::new(0),
        )
    };
}

/// `filter(value)`, from what this thread kept when `value` is one of the last two texts it
/// was asked about. `filter` is [`super::may_name_private_address`] (a parameter for the tests).
#[inline]
pub(super) fn kept_or(value: &[u8], filter: impl FnOnce(&[u8]) -> bool) -> bool {
    if value.is_empty() || value.len() > KEPT_OCTETS {
        return filter(value);
    }
    KEPT.with(|(kept, last)| {
        // The length first (the two texts kept are usually of different lengths), then the
        // words read from the text in place, without a branch each: the octets past a text's
        // end are zero in the kept words ([`text_words`]) and in the read of the last one.
        let same = |k: &Kept| {
            if k.len.get() != value.len() + 1 {
                return false;
            }
            let chunks = value.chunks_exact(8);
            let full = chunks.len();
            let mut differ = chunks.zip(&k.words).fold(0, |d, (c, w)| d | (word(c) ^ w.get()));
            if full < WORDS {
                differ |= last_word(value) ^ k.words[full].get();
            }
            differ == 0
        };
        for (i, k) in kept.iter().enumerate() {
            if same(k) {
                // The other one is replaced next (one store: the least recently used goes).
                last.set(i);
                return k.answer.get();
            }
        }
        let answer = filter(value);
        let slot = 1 - last.get();
        let k = &kept[slot];
        k.len.set(value.len() + 1);
        for (c, w) in k.words.iter().zip(text_words(value)) {
            c.set(w);
        }
        k.answer.set(answer);
        last.set(slot);
        answer
    })
}

/// `value` (1 to [`KEPT_OCTETS`] octets) as little-endian words, the octets past its end zero.
fn text_words(value: &[u8]) -> [u64; WORDS] {
    let mut words = [0u64; WORDS];
    let chunks = value.chunks_exact(8);
    let full = chunks.len();
    for (w, c) in words.iter_mut().zip(chunks) {
        *w = word(c);
    }
    if full < WORDS {
        words[full] = last_word(value);
    }
    words
}

/// Eight octets as a little-endian word.
#[inline(always)]
fn word(octets: &[u8]) -> u64 {
    u64::from_le_bytes(octets.try_into().unwrap_or([0; 8]))
}

/// The octets of `value` (at least one) after its last whole word, as the low octets of a
/// word, the rest zero (0 when there are none): read in the word that ends the text, shifted
/// down (the octets before them, read as whole words, shifted out), or octet by octet in a
/// text under a word.
#[inline(always)]
fn last_word(value: &[u8]) -> u64 {
    let rest = value.len() % 8;
    match value.len().checked_sub(8) {
        _ if rest == 0 => 0,
        Some(from) => word(&value[from..]) >> (8 * (8 - rest)),
        None => value.iter().rev().fold(0, |w, &o| w << 8 | u64::from(o)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::may_name_private_address;

    /// Texts that share starts, ends, lengths and all but one octet, asked in random order:
    /// the memo answers as the filter does, and keeps the last two texts.
    #[test]
    fn the_memo_answers_as_the_filter() {
        let parts: [&[u8]; 10] = [b"<sip:", b"10", b".", b"192", b"1", b"[", b"a@", b":5060", b";transport=UDP>", b"0"];
        let mut texts: Vec<Vec<u8>> =
            vec![Vec::new(), b"10.".to_vec(), vec![b'1'; KEPT_OCTETS], vec![b'1'; KEPT_OCTETS + 1]];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..400 {
            let mut t = Vec::new();
            for _ in 0..next() % 12 {
                t.extend_from_slice(parts[(next() % 10) as usize]);
            }
            texts.push(t.clone());
            // The same text with one octet changed, and cut one short.
            if !t.is_empty() {
                let at = (next() as usize) % t.len();
                let mut u = t.clone();
                u[at] = if u[at] == b'.' { b'1' } else { b'.' };
                texts.push(u);
                texts.push(t[..t.len() - 1].to_vec());
            }
        }
        for _ in 0..200_000 {
            let r = next();
            // Mostly one of a few recent texts, as a dialog's messages; sometimes any.
            let i = if r % 4 == 0 { (r >> 8) as usize % texts.len() } else { (r >> 8) as usize % 3 };
            let t = &texts[i];
            let want = may_name_private_address(t);
            assert_eq!(kept_or(t, may_name_private_address), want, "{}", String::from_utf8_lossy(t));
            if !t.is_empty() && t.len() <= KEPT_OCTETS {
                // Asked again right away: kept (a filter that answers wrong is not called).
                assert_eq!(kept_or(t, |_| !want), want, "{}", String::from_utf8_lossy(t));
            }
        }
    }

    /// Texts of every length up to a few words, equal but for one octet or one octet longer,
    /// are told apart (the last word's octets past the end are zero, never the next text's).
    #[test]
    fn texts_that_differ_in_one_octet_or_their_length_are_told_apart() {
        for len in 1..=KEPT_OCTETS {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            for at in 0..len {
                let mut other = base.clone();
                other[at] = b'.';
                assert_ne!(text_words(&base), text_words(&other), "{len} {at}");
                // A filter that tells the two texts apart answers for each.
                assert!(kept_or(&base, |t| t == &base[..]));
                assert!(!kept_or(&other, |t| t == &base[..]));
                assert!(kept_or(&base, |_| false), "kept");
            }
            let mut longer = base.clone();
            longer.push(0);
            if longer.len() <= KEPT_OCTETS {
                assert!(!kept_or(&longer, |t| t == &base[..]));
                assert!(kept_or(&base, |_| false), "kept");
            }
        }
    }
}
