//! The embedded durable store: the location bindings in one SQLite database (WAL mode), written
//! by one thread ([`writer`]) from the [`ChangeQueue`], read back at start-up in the background
//! ([`load`]).
//!
//! One database belongs to one herald process: [`SqliteLocation::open`] takes an exclusive
//! advisory lock (flock) on the file and refuses to start when another process holds it,
//! naming the path. The lock goes with the process, `kill -9` included.

mod load;
mod metrics;
mod rows;
mod schema;
mod writer;

use crate::{ChangeQueue, Mode, PersistStats};
use fs4::fs_std::FileExt;
use herald_core::Location;
pub use metrics::SqliteMetrics;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why the database could not be opened.
#[derive(Debug)]
pub struct OpenError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "location database {}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for OpenError {}

/// An open location database and its writer thread. Dropping it writes what is still queued
/// and stops the writer.
pub struct SqliteLocation {
    path: PathBuf,
    queue: Arc<ChangeQueue>,
    interval: Option<Duration>,
    writer: Option<JoinHandle<()>>,
    loader: Option<JoinHandle<()>>,
    /// Held for the process's lifetime: the flock.
    _lock: File,
}

impl SqliteLocation {
    /// Opens (or creates) the database at `path` for `mode` (write-back or write-through;
    /// write-back writes every `write_back_interval`). Nothing is read yet: see
    /// [`SqliteLocation::attach`].
    pub fn open(path: &Path, mode: Mode, write_back_interval: Duration) -> Result<SqliteLocation, OpenError> {
        let err = |message: String| OpenError { path: path.to_owned(), message };
        if mode == Mode::Memory {
            return Err(err("mode \"memory\" keeps no database".into()));
        }
        let lock = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| err(format!("cannot open: {e}")))?;
        match FileExt::try_lock_exclusive(&lock) {
            Ok(true) => {}
            Ok(false) => return Err(err("in use by another herald process (it holds the file's lock)".into())),
            Err(e) => return Err(err(format!("cannot lock: {e}"))),
        }
        let conn = writer::connect(path).map_err(|e| err(e.to_string()))?;
        schema::create(&conn).map_err(err)?;
        if mode == Mode::WriteBack {
            schema::relax_for_write_back(&conn).map_err(|e| err(e.to_string()))?;
        }
        let stats = Arc::new(PersistStats::new(mode));
        let queue = Arc::new(ChangeQueue::new(mode, stats));
        let interval = (mode == Mode::WriteBack).then_some(write_back_interval.max(Duration::from_millis(1)));
        let writer = writer::spawn(conn, queue.clone(), interval).map_err(|e| err(format!("cannot start: {e}")))?;
        Ok(SqliteLocation { path: path.to_owned(), queue, interval, writer: Some(writer), loader: None, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal to install in the store, and where commits are reported.
    pub fn queue(&self) -> &Arc<ChangeQueue> {
        &self.queue
    }

    pub fn stats(&self) -> &Arc<PersistStats> {
        self.queue.stats()
    }

    /// Makes `store` journal into this database and starts loading what the database holds
    /// into it, in the background (a request for a user not loaded yet reads that user from
    /// the database). Call once, before serving.
    pub fn attach(&mut self, store: &Arc<Location>) -> Result<(), OpenError> {
        let err = |message: String| OpenError { path: self.path.clone(), message };
        self.queue.set_store(store);
        self.queue.set_loading(true);
        self.queue.stats().loading.store(1, Ordering::Relaxed);
        store.set_journal(self.queue.clone()).map_err(|_| err("the location store has a journal already".into()))?;
        let point = load::PointReader::open(&self.path, self.queue.clone()).map_err(|e| err(e.to_string()))?;
        let _ = store.set_backfill(Arc::new(point));
        let loader = load::spawn(&self.path, store.clone(), self.queue.clone()).map_err(|e| err(e.to_string()))?;
        self.loader = Some(loader);
        Ok(())
    }

    /// Waits for the start-up load to end (tests, tools).
    pub fn wait_loaded(&mut self) {
        if let Some(l) = self.loader.take() {
            let _ = l.join();
        }
    }

    /// The longest a change waits in memory before it is written: the write-back interval
    /// (`None` in write-through mode, where a change is written at once).
    pub fn interval(&self) -> Option<Duration> {
        self.interval
    }
}

impl Drop for SqliteLocation {
    fn drop(&mut self) {
        self.queue.close();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests;
