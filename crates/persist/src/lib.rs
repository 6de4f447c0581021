//! herald-persist: durable copies of the location store (issue 19: registrations survive a
//! restart), like Kamailio usrloc's `db_mode`.
//!
//! What it owns: keeping a copy of [`herald_core::Location`] outside the process and reading it
//! back. The store tells a [`herald_store::Journal`] of every change (under the changed AoR's
//! lock); here that journal is a [`ChangeQueue`], the set of AoRs changed since the last write,
//! and a backend's writer reads their current bindings from the store and writes them:
//!
//! * [`sqlite`]: one embedded SQLite database in WAL mode, written by one thread. In
//!   write-back mode the queue is written every interval; in write-through mode at once, with
//!   group commit, and the REGISTER's 200 waits for its ticket ([`ChangeQueue::durable`]).
//!
//! * [`redis`]: the shared location of several nodes (`[location] mode = "redis"`): every
//!   node keeps its whole store as the hot path and shares its changes through Redis, one key
//!   per AoR and a change channel; a phone held by another node is reached through that node.
//!   It has its own queue ([`redis::Pending`]): it keeps each binding's connection (the flow
//!   token written for other nodes names it) and wakes an async task.
//!
//! Start-up reads the copy back in the background with `LocationStore::restore`, and a lookup
//! of a user not yet loaded reads that user ([`herald_store::Backfill`]): herald serves at once.
//!
//! What it must not do: decide anything about SIP (the registrar did), or block a worker
//! except for the point reads of users not yet loaded during the start-up load.

#![forbid(unsafe_code)]

mod mode;
mod queue;
pub mod redis;
pub mod sqlite;
mod stats;

pub use mode::Mode;
pub use queue::{AorChange, Batch, ChangeQueue};
pub use stats::PersistStats;
