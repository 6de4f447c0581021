//! The RFC 3261 §17 transaction layer with the RFC 6026 corrections, sans-IO.
//!
//! Four state machines, one per transaction kind:
//!
//! | machine | RFC | states |
//! | --- | --- | --- |
//! | [`ClientInvite`] | §17.1.1, RFC 6026 §8.4 | Calling → Proceeding → Completed / Accepted → Terminated |
//! | [`ClientNonInvite`] | §17.1.2 | Trying → Proceeding → Completed → Terminated |
//! | [`ServerInvite`] | §17.2.1, RFC 6026 §8.5-8.7 | Proceeding → Completed → Confirmed / Accepted → Terminated |
//! | [`ServerNonInvite`] | §17.2.2 | Trying → Proceeding → Completed → Terminated |
//!
//! Nothing here reads a clock or touches a socket. Every entry point takes the current time as
//! an [`Instant`](std::time::Instant) and returns [`Actions`]: bytes to send to the transaction's peer
//! ([`TxAction::Send`]) and events for the transaction user ([`TxAction::ToTu`]). A machine
//! reports its earliest timer with `next_deadline()`; the caller calls `on_timer` when that
//! instant has come. [`TransactionTable`] does this bookkeeping for one worker shard: it matches
//! messages to transactions (§17.1.3, §17.2.3), keeps one queue of deadlines with lazy deletion and
//! drops a transaction as soon as it terminates.
//!
//! Retransmissions (Timers A, E, G) exist only over unreliable transports; over reliable ones
//! the absorbing timers D, I, J and K are zero, so the machine terminates at once (RFC 3261
//! §17.1.1.2, §17.1.2.2, §17.2.1, §17.2.2).
//!
//! The TU is told [`TuEvent::Terminated`] exactly once, as the last event of a transaction.

mod ack;
mod actions;
mod any;
mod client_invite;
mod client_non_invite;
mod client_request;
mod deadline_lanes;
mod grid_memo;
mod key;
mod server_invite;
mod server_non_invite;
mod slab;
mod stateless_branch;
mod table;
mod timers;

#[cfg(test)]
mod tests_client;
#[cfg(test)]
mod tests_into;
#[cfg(test)]
mod tests_robust;
#[cfg(test)]
mod tests_server;
#[cfg(test)]
mod tests_support;
#[cfg(test)]
mod tests_table;

pub use ack::{build_ack, build_trying};
pub use actions::{Actions, ActionsIter, TuEvent, TxAction, TxState};
pub use any::Transaction;
pub use client_invite::ClientInvite;
pub use client_non_invite::ClientNonInvite;
pub use client_request::AckSource;
pub use key::{BranchGen, ClientKey, LegacyKey, MethodKey, ServerKey};
pub use server_invite::ServerInvite;
pub use server_non_invite::ServerNonInvite;
pub use stateless_branch::{branch_string, stateless_branch, stateless_branch_text, STATELESS_BRANCH_LEN};
pub use table::{HashedServerKey, TransactionTable, TxError, TxId};
pub use timers::{AbsorbGrid, TimerKind, TimerTable, Timers};
