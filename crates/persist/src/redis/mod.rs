//! Shared location on Redis (issue 19 item 2): several herald nodes serve one set of phones; a
//! phone registered at node A is reachable by a call arriving at node B.
//!
//! *The local store stays the hot path.* Every node keeps its whole [`LocationStore`] in memory
//! and looks up only there: no call waits on Redis. The store's journal ([`queue::Pending`])
//! queues every local change (latest state per AoR, bounded); a task on its own thread writes it
//! to Redis — one key per AoR, `PREFIXloc:AOR`, holding the AoR's whole binding list
//! ([`record`]) and expiring with its last binding (`PXAT`); Redis itself tells every other
//! node which keys changed (client-side-caching invalidation, see [`sync`]), and each reads the
//! key and replaces its copy of the AoR
//! ([`LocationStore::replace`], not journaled: no echo).
//!
//! *Reaching a phone held by another node.* A binding registered directly at A is stored with a
//! Path of A's own URI and the flow token of the phone's flow (see [`record`]): B routes the
//! request to A (RFC 3327 §5.3) and A delivers it over the flow (RFC 5626 §5.3), whether that is
//! a TCP/TLS/WebSocket connection only A holds or a NAT binding only A's address passes.
//!
//! *Consistency.* Per AoR, the last write wins: two nodes changing one AoR within the same
//! few milliseconds may lose one of the two changes (the phone's next refresh restores it).
//! A value read from Redis never overwrites a local change still waiting to be written.
//!
//! *When Redis is unreachable* (restart, network, SIGSTOP): each node keeps serving from its
//! store — calls to every phone it knew keep working, registrations at this node succeed and
//! are queued — and reconnects with backoff; on reconnection it resyncs both ways ([`sync`]).
//! Meanwhile a caller at node B does not see changes made at node A (a new registration at A is
//! not reachable from B, an unregistration at A still rings at B until the resync), and B's own
//! changes reach A only at the resync.
//!
//! *Redis Cluster and Sentinel* work on paper: one key per AoR (keys hash to slots
//! independently), no multi-key command or transaction, reads page with `SCAN` per key and
//! pipelined single-key `GET`s; in a cluster the invalidations come from each shard's primary,
//! so a node would keep one tracking connection per shard.
//! The `redis` crate's cluster and sentinel clients would replace the single connection of
//! [`sync`]; only a single server is tested.

mod metrics;
mod queue;
mod record;
mod settings;
mod stats;
mod sync;

pub use metrics::RedisMetrics;
pub use queue::{Change, Pending};
pub use record::{decode, encode, Codec, StoredAor, StoredBinding};
pub use settings::RedisSettings;
pub use stats::{RedisStats, LATENCY_BUCKETS_US};

use herald_core::proxy::flow_token::FlowTokens;
use herald_core::{Peer, Seed};
use herald_store::LocationStore;
use std::sync::Arc;
use std::time::Duration;

/// A running Redis mode: its counters and its queue's gauges.
#[derive(Clone)]
pub struct RedisLocation {
    pub stats: Arc<RedisStats>,
    pub pending: Arc<Pending>,
}

impl RedisLocation {
    /// Installs the journal on `store` and starts the Redis task on a thread of its own (a
    /// current-thread tokio runtime: the workers never run Redis I/O). `seed` is the engine's:
    /// the flow tokens written for this node's phones are read back by its engine. Returns at
    /// once; the node serves while the task connects and loads (see [`sync`]).
    pub fn start(
        settings: RedisSettings,
        store: Arc<LocationStore<Peer>>,
        seed: Seed,
    ) -> Result<RedisLocation, String> {
        let pending = Arc::new(Pending::new(settings.max_queued));
        store.set_journal(pending.clone()).map_err(|_| "the location store already has a journal".to_owned())?;
        let stats = Arc::new(RedisStats::default());
        let codec = Codec { node: settings.node.clone(), advertise: settings.advertise, tokens: FlowTokens::new(seed) };
        let task = sync::Task {
            settings,
            store,
            pending: pending.clone(),
            stats: stats.clone(),
            codec,
            run_id: None,
            flushed: false,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the Redis task's runtime: {e}"))?;
        std::thread::Builder::new()
            // "herald-location" as the kernel cuts it (15 bytes): counted with the location writer's
            // thread, off the REGISTER's path, by scripts/bench-store.sh.
            .name("herald-location-redis".into())
            .spawn(move || runtime.block_on(task.run()))
            .map_err(|e| format!("cannot start the Redis task: {e}"))?;
        Ok(RedisLocation { stats, pending })
    }

    /// Waits, at most `limit`, until every queued change is written (a clean stop loses nothing
    /// while Redis answers). Whether it got there.
    pub fn flush(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while !self.pending.idle() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Its families for the metrics endpoint (`stats.export_collector(location.metrics())`).
    pub fn metrics(&self) -> RedisMetrics {
        RedisMetrics { stats: self.stats.clone(), pending: self.pending.clone() }
    }
}
