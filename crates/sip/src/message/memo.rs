//! The place of a message's receipt-check memo ([`Checked`]), kept in its pooled box: the
//! fields and whether they hold this message's check.
//!
//! The check writes each field into this place as it reads it, and says the memo holds only
//! when every read passed (`Memo::confirm`). Built as one value and stored at the end, the
//! memo's parts stayed in the stack frame across the value reads' calls and were copied in at
//! the end: callgrind counted about 70 instructions per message for that store, 272 octets of
//! fields loaded back from the stack and written again. Fields left from an earlier message of
//! the box, or from a check that failed half-way, are never read: [`Memo::get`] hands out
//! nothing until `confirm`.

use crate::checked::Checked;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Memo {
    checked: Checked,
    /// Whether `checked` is this message's, written whole by a check that passed.
    valid: bool,
}

impl Memo {
    /// The memo, once a check has passed.
    #[inline(always)]
    pub fn get(&self) -> Option<&Checked> {
        match self.valid {
            true => Some(&self.checked),
            false => None,
        }
    }

    /// The memo, whole.
    pub fn set(&mut self, checked: Checked) {
        self.checked = checked;
        self.valid = true;
    }

    /// No memo (the fields stay, unread).
    #[inline(always)]
    pub fn clear(&mut self) {
        self.valid = false;
    }

    /// The fields to write in place, with the memo unset until [`Memo::confirm`]: a check that
    /// fails half-way leaves no memo.
    #[inline(always)]
    pub fn fields(&mut self) -> &mut Checked {
        self.valid = false;
        &mut self.checked
    }

    /// Every field of [`Memo::fields`] is written, by a check that passed.
    #[inline(always)]
    pub fn confirm(&mut self) {
        self.valid = true;
    }
}
