//! What the Redis mode is told by the configuration (`[location.redis]` in the server).

use std::net::SocketAddr;
use std::time::Duration;

/// What the Redis mode needs (`[location.redis]`, see the server's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
    /// This node's name, unique among the nodes sharing the Redis.
    pub node: String,
    /// The SIP address (UDP) other nodes reach this node at.
    pub advertise: SocketAddr,
    /// Prefix of every key (several clusters may share one Redis).
    pub key_prefix: String,
    /// Most AoRs whose changes wait to be written.
    pub max_queued: usize,
    /// Connection and command timeout.
    pub timeout: Duration,
    /// Longest wait between two connection attempts.
    pub reconnect_max: Duration,
}
