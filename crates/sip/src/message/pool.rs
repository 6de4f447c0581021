//! The boxes of [`Parsed`], kept for the next message of the same thread: a proxy parses and
//! drops a message for every datagram, and each one's [`Parsed`] (its header lines, index and
//! memo, about 900 octets) was an allocation and a free of their own. Callgrind counted
//! mimalloc's allocation and free at about 100 instructions per message in `herald serve`
//! (six messages per proxied call); taking a box from this thread's list and putting it back
//! costs about a fifth of that.
//!
//! Bounded: a thread keeps at most [`KEPT`] boxes, and none whose line list grew onto the heap
//! (a message of more than 16 header lines), so an idle thread holds at most ~30 KB. A box
//! dropped on another thread than the one that made it goes to that thread's list (or is
//! freed when the list is full).

use super::index::HeaderIndex;
use super::line::HeaderField;
use super::via_split::ViaSplit;
use crate::checked::Checked;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// How many boxes a thread keeps: more than the messages a receiver has in flight at once
/// (a batch of datagrams, a transaction's copies).
const KEPT: usize = 32;

/// How many header lines a message holds without a second allocation: a proxied call's
/// messages carry 8 to 12 (RFC 3261 §8.1.1's six, Contact, Record-Route or Route, the
/// Content ones), a phone's up to about 15.
const INLINE_HEADERS: usize = 16;

/// What parsing and the receipt checks found, kept behind one pointer. Every message used to
/// allocate twice, its line list and (in [`Message::check`]) its memo; callgrind counted
/// about 100 instructions per allocation and free with mimalloc, six messages per proxied
/// call. Boxed, as the memo was: messages are moved around (inbound queue, engine,
/// transaction table) and this is most of their size.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(super) headers: SmallVec<[HeaderField; INLINE_HEADERS]>,
    /// Where the first line of each frequent header is, and the first repeated single one.
    pub(super) index: HeaderIndex,
    pub(super) vias: ViaSplit,
    /// Set by [`Message::check`]: the headers it validated, as ranges of `buf`.
    pub(super) checked: Option<Checked>,
}

impl Parsed {
    /// No lines, an empty index and Via split, no memo.
    pub(super) fn empty() -> Parsed {
        Parsed { headers: SmallVec::new(), index: HeaderIndex::default(), vias: ViaSplit::default(), checked: None }
    }

    /// Empties a kept one (module `pool`), as [`Parsed::empty`] makes it, field by field: the
    /// line list keeps its inline room, which a new value would copy whole.
    pub(super) fn empty_in_place(&mut self) {
        self.headers.clear();
        self.index = HeaderIndex::default();
        self.vias = ViaSplit::default();
        self.checked = None;
    }

    /// This box's contents made a copy of `other`'s (for [`Clone`] of a pooled box).
    pub(super) fn clone_from_parsed(&mut self, other: &Parsed) {
        self.headers.clone_from(&other.headers);
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
        if parsed.headers.spilled() {
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

impl fmt::Debug for PooledParsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Parsed::fmt(self, f)
    }
}
