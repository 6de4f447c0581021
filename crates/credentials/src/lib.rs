//! herald-credentials: the digest credentials of herald (RFC 7616, RFC 8760) and the file they
//! live in. Used by the authenticator (`herald_core::auth`), by `herald users` and by the bench
//! agent when it answers challenges.
//!
//! What it owns:
//! * [`Algorithm`]: the digest hashes (MD5, SHA-256, SHA-512/256) and [`UserHa1`], a user's
//!   H(user:realm:password) under each of them; [`to_hex`] / [`from_hex`], their wire form.
//! * [`request_digest`]: the `response=` value of an answer, computed the same way by the
//!   server that checks it and the client that sends it; [`Answer`]: the whole header value a
//!   client sends (the bench agent, simulated user agents, tests).
//! * [`Credentials`]: the in-memory table realm → user → HA1 (seed 002: a database round trip
//!   per request cost 3x; an in-memory table removed it), and the names it accepts.
//! * [`file`](mod@file): the users file (a `realm NAME` line, then `USER MD5 SHA-256 SHA-512-256` lines;
//!   one such section per realm), parsed with `FILE:LINE` errors, written atomically with mode
//!   0600. It never holds a password.
//! * [`SharedCredentials`] and [`FileWatcher`]: the table in use behind an `Arc` swapped
//!   atomically on reload; a file that fails to parse keeps the previous table.

#![forbid(unsafe_code)]

mod algorithm;
mod answer;
pub mod file;
mod file_change;
mod hex;
mod response;
mod shared;
mod table;
#[cfg(test)]
mod tests;

pub use algorithm::{Algorithm, UserHa1};
pub use answer::Answer;
pub use file::CredentialsError;
pub use hex::{from_hex, to_hex};
pub use response::{request_digest, Qop};
pub use shared::{FileWatcher, Reload, SharedCredentials};
pub use table::{invalid_realm, invalid_user_name, Credentials, MAX_REALM_LEN, MAX_USER_LEN};
