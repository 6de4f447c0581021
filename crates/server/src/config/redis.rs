//! `[location.redis]`: the shared location on Redis for several herald nodes (`[location] mode =
//! "redis"`; the mechanism is `herald_persist::redis`).

use herald_core::auth::PeerPrefix;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;

/// `[location.redis]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Redis {
    /// The Redis server: `redis://[USER:PASSWORD@]HOST:PORT[/DB]` (or `redis+unix:///PATH`).
    pub url: String,
    /// This node's name, unique among the nodes sharing the Redis (letters, digits, `.`, `_`,
    /// `-`; at most 64). Required in redis mode.
    pub node: String,
    /// The address (UDP) the other nodes send this node's phones' requests to: it goes into
    /// the Path stored with every binding registered here. Unset: the first UDP listener, which
    /// must then be a specific address (not `0.0.0.0` or `::`).
    pub advertise: Option<SocketAddr>,
    /// The other nodes' addresses or prefixes (`"10.0.0.2"`, `"10.0.0.0/24"`). Their requests
    /// were policed at the node they entered, so they pass the auth gate without a challenge
    /// and are exempt from `[flood]` limits: a request for a phone held here comes from them.
    /// Put the nodes on a network that outsiders cannot send from (UDP sources can be forged).
    pub nodes: Vec<String>,
    /// Prefix of every key (`PREFIXloc:AOR`), which is also what each node asks Redis to
    /// report changes of: several clusters can share one Redis.
    pub key_prefix: String,
    /// Most addresses-of-record whose changes wait to be written while Redis is slow or down;
    /// beyond it the next resync writes the whole local store instead.
    pub max_queued: usize,
    /// Connection and command timeout, in milliseconds: a Redis that stops answering for this
    /// long counts as down.
    pub timeout_ms: u64,
    /// Longest wait between two connection attempts, in milliseconds (the wait doubles from
    /// 100 ms up to it).
    pub reconnect_max_ms: u64,
}

impl Default for Redis {
    fn default() -> Self {
        Redis {
            url: "redis://127.0.0.1:6379/".into(),
            node: String::new(),
            advertise: None,
            nodes: Vec::new(),
            key_prefix: "herald:".into(),
            max_queued: 100_000,
            timeout_ms: 1000,
            reconnect_max_ms: 5000,
        }
    }
}

impl Redis {
    /// Ranges and forms, checked when the mode is `"redis"`. `Err((key, message))`.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.url.starts_with("redis://") || self.url.starts_with("redis+unix://")) {
            return Err(("url", format!("'{}' is not a redis:// or redis+unix:// URL", self.url)));
        }
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if self.node.is_empty() || self.node.len() > 64 || !self.node.chars().all(name_ok) {
            return Err((
                "node",
                format!(
                    "'{}': name this node (1 to 64 letters, digits, '.', '_', '-'), unique in the cluster",
                    self.node
                ),
            ));
        }
        if let Some(a) = self.advertise.filter(|a| a.ip().is_unspecified() || a.port() == 0) {
            return Err(("advertise", format!("{a}: other nodes need a specific address and port")));
        }
        if let Some(e) = self.nodes.iter().find_map(|p| PeerPrefix::parse(p).err()) {
            return Err(("nodes", e));
        }
        if self.key_prefix.len() > 64 {
            return Err(("key_prefix", "must be at most 64 bytes".into()));
        }
        if !(1..=100_000_000).contains(&self.max_queued) {
            return Err(("max_queued", "must be between 1 and 100000000".into()));
        }
        if !(10..=60_000).contains(&self.timeout_ms) {
            return Err(("timeout_ms", "must be between 10 and 60000".into()));
        }
        if !(100..=600_000).contains(&self.reconnect_max_ms) {
            return Err(("reconnect_max_ms", "must be between 100 and 600000".into()));
        }
        Ok(())
    }

    /// The other nodes, as the auth gate and the flood guard trust them.
    pub fn node_prefixes(&self) -> Vec<PeerPrefix> {
        self.nodes.iter().filter_map(|p| PeerPrefix::parse(p).ok()).collect()
    }

    /// The address other nodes reach this one at: `advertise`, else the first UDP listener
    /// with a specific address (`bound`: the listeners with their ports resolved).
    pub fn advertised(&self, bound_udp: impl IntoIterator<Item = SocketAddr>) -> Result<SocketAddr, String> {
        if let Some(a) = self.advertise {
            return Ok(a);
        }
        bound_udp.into_iter().find(|a| !a.ip().is_unspecified()).ok_or_else(|| {
            "[location.redis] advertise: no UDP listener on a specific address; set the address other nodes reach \
             this one at"
                .to_owned()
        })
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn reconnect_max(&self) -> Duration {
        Duration::from_millis(self.reconnect_max_ms)
    }
}

#[cfg(test)]
#[path = "redis_tests.rs"]
mod tests;
