//! The error every header-value grammar of this module returns.

/// A grammar violation inside one header value: the offset is relative to the value's start;
/// [`crate::Message`] accessors turn it into a [`crate::ParseError`] with the absolute offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueError {
    pub at: usize,
    pub what: &'static str,
}

impl ValueError {
    pub const fn at(at: usize, what: &'static str) -> ValueError {
        ValueError { at, what }
    }

    /// Shifts the offset by `by` (for a value that is a part of a larger one).
    pub fn shifted(self, by: usize) -> ValueError {
        ValueError { at: self.at + by, what: self.what }
    }
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at value offset {})", self.what, self.at)
    }
}
