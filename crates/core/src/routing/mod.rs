//! The routing table (issue 18; `[[route]]` in the configuration): where a request that has
//! no Route left goes (RFC 3261 §16.5 leaves target determination to the proxy's policy).
//! Rules in order, first match wins; a rule matches on the Request-URI user (exact, prefix,
//! regular expression) and host, the method, the source address and whether the caller
//! authenticated, rewrites the number (strip, prepend, `+`, tel: to sip:) and names an action:
//! the location service, a gateway set, a fixed next hop, a rejection, or the Request-URI.
//! The engine asks it in `engine/targets.rs`; requests no rule matches keep herald's default
//! routing (served domain → location service, else the Request-URI).
//!
//! Sans-IO like the rest of the core: the table is data, a lookup a pure function.

mod decide;
mod index;
mod number;
mod rule;
mod table;

pub use decide::{decide, host_port, rule_request_uri, Decision, Request};
pub use index::PrefixIndex;
pub use number::{match_user, rewrite, without_separators, NumberRules, Plus};
pub use rule::{Action, DomainMatch, Query, Rule, UserMatch};
pub use table::RoutingTable;

#[cfg(test)]
mod tests;
