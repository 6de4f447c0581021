//! URI parsing for SIP: sip/sips (RFC 3261 §19.1, §25.1), tel (RFC 3966), and any
//! other absolute URI (RFC 3261 §25.1 `absoluteURI`, RFC 3986 §3.1 scheme syntax).
//!
//! Design constraints:
//! * zero-copy: every parsed value borrows from the input; parsing never allocates
//!   (comparison and unescaping may, and return `Cow`);
//! * total: no input can make the parser panic — the lints below forbid indexing,
//!   slicing and unwrapping, and a fuzz-style test exercises malformed input;
//! * strict where RFC 4475 (SIP torture tests) and RFC 5118 (IPv6 torture tests)
//!   demand rejection, tolerant where they demand tolerance.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod any;
mod compare;
mod error;
mod escape;
mod host;
mod host_run;
mod plain;
mod plain_tail;
mod request_form;
mod sip;
mod tel;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fuzz;
#[cfg(test)]
mod tests_host;
#[cfg(test)]
mod tests_plain;
#[cfg(test)]
mod tests_plain_tail;
#[cfg(test)]
mod tests_reference;
#[cfg(test)]
mod tests_tel;

pub use any::{AbsoluteUri, Uri};
pub use error::{UriError, MAX_URI_LEN};
pub use escape::percent_decode;
pub(crate) use host::ipv4_prefix;
pub use host::{parse_host_port, Host};
pub(crate) use plain::PlainSip;
pub use sip::{Headers, Params, Scheme, SipUri};
pub use tel::TelUri;
