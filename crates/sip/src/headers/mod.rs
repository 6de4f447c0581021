//! Typed header values. Every type borrows from the message buffer; parsing happens when a
//! value is asked for, never during [`crate::Message::parse`].

mod auth;
mod contact;
mod list;
mod media;
mod name_addr;
mod params;
mod simple;
mod typed;
mod via;

pub use auth::{AuthParamIter, AuthParams, AuthValue};
pub use contact::{parse_qvalue, Contact};
pub use list::{ListIter, ListValue};
pub use media::MediaType;
pub use name_addr::{tag_of, NameAddr};
pub use params::{unquote, ParamIter, Params};
pub use simple::{parse_call_id, parse_date, parse_delta_seconds, parse_max_forwards, parse_token, CSeq, RetryAfter};
pub use typed::{check_typed, parse_typed, Typed};
pub use via::{Via, MAGIC_COOKIE};

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
