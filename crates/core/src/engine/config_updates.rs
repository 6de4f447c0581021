//! Handing a reloaded [`EngineConfig`] to every engine while they serve (`herald ctl reload`,
//! SIGHUP): the runtime publishes it once, and each engine takes it at its next call, between
//! two messages. Transactions, proxy contexts and timers stay as they are: a transaction that
//! began under the old configuration finishes under the new one for what it has still to
//! decide (its next branch), which is what an operator who changed a route expects.
//!
//! Why a shared slot rather than a message per engine: an engine runs on whichever worker holds
//! its shard's lock, and the runtime drives any [`crate::SipHandler`], not only engines; the
//! slot costs one relaxed atomic load per call (a cache line written only by a reload).

use super::config::EngineConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Told after each publication (see [`ConfigUpdates::on_publish`]).
type Listener = Box<dyn Fn() + Send + Sync>;

/// The latest published configuration, shared by the engines of one process.
pub struct ConfigUpdates {
    /// Bumped after each publication: an engine that saw this generation has the latest.
    generation: AtomicU64,
    latest: Mutex<Arc<EngineConfig>>,
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for ConfigUpdates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigUpdates").field("generation", &self.generation).finish_non_exhaustive()
    }
}

impl ConfigUpdates {
    /// Starts with the configuration the engines are built with (generation 0).
    pub fn new(initial: Arc<EngineConfig>) -> ConfigUpdates {
        ConfigUpdates { generation: AtomicU64::new(0), latest: Mutex::new(initial), listeners: Mutex::default() }
    }

    /// Calls `listener` after every later publication: how a part of the runtime that follows
    /// the configuration (gateway probing) waits for a reload instead of looking on a period.
    pub fn on_publish(&self, listener: Listener) {
        self.listeners.lock().unwrap_or_else(PoisonError::into_inner).push(listener);
    }

    /// Makes `config` the one every engine uses from its next call on.
    pub fn publish(&self, config: Arc<EngineConfig>) {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = config;
        // Release after the store: an engine that sees the new generation finds the new value.
        self.generation.fetch_add(1, Ordering::Release);
        for listener in self.listeners.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            listener();
        }
    }

    /// The configuration published last.
    pub fn latest(&self) -> Arc<EngineConfig> {
        self.latest.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many times a configuration was published.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a configuration newer than generation `seen` is published (one atomic load):
    /// the test of [`Self::newer_than`] without taking the configuration.
    #[inline]
    pub(crate) fn has_newer_than(&self, seen: u64) -> bool {
        self.generation.load(Ordering::Acquire) != seen
    }

    /// The latest configuration and its generation when it is newer than `seen`.
    pub(crate) fn newer_than(&self, seen: u64) -> Option<(u64, Arc<EngineConfig>)> {
        let generation = self.generation.load(Ordering::Acquire);
        (generation != seen).then(|| (generation, self.latest()))
    }
}
