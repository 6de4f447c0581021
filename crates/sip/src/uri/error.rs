//! Why a URI was rejected, and the bound on its length: used by every grammar of this module.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;

/// Hard upper bound on URI length, against resource abuse. RFC 3261 sets no limit;
/// 8 KiB is far beyond any legitimate URI.
pub const MAX_URI_LEN: usize = 8192;

/// Why a URI was rejected, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UriError {
    /// Byte offset inside the URI input.
    pub offset: usize,
    /// Short, e.g. "bad host", "bad port", "invalid character in user part".
    pub reason: &'static str,
}

impl UriError {
    pub(crate) const fn new(offset: usize, reason: &'static str) -> UriError {
        UriError { offset, reason }
    }

    /// Re-bases an error found in a sub-slice that starts at `by`.
    pub(crate) fn shift(self, by: usize) -> UriError {
        UriError { offset: self.offset.saturating_add(by), reason: self.reason }
    }
}

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for UriError {}
