//! Typed header values. Every type borrows from the message buffer; parsing happens when a
//! value is asked for, never during [`crate::Message::parse`].

mod auth;
mod contact;
mod error;
mod lex;
mod list;
mod media;
mod name_addr;
mod params;
mod sent_by_memo;
mod simple;
mod typed;
mod via;

pub use auth::{AuthParamIter, AuthParams, AuthValue};
pub use contact::{parse_qvalue, Contact};
pub use error::ValueError;
pub use list::{ListIter, ListValue};
pub use media::MediaType;
pub use name_addr::{tag_of, NameAddr};
pub use params::{unquote, ParamIter, Params};
pub use simple::{parse_call_id, parse_date, parse_delta_seconds, parse_max_forwards, parse_token, CSeq, RetryAfter};
pub use typed::{check_typed, parse_typed, Typed};
pub use via::{is_rfc3261_branch, Via, MAGIC_COOKIE};
pub(crate) use via::{PlainVia, ViaParams};
