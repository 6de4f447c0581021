//! The boxes of [`Parsed`], kept for the next message of the same thread: a proxy parses and
//! drops a message for every datagram, and each one's [`Parsed`] (its index and memo, about
//! 500 octets, and its line list) was an allocation and a free of their own. Callgrind counted
//! mimalloc's allocation and free at about 100 instructions per message in `herald serve`
//! (six messages per proxied call); taking a box from this thread's list and putting it back
//! costs about a fifth of that.
//!
//! Bounded: a thread keeps at most [`KEPT`] boxes, and none whose line list grew past
//! [`KEPT_LINES`] lines, so an idle thread holds at most ~40 KB. A box dropped on another
//! thread than the one that made it goes to that thread's list (or is freed when the list is
//! full).

use super::index::HeaderIndex;
use super::line::HeaderField;
use super::memo::Memo;
use super::via_split::ViaSplit;
use std::cell::RefCell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// How many boxes a thread keeps: more than the messages a receiver has in flight at once
/// (a batch of datagrams, a transaction's copies).
const KEPT: usize = 32;

/// How many header lines a kept box's line list may hold: a proxied call's messages carry 8
/// to 12 (RFC 3261 §8.1.1's six, Contact, Record-Route or Route, the Content ones), a phone's
/// up to about 15. A box whose list grew past this (a message of more lines) is freed.
const KEPT_LINES: usize = 32;

/// How many lines a line list is first made for (see [`Parsed::lines`]).
pub(super) const FIRST_LINES: usize = 16;

/// What parsing and the receipt checks found, kept behind one pointer. Every message used to
/// allocate twice, its line list and (in [`Message::check`]) its memo; callgrind counted
/// about 100 instructions per allocation and free with mimalloc, six messages per proxied
/// call. Boxed, as the memo was: messages are moved around (inbound queue, engine,
/// transaction table) and this is most of their size.
#[derive(Clone)]
pub(crate) struct Parsed {
    /// The header lines are the first `count` of these. The ones past `count` are left from
    /// earlier messages of the box: the header scan writes each line into its place, with one
    /// test of the room left, where a push into a growing list tested its length, its spill
    /// and the header count limit apart and moved the line through the stack (module `head`).
    /// Never shorter than `count`.
    pub(super) lines: Vec<HeaderField>,
    pub(super) count: usize,
    /// Where the first line of each frequent header is, and the first repeated single one.
    pub(super) index: HeaderIndex,
    pub(super) vias: ViaSplit,
    /// Set by [`Message::check`]: the headers it validated, as ranges of `buf`.
    pub(super) checked: Memo,
}

impl Parsed {
    /// No lines, an empty index and Via split, no memo.
    pub(super) fn empty() -> Parsed {
        Parsed {
            lines: Vec::new(),
            count: 0,
            index: HeaderIndex::default(),
            vias: ViaSplit::default(),
            checked: Memo::default(),
        }
    }

    /// The header lines, in order.
    #[inline(always)]
    pub(super) fn headers(&self) -> &[HeaderField] {
        self.lines.get(..self.count).unwrap_or_default()
    }

    /// Empties a kept one (module `pool`), as [`Parsed::empty`] makes it, field by field: the
    /// line list keeps its lines (past `count`, unread) for the next scan to write over.
    pub(super) fn empty_in_place(&mut self) {
        self.count = 0;
        self.index = HeaderIndex::default();
        self.vias = ViaSplit::default();
        self.checked.clear();
    }

    /// This box's contents made a copy of `other`'s (for [`Clone`] of a pooled box).
    pub(super) fn clone_from_parsed(&mut self, other: &Parsed) {
        self.lines.clear();
        self.lines.extend_from_slice(other.headers());
        self.count = other.count;
        self.index = other.index;
        self.vias = other.vias;
        self.checked = other.checked;
    }
}

thread_local! {
    // The boxes themselves are what is kept (a `Vec<Parsed>` would copy each one in and out).
    #[allow(clippy::vec_box)]
    static KEPT_BOXES: RefCell<Vec<Box<Parsed>>> = const { RefCell::new(Vec::new()) };
}

/// A [`Parsed`] in a box that goes back to its thread's list when dropped.
pub(crate) struct PooledParsed(ManuallyDrop<Box<Parsed>>);

impl PooledParsed {
    /// An empty [`Parsed`] (no lines, an empty index and Via split, no memo): a kept box
    /// emptied, or a new one.
    #[inline]
    pub(super) fn empty() -> PooledParsed {
        let kept = KEPT_BOXES.try_with(|boxes| boxes.borrow_mut().pop()).ok().flatten();
        PooledParsed(ManuallyDrop::new(match kept {
            Some(mut parsed) => {
                parsed.empty_in_place();
                parsed
            }
            None => Box::new(Parsed::empty()),
        }))
    }
}

impl Drop for PooledParsed {
    fn drop(&mut self) {
        // SAFETY: the box is taken out once, here, and `self` is not used afterwards.
        let parsed = unsafe { ManuallyDrop::take(&mut self.0) };
        if parsed.lines.len() > KEPT_LINES {
            return;
        }
        // A thread being torn down has no list any more: the box is then freed with the closure.
        let _ = KEPT_BOXES.try_with(move |boxes| {
            let mut boxes = boxes.borrow_mut();
            if boxes.len() < KEPT {
                boxes.push(parsed);
            }
        });
    }
}

impl Deref for PooledParsed {
    type Target = Parsed;

    #[inline(always)]
    fn deref(&self) -> &Parsed {
        &self.0
    }
}

impl DerefMut for PooledParsed {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Parsed {
        &mut self.0
    }
}

impl Clone for PooledParsed {
    fn clone(&self) -> PooledParsed {
        let mut copy = PooledParsed::empty();
        copy.0.clone_from_parsed(self);
        copy
    }
}

impl fmt::Debug for Parsed {
    /// The lines of the message (not those left past them from earlier ones).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parsed")
            .field("headers", &self.headers())
            .field("index", &self.index)
            .field("vias", &self.vias)
            .field("checked", &self.checked.get())
            .finish()
    }
}

impl fmt::Debug for PooledParsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Parsed::fmt(self, f)
    }
}
