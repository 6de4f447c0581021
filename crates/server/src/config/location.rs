//! `[location]`: where registrations are kept besides memory, so that they survive a restart
//! (issue 19; Kamailio usrloc's `db_mode`). The copy itself is `herald-persist`.

use super::redis::Redis;
use herald_persist::Mode;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[location]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Location {
    /// `"memory"`: no copy, a restart forgets every registration. `"write-back"` (default):
    /// changes are written to the database every `write_back_interval_ms`, off the REGISTER's
    /// path; a crash (or `kill -9`) loses at most the changes of the last interval. `"write-through"`:
    /// the 200 OK to a REGISTER is sent only once its change is committed (one transaction and
    /// one fsync for all changes waiting); a crash loses no registration that was answered 200.
    pub mode: LocationMode,
    /// The SQLite database file (created when missing). A relative path is relative to the
    /// directory of the configuration file (of the current directory with the built-in
    /// configuration). Two herald processes cannot use one file: the second refuses to start,
    /// naming it.
    pub path: PathBuf,
    /// Write-back: how often waiting changes are written, in milliseconds (1 to 60000). A
    /// crash loses at most this long's changes.
    pub write_back_interval_ms: u64,
    /// `[location.redis]`: the shared location of several nodes, used when `mode = "redis"`.
    pub redis: Redis,
}

/// `[location] mode`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocationMode {
    Memory,
    WriteBack,
    WriteThrough,
    /// Several nodes share their registrations through Redis (`[location.redis]`); no local
    /// database.
    Redis,
}

impl Default for Location {
    fn default() -> Self {
        Location {
            mode: LocationMode::WriteBack,
            path: PathBuf::from("herald-location.db"),
            write_back_interval_ms: 1000,
            redis: Redis::default(),
        }
    }
}

impl Location {
    /// The mode as `herald-persist` takes it.
    pub fn persist_mode(&self) -> Mode {
        match self.mode {
            LocationMode::Memory => Mode::Memory,
            LocationMode::WriteBack => Mode::WriteBack,
            LocationMode::WriteThrough => Mode::WriteThrough,
            // The copy is Redis (`herald_persist::redis`), not the SQLite database.
            LocationMode::Redis => Mode::Memory,
        }
    }

    /// The other nodes sharing the location (`[location.redis] nodes`, in redis mode only): the
    /// auth gate lets their requests pass and `[flood]` does not count them.
    pub fn cluster_nodes(&self) -> Vec<herald_core::auth::PeerPrefix> {
        match self.mode {
            LocationMode::Redis => self.redis.node_prefixes(),
            _ => Vec::new(),
        }
    }

    pub fn write_back_interval(&self) -> Duration {
        Duration::from_millis(self.write_back_interval_ms)
    }

    /// The database file: a relative `path` is relative to the directory of `config_file`
    /// (the file the configuration was loaded from; `None`: the built-in configuration, whose
    /// relative paths are relative to the current directory), so that two configurations in two
    /// directories never share a database by accident.
    pub fn database_path(&self, config_file: Option<&Path>) -> PathBuf {
        match config_file.and_then(Path::parent) {
            Some(dir) if self.path.is_relative() => dir.join(&self.path),
            _ => self.path.clone(),
        }
    }

    /// The offending key and why, when a value is out of range.
    pub fn problems(&self) -> Option<(&'static str, String)> {
        if !(1..=60_000).contains(&self.write_back_interval_ms) {
            return Some(("write_back_interval_ms", "must be between 1 and 60000".into()));
        }
        if self.mode != LocationMode::Memory && self.path.as_os_str().is_empty() {
            return Some(("path", "must name a file (or set mode = \"memory\")".into()));
        }
        None
    }
}
