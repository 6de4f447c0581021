//! herald-sip: the SIP message layer of herald (RFC 3261 §7, §19, §20, §25; RFC 4475; RFC 5118).
//!
//! * [`Message::parse`] indexes one message in a single pass over a shared [`bytes::Bytes`]
//!   buffer; typed header values (module [`headers`]) are parsed on access and borrow from it.
//! * [`uri`] parses sip, sips, tel and opaque absolute URIs and compares them as RFC 3261
//!   §19.1.4 requires.
//! * [`framing`] cuts messages out of a stream (TCP, TLS) by Content-Length.
//! * [`Editor`] forwards a message with cheap edits, copying untouched bytes verbatim.
//! * [`Limits`] bounds everything; errors ([`ParseError`]) name the offset and header and map to
//!   the response a server owes the sender.
//!
//! What it owns, and what it must not import: the wire format only (bytes to typed messages
//! and back). It is the bottom of the workspace: it imports no other herald crate and knows
//! nothing of transactions, proxying, transports or configuration; it does no I/O (no sockets,
//! no clock, no threads, no randomness), so anything can depend on it.

mod checked;
pub mod editor;
pub mod error;
pub mod framing;
pub mod header_name;
pub mod headers;
pub mod limits;
pub mod message;
pub mod method;
#[cfg(target_arch = "x86_64")]
mod octet_masks;
pub mod peek;
pub mod response;
mod scan;
pub mod span;
pub mod start_line;
#[cfg(test)]
mod test_corpus;
pub mod text;
pub mod uri;
mod validate;

pub use editor::Editor;
pub use error::{ErrorKind, ParseError};
pub use header_name::HeaderName;
pub use limits::{Limit, Limits};
pub use message::{Framing, HeaderField, Message};
pub use method::Method;
pub use response::ResponseBuilder;
pub use span::Span;
pub use start_line::StartLine;
