//! herald-store: the location service of herald (RFC 3261 §10.3), in memory.
//!
//! What it owns: the bindings of addresses-of-record and their expiry, nothing else. What it
//! must not import: only `herald-sip` (URIs) of herald's crates, never `herald-core` or the
//! runtime; it does no I/O (no sockets, no clock, no threads): callers pass the time and share
//! the store between their threads.
//!
//! * [`LocationStore`] maps an address-of-record ([`Aor`]) to its [`Binding`]s. It is shared by
//!   every worker thread, so it is split into a fixed power-of-two number of shards, each behind
//!   its own `RwLock` and chosen by the key's hash: registrations of unrelated users never wait
//!   on each other, and lookups of one shard proceed in parallel.
//! * Every shard's table grows by itself; there is no size for an operator to get wrong (a
//!   statically sized location table cost 4x in seed 002).
//! * Expiry is incremental: each shard keeps a min-heap of due times, and
//!   [`LocationStore::expire`] removes at most a given number of bindings per call, visiting
//!   shards round-robin. Nothing ever scans the whole store (seed 002: a 60-second sweep caused
//!   CPU spikes and failed calls). Lookups ignore expired bindings that were not yet removed.
//!   The store knows its earliest due time ([`LocationStore::next_expiry`]), so a caller calls
//!   `expire` when something is due, not on a period, and an alarm
//!   ([`LocationStore::set_expiry_alarm`]) tells it when a change brought that time earlier.
//! * Time is a parameter (`now: Instant`); the store never reads a clock.
//! * Durable copies (SQLite, Redis: `herald-persist`) follow the store through its [`Journal`],
//!   told of every change under the changed AoR's lock; they load back with
//!   [`LocationStore::restore`] / [`LocationStore::replace`], and [`LocationStore::scan`] visits
//!   every AoR a page at a time without stalling the workers.
//!
//! The users of digest authentication are not here: they are `herald-credentials`.

#![forbid(unsafe_code)]

mod aor;
mod binding;
mod journal;
mod ordered;
mod plan;
mod scan_cursor;
mod store;

pub use aor::{Aor, AorKey};
pub use binding::{Binding, ContactUpdate, StoreError, Update};
pub use journal::{AorBindings, Applied, Backfill, Journal, Removed, Ticket};
pub use ordered::OrderedBindings;
pub use scan_cursor::ScanCursor;
pub use store::{BindingAlarm, ExpiryAlarm, LocationStore, StoreConfig};

#[cfg(test)]
mod durable_tests;
#[cfg(test)]
mod tests;
