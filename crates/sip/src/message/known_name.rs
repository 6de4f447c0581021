//! The names of nearly every header line, recognised with their colon and the SP after it
//! (`Via: `, `Content-Length: `) from the line's first 16 octets, before any search: one hash
//! of the first four octets picks the one candidate, and one masked compare of the 16 octets
//! decides (SSE2 on x86-64: one OR, AND and compare of a vector where two words took two of
//! each and two branches, callgrind ~6 instructions a line less; two words elsewhere).
//!
//! The scan's usual path searched for the colon first (a vector step), then sorted the name by
//! its length and compared it as words (callgrind: about 45 instructions a line for the two,
//! with the SP test after the colon); this is about 25. Every other line (a compact form, an
//! unknown or longer name, white space before the colon, fewer than 16 octets left in the
//! buffer) goes the search's way, which gives the same result for these lines.

use crate::header_name::HeaderName;

/// The names recognised here with their form as written (RFC 3261 §7.3.1: `name ": " value`,
/// any case), most frequent first: of names sharing their first four octets (`Content-Length`,
/// `Contact`, `Content-Type`), the first takes the hashed slot and the others follow it.
const NAMES: [(&str, HeaderName); 16] = [
    ("Via", HeaderName::Via),
    ("From", HeaderName::From),
    ("To", HeaderName::To),
    ("Call-ID", HeaderName::CallId),
    ("CSeq", HeaderName::CSeq),
    ("Content-Length", HeaderName::ContentLength),
    ("Contact", HeaderName::Contact),
    ("Max-Forwards", HeaderName::MaxForwards),
    ("Record-Route", HeaderName::RecordRoute),
    ("Route", HeaderName::Route),
    ("Content-Type", HeaderName::ContentType),
    ("Expires", HeaderName::Expires),
    ("Allow", HeaderName::Allow),
    ("Supported", HeaderName::Supported),
    ("User-Agent", HeaderName::UserAgent),
    ("Authorization", HeaderName::Authorization),
];

/// The hash's multiplier: found by search so that the 14 different first words of [`NAMES`]
/// (lower-cased) fall on 14 different slots of 32 (the table's build asserts it).
const MULTIPLIER: u32 = 0xe8e2_5d95;
const SLOTS: usize = 32;
/// `next` of the last entry of a chain.
const END: u8 = u8::MAX;

/// One name as its first 16 octets hold it: `name ": "` lower-cased in `lower` (two
/// little-endian words), bit 0x20 at each letter in `letters`, 0xff at each of its octets in
/// `care`. `(octets | letters) & care == lower` then holds exactly when the octets start with
/// the name in any case, its colon and a SP: OR-ing 0x20 maps only 'A'..'Z' onto 'a'..'z' among
/// the octets that can equal a letter, and the colon, SP and `-` compare as they are.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Entry {
    lower: [u64; 2],
    letters: [u64; 2],
    care: [u64; 2],
    name: HeaderName,
    /// The colon's place: the name's length.
    colon: u8,
    /// The slot of the next name with the same first four octets, or [`END`].
    next: u8,
}

impl Entry {
    const fn of(text: &str, name: HeaderName) -> Entry {
        let b = text.as_bytes();
        let n = b.len();
        assert!(n >= 2 && n + 2 <= 16, "a name and \": \" fill at most 16 octets");
        let mut e = Entry { lower: [0; 2], letters: [0; 2], care: [0; 2], name, colon: n as u8, next: END };
        let mut i = 0;
        while i < n + 2 {
            let c = if i < n {
                b[i].to_ascii_lowercase()
            } else if i == n {
                b':'
            } else {
                b' '
            };
            let (word, shift) = (i / 8, 8 * (i % 8));
            e.lower[word] |= (c as u64) << shift;
            e.care[word] |= 0xff << shift;
            if c.is_ascii_alphabetic() {
                e.letters[word] |= 0x20 << shift;
            }
            i += 1;
        }
        e
    }

    #[inline(always)]
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn matches(&self, a: u64, b: u64) -> bool {
        (a | self.letters[0]) & self.care[0] == self.lower[0] && (b | self.letters[1]) & self.care[1] == self.lower[1]
    }

    /// [`Entry::matches`] of the 16 octets `v` as one vector: an OR, an AND and a compare of
    /// all 16 octets, where the two words took two of each and two branches.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matches_vector(&self, v: std::arch::x86_64::__m128i) -> bool {
        use std::arch::x86_64::{_mm_and_si128, _mm_cmpeq_epi8, _mm_load_si128, _mm_movemask_epi8, _mm_or_si128};
        // SAFETY: SSE2 is part of the x86-64 baseline; each pair of words is 16 octets at a
        // 16-octet aligned place (`Entry` is `align(16)` and they are its first fields).
        unsafe {
            let letters = _mm_load_si128(self.letters.as_ptr().cast());
            let care = _mm_load_si128(self.care.as_ptr().cast());
            let lower = _mm_load_si128(self.lower.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(_mm_or_si128(v, letters), care), lower)) == 0xffff
        }
    }
}

/// The slot of a line whose first four octets are `first` (little-endian).
#[inline(always)]
const fn slot(first: u32) -> usize {
    ((first | 0x2020_2020).wrapping_mul(MULTIPLIER) >> (32 - SLOTS.trailing_zeros())) as usize
}

/// [`NAMES`] by the slot of their first four octets; a name whose slot is taken is chained
/// behind the slot's name in a free one. Every other free slot holds a copy of the first name,
/// without a chain: every entry is a real name, so any entry that matches is right, and the
/// hash decides only how soon one is tried.
static TABLE: [Entry; SLOTS] = {
    let mut table = [Entry::of(NAMES[0].0, NAMES[0].1); SLOTS];
    let mut used = [false; SLOTS];
    // Two passes: every name to its own slot first, then the names whose slot is taken (same
    // first four octets) into the free ones, so that none takes a later name's slot.
    let mut chained = [false; NAMES.len()];
    let mut distinct = 0;
    let mut i = 0;
    while i < NAMES.len() {
        let e = Entry::of(NAMES[i].0, NAMES[i].1);
        let home = slot(e.lower[0] as u32);
        if used[home] {
            // Same first four octets as the name at `home` (a different first word there is a
            // collision of the hash, which the multiplier was chosen not to have).
            assert!(table[home].lower[0] as u32 == e.lower[0] as u32, "the hash must not collide");
            chained[i] = true;
        } else {
            table[home] = e;
            used[home] = true;
            distinct += 1;
        }
        i += 1;
    }
    assert!(distinct == 14);
    let mut i = 0;
    while i < NAMES.len() {
        if chained[i] {
            let e = Entry::of(NAMES[i].0, NAMES[i].1);
            let mut free = 0;
            while used[free] {
                free += 1;
            }
            let mut last = slot(e.lower[0] as u32);
            while table[last].next != END {
                last = table[last].next as usize;
            }
            table[last].next = free as u8;
            table[free] = e;
            used[free] = true;
        }
        i += 1;
    }
    table
};

/// The name of the header line at `pos` of `s` and the place of its colon, when the line
/// starts with one of [`NAMES`] (any case), its colon and a SP, and `s` has 16 octets from
/// `pos` on. `None` says nothing about the line: the colon search decides it.
#[inline(always)]
pub(crate) fn known_name(s: &[u8], pos: usize) -> Option<(HeaderName, usize)> {
    let head: &[u8; 16] = s.get(pos..pos.checked_add(16)?)?.try_into().ok()?;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline, and `head` holds the 16 octets the
    // unaligned load reads.
    let v = unsafe { std::arch::x86_64::_mm_loadu_si128(head.as_ptr().cast()) };
    let first = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let mut e = &TABLE[slot(first)];
    loop {
        #[cfg(target_arch = "x86_64")]
        let found = e.matches_vector(v);
        #[cfg(not(target_arch = "x86_64"))]
        let found = e.matches(u64::from_le_bytes(head_word(head, 0)), u64::from_le_bytes(head_word(head, 8)));
        if found {
            return Some((e.name, pos + e.colon as usize));
        }
        if e.next == END {
            return None;
        }
        e = &TABLE[e.next as usize];
    }
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn head_word(head: &[u8; 16], at: usize) -> [u8; 8] {
    let mut w = [0; 8];
    w.copy_from_slice(&head[at..at + 8]);
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the colon search's path makes of the line at 0: the name before the first colon,
    /// when a SP follows the colon and the name is a token ([`HeaderName::from_bytes`]).
    fn by_search(s: &[u8]) -> Option<(HeaderName, usize)> {
        let colon = s.iter().position(|&b| b == b':')?;
        let name = &s[..colon];
        let token = !name.is_empty() && crate::scan::token_end(s, 0) == colon;
        (token && s.get(colon + 1) == Some(&b' ')).then(|| (HeaderName::from_bytes(name), colon))
    }

    /// Every known name (and the others'), in every case pattern the strategy draws, with
    /// what may follow it: where the table recognises a line, the search gives the same name
    /// and colon; and it recognises every name of [`NAMES`] written `name ": "` with 16 octets.
    #[test]
    fn recognises_what_the_search_finds() {
        let every: Vec<&str> = HeaderName::ALL.iter().filter_map(|n| n.canonical()).collect();
        let names = proptest::sample::select(every);
        let after = proptest::sample::select(vec![": ", ":", " : ", ":\t", ": \r\n", "", "-x: ", "x: ", ": v"]);
        proptest!(|(name in names, cases in any::<u32>(), sep in after, tail in "[ -~]{0,16}", drop in 0usize..4)| {
            let mixed: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| if cases >> (i % 32) & 1 == 1 { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
                .collect();
            let line = format!("{mixed}{sep}{tail}");
            let line = &line.as_bytes()[..line.len() - drop.min(line.len())];
            let got = known_name(line, 0);
            if let Some(found) = got {
                prop_assert_eq!(Some(found), by_search(line), "{:?}", String::from_utf8_lossy(line));
            }
            let listed = NAMES.iter().any(|(n, _)| *n == name);
            if listed && sep == ": " && line.len() >= 16 && line.len() >= name.len() + 2 {
                prop_assert!(got.is_some(), "{:?}", String::from_utf8_lossy(line));
            }
        });
    }

    /// Every octet at every one of the 16 places, over each name of [`NAMES`] as written:
    /// the table still answers only what the search answers.
    #[test]
    fn one_octet_changed_anywhere() {
        for (text, _) in NAMES {
            let line = format!("{text}: {}", "v".repeat(16));
            for at in 0..16 {
                for octet in 0..=255u8 {
                    let mut s = line.as_bytes().to_vec();
                    s[at] = octet;
                    if let Some(found) = known_name(&s, 0) {
                        assert_eq!(Some(found), by_search(&s), "{:?}", String::from_utf8_lossy(&s));
                    }
                    // The vector compare and the two words agree, entry by entry.
                    #[cfg(target_arch = "x86_64")]
                    for e in &TABLE {
                        let head: &[u8; 16] = s[..16].try_into().expect("16 octets");
                        let words = (u64::from_le_bytes(head_word(head, 0)), u64::from_le_bytes(head_word(head, 8)));
                        // SAFETY: SSE2 is part of the x86-64 baseline; `s` has 16 octets or more.
                        let v = unsafe { std::arch::x86_64::_mm_loadu_si128(s.as_ptr().cast()) };
                        assert_eq!(e.matches_vector(v), e.matches(words.0, words.1));
                    }
                }
            }
            assert!(known_name(line.as_bytes(), 0).is_some(), "{text}");
            // Fewer than 16 octets: left to the search.
            assert_eq!(known_name(&line.as_bytes()[..15], 0), None);
        }
    }
}
