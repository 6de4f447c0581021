//! Gateway sets (issue 18, Kamailio's dispatcher): named sets of destinations that calls are
//! spread over, with failover from one to the next and health kept per destination. The
//! runtime builds them from `[[gateway_set]]` (herald-server's `config::gateways`) into
//! `EngineConfig::gateways`, probes them with OPTIONS (the engine's ping API, `crate::ping`)
//! and exports their health; the engine plans a call's attempts (`Engine::plan_gateway_set`)
//! and fails over between them. The semantics, which docs/config.md repeats for operators:
//!
//! **Selection** ([`Algorithm`]): only destinations that are up take part; the algorithm orders
//! them, and a call tries them in that order, at most `failover.max_attempts`:
//! * `round_robin`: each call starts at the next up destination (configuration order).
//! * `weighted`: the first destination is drawn with probability weight / sum of weights; the
//!   next ones by the same rule among the rest. Deterministic: the draw is a hash of the set's
//!   call counter (the core has no randomness), so a run replays. Weight 0: last resort.
//! * `hash_call_id`, `hash_from_user`: rendezvous hashing (FNV-1a of the key and of the
//!   destination URI, mixed): the same Call-ID (From user) always gets the same destination
//!   while it is up, in every shard, process and restart; when one goes down, only its calls
//!   move, spread over the others. The hash is not keyed: a caller who picks its Call-IDs can
//!   pick its gateway, which the other algorithms do not allow.
//! * `priority`: lowest `priority` value first (as DNS SRV), configuration order among equal
//!   values: the first up destination takes every call, the others are its failover.
//! * `least_active`: fewest active calls first, round-robin among equals. Active calls of a
//!   destination: INVITE attempts sent there that have no final response yet, plus calls
//!   established through it (2xx) that this herald has not yet seen end (a BYE through its
//!   Record-Route, or 4 hours without one: `record_route = "never"` or a lost BYE).
//!   Non-INVITE requests are not counted.
//!
//! **Failover** ([`FailoverPolicy`]): an attempt answered with a failover status (default 408
//! and 503; configurable, e.g. 500, 502, 504), or not answered (Timer B/F, a transport error,
//! or `attempt_timeout`: an attempt that heard nothing at all - not even 100 Trying - within
//! it; it is abandoned without CANCEL, which RFC 3261 §9.1 forbids before a provisional, and an
//! INVITE is CANCELled if a provisional comes later) goes on to the next destination within the
//! same server transaction. Any other final response (2xx, 3xx, 486, 404, 6xx...) goes to the
//! caller as it is, and ends the call's attempts. The caller sees exactly one final answer:
//! when every attempt failed, the best of their responses by RFC 3261 §16.7 step 6, where a 503
//! becomes 500 (the 503 was the gateway's; passed on, it would make the caller's proxy fail over
//! from herald itself). When no destination is up, the caller gets 503 at once, with Retry-After
//! (`retry_after_s`), and nothing is sent.
//!
//! **Health** ([`Health`], [`HealthRules`]): up after start and after a reload for new
//! destinations (a kept one keeps its health: [`Gateways::new`] with the previous sets); down
//! after N failed probes in a row (a probe fails on timeout, transport error or a failover
//! status; any other final response, 404 and 405 included, is an answering SIP stack) or after
//! M failed call attempts in a row (M = 0: never by calls); up again after K good probes in a
//! row. A destination taken down by calls comes back only by probes, so a set with M > 0 needs
//! probing. Every change is counted, with its time; an operator may force a state
//! ([`Health::force`]).

mod health;
mod registry;
mod select;
mod set;

pub use health::{Health, HealthRules, HealthSnapshot, HealthState};
pub use registry::Gateways;
pub use select::{order, CallKeys};
pub use set::{Algorithm, Destination, FailoverPolicy, GatewayLeg, GatewaySet, ALL as ALGORITHMS};
