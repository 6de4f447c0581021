//! The database: one row per binding, readable with the `sqlite3` shell.

use rusqlite::Connection;

/// `PRAGMA user_version` of the layout below; a database with another (non-zero) version is
/// refused rather than misread.
pub(crate) const VERSION: i64 = 1;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS location (
    aor       BLOB    NOT NULL, -- the canonical address-of-record, user@host (herald_store::Aor)
    position  INTEGER NOT NULL, -- 0 = least recently updated binding of the AoR
    contact   TEXT    NOT NULL, -- the contact URI as registered
    expires   INTEGER NOT NULL, -- wall-clock expiry, seconds since the Unix epoch
    call_id   TEXT    NOT NULL,
    cseq      INTEGER NOT NULL,
    path      TEXT,             -- Path header values, joined with ', ' (RFC 3327)
    instance  TEXT,             -- +sip.instance (RFC 5626)
    reg_id    INTEGER,          -- reg-id (RFC 5626)
    q         INTEGER,          -- q-value in thousandths
    transport TEXT    NOT NULL, -- UDP, TCP, TLS, WS, WSS: how the REGISTER came
    source    TEXT    NOT NULL, -- ip:port it came from
    PRIMARY KEY (aor, position)
) WITHOUT ROWID;
";

/// The pragmas every connection uses: WAL (a reader never waits for the writer, nor the writer
/// for a reader), FULL synchronous (a commit is on disk, power loss included, when it
/// returns: in WAL mode that is one fsync of the log per commit; write-back's writer relaxes
/// it, [`relax_for_write_back`]), a busy timeout for the
/// moments a checkpoint holds the lock. Pages are read through a memory map and kept in a
/// 32 MiB cache: a write is then b-tree work, not read system calls (scripts/bench-store.sh).
///
/// No index besides the key: every index is written by every change, on the REGISTER's
/// account; expired rows are found by walking the key a bounded chunk at a time instead.
pub(crate) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "mmap_size", 1i64 << 30)?;
    conn.pragma_update(None, "cache_size", -32_768)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}

/// The writer's commits in write-back mode: `synchronous = NORMAL`, the WAL is fsynced at
/// checkpoints only, not at every commit. A commit is then safe against the process dying
/// (`kill -9`, a panic: the WAL is in the OS's page cache) but not against power loss or a
/// kernel crash, which may lose the last commits, as write-back may lose its last interval by
/// design. Write-through keeps FULL: its 200 promises the disk.
pub(crate) fn relax_for_write_back(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", "NORMAL")
}

/// Creates the table on a new database; checks the version of an existing one.
pub(crate) fn create(conn: &Connection) -> Result<(), String> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(|e| e.to_string())?;
    if version != 0 && version != VERSION {
        return Err(format!("schema version {version}, this herald reads version {VERSION}"));
    }
    conn.execute_batch(CREATE).map_err(|e| e.to_string())?;
    conn.pragma_update(None, "user_version", VERSION).map_err(|e| e.to_string())
}

/// The rows of an AoR past its current bindings (`?2`: how many it has now; 0: all).
pub(crate) const DELETE_FROM_POSITION: &str = "DELETE FROM location WHERE aor = ?1 AND position >= ?2";
/// A binding rewritten in place (the parameters are [`INSERT`]'s).
pub(crate) const UPDATE: &str = "UPDATE location SET contact = ?3, expires = ?4, call_id = ?5, cseq = ?6, path = ?7, \
                                 instance = ?8, reg_id = ?9, q = ?10, transport = ?11, source = ?12 \
                                 WHERE aor = ?1 AND position = ?2";
pub(crate) const INSERT: &str = "INSERT INTO location (aor, position, contact, expires, call_id, cseq, path, instance, \
                                 reg_id, q, transport, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
const COLUMNS: &str = "aor, contact, expires, call_id, cseq, path, instance, reg_id, q, transport, source";
/// A page of the start-up load: the AoRs after a key, in key order.
pub(crate) fn select_page() -> String {
    format!("SELECT {COLUMNS} FROM location WHERE aor > ?1 ORDER BY aor, position LIMIT ?2")
}
/// One AoR (a point read while the load runs).
pub(crate) fn select_aor() -> String {
    format!("SELECT {COLUMNS} FROM location WHERE aor = ?1 ORDER BY position")
}
/// The last key of the next chunk of the expiry walk: the `?2`-th AoR after `?1` (or the last).
pub(crate) const PURGE_CHUNK_END: &str =
    "SELECT max(aor) FROM (SELECT aor FROM location WHERE aor > ?1 ORDER BY aor, position LIMIT ?2)";
/// Expired rows of one chunk of the key.
pub(crate) const PURGE: &str = "DELETE FROM location WHERE aor > ?1 AND aor <= ?2 AND expires <= ?3";
