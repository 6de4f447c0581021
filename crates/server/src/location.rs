//! `[location]` in the running server: the durable copy of the location store (issue 19;
//! `herald-persist`), opened before serving, woken workers on every commit, metrics, and the
//! last write at shutdown.
//!
//! Write-through: an engine holds a REGISTER's 200 until its ticket is committed
//! (`herald_core::engine`, module `durable`). The writer thread reports each commit here; every
//! worker is then told (one [`Ctl::Durable`] at a time per worker, however many commits) and runs
//! the timers of its due shards, which sends what the commit released. Without the wake-up the
//! worker's tick would release them too, up to a tick later.

use crate::config::{Config, LocationMode};
use crate::runtime::Ctl;
use crate::stats::Stats;
use herald_core::registrar::Location;
use herald_persist::sqlite::{SqliteLocation, SqliteMetrics};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// The open database of `[location]` (write-back or write-through). Dropping it writes what is
/// still queued.
pub struct DurableLocation {
    db: SqliteLocation,
}

/// Opens the database `[location]` names (a relative path is relative to `config_file`'s
/// directory), makes `store` journal into it and starts loading what it holds into `store` in
/// the background. `None` when the mode keeps no database here
/// ("memory", or "redis": `herald_persist::redis`). The error names the file.
pub fn open(
    config: &Config,
    config_file: Option<&Path>,
    store: &Arc<Location>,
) -> Result<Option<DurableLocation>, String> {
    let l = &config.location;
    if matches!(l.mode, LocationMode::Memory | LocationMode::Redis) {
        return Ok(None);
    }
    let path = l.database_path(config_file);
    let mut db = SqliteLocation::open(&path, l.persist_mode(), l.write_back_interval()).map_err(|e| e.to_string())?;
    db.attach(store).map_err(|e| e.to_string())?;
    tracing::info!(
        mode = %l.persist_mode(),
        database = %path.display(),
        write_back_interval_ms = l.write_back_interval_ms,
        "registrations are kept in the location database (loading it in the background)"
    );
    Ok(Some(DurableLocation { db }))
}

impl DurableLocation {
    pub fn database(&self) -> &SqliteLocation {
        &self.db
    }

    /// Adds `herald_location_*` to the metrics endpoint.
    pub(crate) fn export(&self, stats: &Stats) {
        stats.export_collector(SqliteMetrics(self.db.stats().clone()));
    }

    /// From now on every commit wakes the workers (see the module documentation).
    pub(crate) fn wake_on_commit(&self, ctl: Vec<UnboundedSender<Ctl>>) {
        let pending: Vec<Arc<AtomicBool>> = ctl.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
        self.db.queue().on_commit(Box::new(move |_| {
            for (tx, flag) in ctl.iter().zip(&pending) {
                // One wake-up in flight per worker: the worker clears the flag before it looks.
                if !flag.swap(true, Ordering::AcqRel) {
                    let _ = tx.send(Ctl::Durable(flag.clone()));
                }
            }
        }));
    }
}
