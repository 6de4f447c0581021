//! `herald serve` configuration: one serde struct, every field defaulted and documented.
//!
//! The reference for operators is `docs/config.md`; `herald.example.toml` at the repository root
//! lists every key with its default. Loading ([`Config::load`], [`Config::from_toml`]) reports
//! every error as `FILE:LINE: key 'a.b.c': message`.

mod admin;
mod auth;
mod engine;
mod error;
mod gateways;
mod load;
mod location;
mod nat;
#[cfg(test)]
mod nat_tests;
mod protect;
mod realms;
mod redis;
mod reload;
mod routing;
mod schema;
mod tls;
mod websocket;

pub use admin::{Admin, AdminKey, AdminToken};
pub use auth::{Auth, DigestAlgorithm, IdentityMode};
pub use error::ConfigError;
/// `[[gateway_set]]` as the engine takes it, keeping the health of a previous configuration's
/// destinations (a reload).
pub use gateways::to_core as gateway_sets;
pub use gateways::{
    Algorithm as GatewayAlgorithm, Destination as GatewayDestination, Failover as GatewayFailover, GatewaySet,
    Health as GatewayHealth, Probing as GatewayProbing,
};
pub use location::{Location, LocationMode};
pub use nat::{Detect as NatDetect, EdgePath, Keepalive, Nat};
pub use protect::{Flood, FloodSettings, Overload, OverloadSettings};
pub use redis::Redis;
pub use routing::Route;
pub use schema::{
    default_listen, ipv6_available, Config, Forking, Limits, Listen, ListenTransport, Log, Metrics, Proxy, RecordRoute,
    Registrar, Server, Timers, DEFAULT_CONFIG,
};
pub use tls::{ClientVerify, Tls, SYSTEM_CA_BUNDLE};
pub use websocket::WebSocket;

/// Every IP address of this machine's interfaces (getifaddrs), loopback included.
pub use herald_sys::interface_addresses;

#[cfg(test)]
mod location_tests;
#[cfg(test)]
mod tests;
