//! The credentials table in use, swapped atomically when the file changes.

use crate::file::{self, CredentialsError};
use crate::file_change::FileChange;
use crate::table::Credentials;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// The current table. Readers take a cheap `Arc` clone under a read lock held for that clone
/// only; a reload builds the new table outside the lock and swaps the pointer.
#[derive(Debug, Default)]
pub struct SharedCredentials {
    current: RwLock<Arc<Credentials>>,
}

impl SharedCredentials {
    pub fn new(creds: Credentials) -> SharedCredentials {
        SharedCredentials { current: RwLock::new(Arc::new(creds)) }
    }

    /// The table in use now.
    pub fn current(&self) -> Arc<Credentials> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Puts `creds` in use.
    pub fn replace(&self, creds: Credentials) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(creds);
    }
}

/// What one [`FileWatcher::poll`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// The file is as it was (or still missing).
    Unchanged,
    /// A new table with this many users is in use.
    Loaded(usize),
    /// The file changed but cannot be used; the previous table stays in use.
    Failed(CredentialsError),
    /// The file disappeared; the previous table stays in use (a half-done manual edit must not
    /// lock every user out).
    Missing,
}

/// What identifies one version of the file: a rename (atomic save) changes the inode, an
/// in-place edit the modification time or size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    dev: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp { ino: m.ino(), dev: m.dev(), len: m.len(), mtime: m.mtime(), mtime_nsec: m.mtime_nsec() })
}

/// Watches a credentials file: [`FileWatcher::poll`] compares its metadata with the last load's
/// (one `stat` when nothing changed), [`FileWatcher::wait`] blocks until it may have changed.
#[derive(Debug)]
pub struct FileWatcher {
    path: PathBuf,
    shared: Arc<SharedCredentials>,
    seen: Option<Stamp>,
    missing_reported: bool,
    change: FileChange,
}

impl FileWatcher {
    /// Loads `path` now. A missing file gives an empty table for `realm` (users can be added
    /// while herald runs); a file that fails to parse is an error. Which realms the file holds
    /// is the caller's to judge (`herald serve` warns about realms it challenges with that
    /// have no users): a file is never refused for its realms.
    pub fn open(path: &Path, realm: &str) -> Result<(FileWatcher, Arc<SharedCredentials>), CredentialsError> {
        let shared = Arc::new(SharedCredentials::new(Credentials::new(realm)));
        let mut w = FileWatcher {
            path: path.to_owned(),
            shared: shared.clone(),
            seen: None,
            missing_reported: false,
            change: FileChange::default(),
        };
        match w.poll() {
            Reload::Failed(e) => Err(e),
            _ => Ok((w, shared)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Blocks until the file may have changed (inotify: no wake-up while it does not), or for
    /// `fallback` where it cannot be watched; then [`FileWatcher::poll`] tells.
    pub fn wait(&mut self, fallback: Duration) {
        self.change.wait(&self.path, fallback);
    }

    /// Reloads the file if it changed since the last call.
    pub fn poll(&mut self) -> Reload {
        let Some(now) = stamp(&self.path) else {
            if self.seen.is_some() && !self.missing_reported {
                self.missing_reported = true;
                return Reload::Missing;
            }
            return Reload::Unchanged;
        };
        self.missing_reported = false;
        if self.seen == Some(now) {
            return Reload::Unchanged;
        }
        // Remember the version even when it fails, so a broken file is reported once.
        self.seen = Some(now);
        match file::load(&self.path) {
            Ok(c) => {
                let n = c.len();
                self.shared.replace(c);
                Reload::Loaded(n)
            }
            Err(e) => Reload::Failed(e),
        }
    }
}
