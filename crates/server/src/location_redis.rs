//! `[location] mode = "redis"` in the running server: the shared location of several nodes
//! (`herald_persist::redis`), started before serving, its metrics on the endpoint.

use crate::config::{Config, LocationMode};
use crate::server::Server;
use herald_core::registrar::Location;
use herald_core::{Seed, Transport};
use herald_persist::redis::{RedisLocation, RedisSettings};
use std::sync::Arc;
use std::time::Duration;

/// Makes `store` share its changes through Redis and take the other nodes' (the Redis task
/// connects and loads in the background: herald serves at once). `seed` is the engines': the
/// flow tokens written for this node's phones are read back by them. `None` in another mode.
pub fn start(
    config: &Config,
    server: &Server,
    store: &Arc<Location>,
    seed: Seed,
) -> Result<Option<RedisLocation>, String> {
    if config.location.mode != LocationMode::Redis {
        return Ok(None);
    }
    let r = &config.location.redis;
    let udp = server.local_addrs().iter().filter(|b| b.transport == Transport::Udp).map(|b| b.addr);
    let settings = RedisSettings {
        url: r.url.clone(),
        node: r.node.clone(),
        advertise: r.advertised(udp)?,
        key_prefix: r.key_prefix.clone(),
        max_queued: r.max_queued,
        timeout: r.timeout(),
        reconnect_max: r.reconnect_max(),
    };
    tracing::info!(url = %settings.url, node = %settings.node, advertise = %settings.advertise, nodes = ?r.nodes, "registrations are shared through Redis (loading in the background)");
    let location = RedisLocation::start(settings, store.clone(), seed)?;
    server.stats().export_collector(location.metrics());
    Ok(Some(location))
}

/// After [`Server::run`] returned (a clean stop): writes what is still queued, waiting at most
/// 2 s (Redis may be unreachable), so that the other nodes see this node's last changes.
pub fn finish(location: Option<RedisLocation>) {
    if let Some(l) = location {
        if !l.flush(Duration::from_secs(2)) {
            tracing::warn!(queued = l.pending.queued(), "redis: stopping with changes not written (Redis unreachable)");
        }
    }
}
