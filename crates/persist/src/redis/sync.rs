//! The Redis task: one RESP3 connection for commands and for the change feed, and the resync
//! that follows every (re)connection.
//!
//! *The change feed* is Redis's own client-side-caching invalidation (`CLIENT TRACKING ON BCAST
//! PREFIX PREFIXloc: NOLOOP`, Redis 6+): Redis pushes the name of every key under the prefix that
//! another connection changed (written, deleted, expired), batched per event-loop turn, and
//! never the keys this connection wrote itself (`NOLOOP`). So a write is one `SET` (no
//! `PUBLISH`, no echo of a node's own changes to read and drop), and every other node hears of
//! it. A key announced is read with `GET`, so whatever order writes of two nodes land in, every
//! node ends with what Redis holds.
//!
//! A session, from connecting to losing the connection:
//!
//! 1. Turn tracking on *before* reading anything, so that no change made while this node reads is
//!    missed (a change announced meanwhile is read again: reading is idempotent).
//! 2. Resync, both ways. If Redis is a new instance (its `run_id` changed: restarted without
//!    persistence, or failed over to an empty replica), was flushed, or changes were dropped from
//!    a full queue, write every AoR of the local store first. Write what is queued. Read every key
//!    (`SCAN`, a page at a time, one `GET` each in a pipeline: one key per AoR, so the pages work
//!    in a Redis cluster too) and take each value into the store, except for AoRs with a change
//!    of ours waiting (ours is newer). Then, unless Redis lost its data, drop the local AoRs that
//!    Redis no longer has (removed at another node during an outage; checked with `EXISTS`).
//! 3. Serve: write queued changes as they come, gathered for 2 ms (a pipeline of `SET key value
//!    PXAT latest-expiry` or `DEL key` per AoR), read the keys other nodes changed (one `GET` per
//!    key, pipelined), and `PING` every second so a Redis that stopped answering (SIGSTOP, a dead
//!    link) is noticed within `timeout`.
//!
//! Any error ends the session; the task reconnects with exponential backoff (100 ms doubling
//! to `reconnect_max`). Meanwhile the store keeps serving from memory and the journal keeps
//! queueing (see `queue`).

use super::queue::{unix_ms, Change, Pending};
use super::record::{decode, encode, Codec};
use super::settings::RedisSettings;
use super::stats::RedisStats;
use herald_core::Peer;
use herald_store::{Aor, Binding, LocationStore, ScanCursor};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// AoRs per pipeline (writes, reads, resync pages).
const BATCH: usize = 256;
/// How often an idle session checks that Redis answers.
const PING_EVERY: Duration = Duration::from_secs(1);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// How long changes gather after the first one before they are written: one pipeline then
/// carries every AoR changed meanwhile (at 10,000 REGISTERs/s, about 20), and the workers'
/// pushes find the task asleep on this timer instead of waking it one by one. It is most of the
/// delay before another node sees a change.
const GATHER: Duration = Duration::from_millis(2);

/// What a session ended with.
type Failure = String;

fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    format!("{what}: {e}")
}

pub(super) struct Task {
    pub settings: RedisSettings,
    pub store: Arc<LocationStore<Peer>>,
    pub pending: Arc<Pending>,
    pub stats: Arc<RedisStats>,
    pub codec: Codec,
    /// The `run_id` of the Redis instance of the last session.
    pub run_id: Option<String>,
    /// Redis was flushed during the last session: the next one writes everything.
    pub flushed: bool,
}

impl Task {
    fn key(&self, aor: &Aor) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.settings.key_prefix.len() + 4 + aor.len());
        k.extend_from_slice(self.settings.key_prefix.as_bytes());
        k.extend_from_slice(b"loc:");
        k.extend_from_slice(aor.as_bytes());
        k
    }

    /// Runs sessions for ever, reconnecting with backoff.
    pub async fn run(mut self) {
        let mut backoff = FIRST_BACKOFF;
        // One warning per outage (at start too); the retries that follow are debug.
        let mut warned = false;
        loop {
            let started = Instant::now();
            let reason = self.session().await;
            let was_up = self.stats.up.swap(false, Ordering::Relaxed);
            if was_up {
                tracing::warn!(url = %self.settings.url, error = %reason, queued = self.pending.queued(), "redis: connection lost; serving from the local store, changes queued");
                warned = true;
            } else if !warned {
                tracing::warn!(url = %self.settings.url, error = %reason, "redis: cannot connect; serving from the local store, retrying");
                warned = true;
            } else {
                tracing::debug!(url = %self.settings.url, error = %reason, "redis: cannot connect");
            }
            if started.elapsed() > self.settings.reconnect_max {
                backoff = FIRST_BACKOFF;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.settings.reconnect_max);
        }
    }

    /// A RESP3 connection whose pushes (the invalidations) come out of the receiver. The
    /// channel is unbounded (the redis crate's push sender): it holds key names pushed by Redis,
    /// a trusted peer, while the task is busy (a resync of a large store), at the rate the other
    /// nodes change AoRs; the task drains it whenever it waits.
    async fn connect(&self) -> Result<(MultiplexedConnection, UnboundedReceiver<PushInfo>), Failure> {
        let t = self.settings.timeout;
        let info = self.settings.url.as_str().into_connection_info().map_err(|e| failed("url", e))?;
        let resp3 = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(resp3)).map_err(|e| failed("url", e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(t))
            .set_response_timeout(Some(t))
            .set_push_sender(tx);
        let mut conn =
            client.get_multiplexed_async_connection_with_config(&config).await.map_err(|e| failed("connect", e))?;
        redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .arg("BCAST")
            .arg("PREFIX")
            .arg(self.key(&Aor::from_canonical(Vec::new())))
            .arg("NOLOOP")
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| failed("CLIENT TRACKING", e))?;
        Ok((conn, rx))
    }

    async fn session(&mut self) -> Failure {
        let (mut conn, mut pushes) = match self.connect().await {
            Ok(c) => c,
            Err(e) => return e,
        };
        let info: String = match redis::cmd("INFO").arg("server").query_async(&mut conn).await {
            Ok(i) => i,
            Err(e) => return failed("INFO", e),
        };
        let run_id = info.lines().find_map(|l| l.strip_prefix("run_id:")).map(|s| s.trim().to_owned());
        let lost_data = self.run_id.is_some() && self.run_id != run_id;
        let overflowed = self.pending.take_overflowed() || std::mem::take(&mut self.flushed);
        self.run_id = run_id;
        self.stats.up.store(true, Ordering::Relaxed);
        let started = Instant::now();
        if let Err(e) = self.resync(&mut conn, lost_data || overflowed, !lost_data).await {
            if overflowed {
                // Not done: the next session writes everything again.
                self.pending.push_overflow_mark();
            }
            return e;
        }
        self.stats.resyncs.fetch_add(1, Ordering::Relaxed);
        tracing::info!(url = %self.settings.url, node = %self.codec.node, lost_data, overflowed, ms = started.elapsed().as_millis() as u64, aors = self.store.aor_count(), "redis: connected and resynchronized");
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                push = pushes.recv() => {
                    let Some(first) = push else { return "the connection closed".into() };
                    let mut keys = Vec::new();
                    let mut next = Some(first);
                    while let Some(p) = next {
                        match p.kind {
                            PushKind::Invalidate => match p.data.into_iter().next() {
                                Some(Value::Array(k)) => keys.extend(k),
                                // A null: Redis was flushed. Resync, writing everything back.
                                _ => {
                                    self.flushed = true;
                                    return "Redis was flushed".into();
                                }
                            },
                            PushKind::Disconnection => return "the connection closed".into(),
                            _ => {}
                        }
                        next = if keys.len() < BATCH { pushes.try_recv().ok() } else { None };
                    }
                    let aors: Vec<Aor> = keys.iter().filter_map(|k| self.changed(k)).collect();
                    if let Err(e) = self.read(&mut conn, &aors).await {
                        return e;
                    }
                }
                _ = self.pending.woken() => {
                    tokio::time::sleep(GATHER).await;
                    if let Err(e) = self.write_queued(&mut conn).await {
                        return e;
                    }
                }
                _ = ping.tick() => {
                    if let Err(e) = redis::cmd("PING").query_async::<()>(&mut conn).await {
                        return failed("PING", e);
                    }
                    if self.pending.take_overflowed() {
                        // Dropped while connected (a burst faster than Redis): write everything.
                        if let Err(e) = self.push_all(&mut conn).await {
                            self.pending.push_overflow_mark();
                            return e;
                        }
                    }
                }
            }
        }
    }

    /// The AoR of a key Redis says another connection changed.
    fn changed(&self, key: &Value) -> Option<Aor> {
        let Value::BulkString(key) = key else { return None };
        let prefix = self.key(&Aor::from_canonical(Vec::new()));
        key.strip_prefix(prefix.as_slice()).filter(|a| !a.is_empty()).map(|a| Aor::from_canonical(a.to_vec()))
    }

    async fn resync(
        &mut self,
        conn: &mut MultiplexedConnection,
        push_all: bool,
        drop_missing: bool,
    ) -> Result<(), Failure> {
        if push_all {
            self.push_all(conn).await?;
        }
        self.write_queued(conn).await?;
        // Read every key, a SCAN page at a time.
        let pattern = {
            let mut p = self.settings.key_prefix.clone().into_bytes();
            p.extend_from_slice(b"loc:*");
            p
        };
        let prefix = self.key(&Aor::from_canonical(Vec::new()));
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(BATCH)
                .query_async(conn)
                .await
                .map_err(|e| failed("SCAN", e))?;
            let aors: Vec<Aor> = keys
                .iter()
                .filter_map(|k| k.strip_prefix(prefix.as_slice()))
                .map(|a| Aor::from_canonical(a.to_vec()))
                .collect();
            self.read(conn, &aors).await?;
            self.write_queued(conn).await?;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        if drop_missing {
            self.drop_missing(conn).await?;
        }
        Ok(())
    }

    /// Writes the local state of every AoR (Redis lost its data, or queued changes were dropped).
    async fn push_all(&mut self, conn: &mut MultiplexedConnection) -> Result<(), Failure> {
        let mut cursor = Some(ScanCursor::START);
        while let Some(c) = cursor {
            let mut page: Vec<(Aor, Change)> = Vec::with_capacity(BATCH);
            let at_ms = unix_ms();
            cursor = self.store.scan(c, BATCH, Instant::now(), |ab| {
                let bindings = ab.live().map(|b| Binding { expires_at: ab.expires_in(b), ..b.clone() }).collect();
                page.push((ab.aor().clone(), Change { bindings, at_ms }));
            });
            // A change queued meanwhile is at least as new: it is written by `write_queued`.
            page.retain(|(aor, _)| !self.pending.holds(aor));
            self.write(conn, page, false).await?;
        }
        Ok(())
    }

    /// Removes the local AoRs Redis does not hold (and that have no change of ours waiting).
    async fn drop_missing(&mut self, conn: &mut MultiplexedConnection) -> Result<(), Failure> {
        let mut cursor = Some(ScanCursor::START);
        while let Some(c) = cursor {
            let mut aors: Vec<Aor> = Vec::with_capacity(BATCH);
            cursor = self.store.scan(c, BATCH, Instant::now(), |ab| aors.push(ab.aor().clone()));
            if aors.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            for aor in &aors {
                pipe.cmd("EXISTS").arg(self.key(aor));
            }
            let exists: Vec<bool> = pipe.query_async(conn).await.map_err(|e| failed("EXISTS", e))?;
            for (aor, _) in aors.iter().zip(exists).filter(|(_, e)| !e) {
                if !self.pending.holds(aor) {
                    self.store.replace(aor, Vec::new(), Instant::now());
                    self.stats.imports.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// Writes everything queued, a batch at a time.
    async fn write_queued(&mut self, conn: &mut MultiplexedConnection) -> Result<(), Failure> {
        loop {
            let batch = self.pending.take(BATCH);
            if batch.is_empty() {
                return Ok(());
            }
            let n = batch.len();
            self.write(conn, batch, true).await?;
            self.pending.written(n);
        }
    }

    /// One pipeline: per AoR its value (or its deletion).
    async fn write(
        &mut self,
        conn: &mut MultiplexedConnection,
        batch: Vec<(Aor, Change)>,
        from_queue: bool,
    ) -> Result<(), Failure> {
        if batch.is_empty() {
            return Ok(());
        }
        let now_ms = unix_ms();
        let mut pipe = redis::pipe();
        for (aor, change) in &batch {
            let key = self.key(aor);
            match self.codec.export(&change.bindings, change.at_ms) {
                Some((value, latest)) if latest > now_ms => {
                    pipe.cmd("SET").arg(key).arg(encode(&value)).arg("PXAT").arg(latest).ignore();
                }
                _ => {
                    pipe.cmd("DEL").arg(key).ignore();
                }
            }
        }
        let started = Instant::now();
        match pipe.query_async::<()>(conn).await {
            Ok(()) => {
                self.stats.record_write(batch.len() as u64, started.elapsed());
                Ok(())
            }
            Err(e) => {
                self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
                if from_queue {
                    self.pending.put_back(batch);
                }
                Err(failed("write", e))
            }
        }
    }

    /// Reads the values of `aors` and takes them into the store.
    async fn read(&mut self, conn: &mut MultiplexedConnection, aors: &[Aor]) -> Result<(), Failure> {
        if aors.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for aor in aors {
            pipe.cmd("GET").arg(self.key(aor));
        }
        let values: Vec<Option<Vec<u8>>> = pipe.query_async(conn).await.map_err(|e| failed("GET", e))?;
        let now_ms = unix_ms();
        for (aor, value) in aors.iter().zip(values) {
            self.take(aor, value.as_deref(), now_ms);
        }
        Ok(())
    }

    /// Takes one AoR's value (none: deleted) into the store, unless a change of ours is waiting.
    fn take(&mut self, aor: &Aor, value: Option<&[u8]>, now_ms: u64) {
        let (bindings, rewrite) = match value.map(decode) {
            None => (Vec::new(), false),
            Some(Ok(v)) => {
                let imported = self.codec.import(&v, now_ms);
                (imported.bindings, imported.rewrite)
            }
            Some(Err(e)) => {
                tracing::warn!(aor = %aor, error = %e, "redis: value not understood; left alone");
                return;
            }
        };
        if self.pending.holds(aor) {
            return;
        }
        if rewrite {
            // Our own bindings with a flow token of an earlier run: write them with a fresh one.
            self.pending.push(aor, Change { bindings: bindings.clone(), at_ms: now_ms });
        }
        self.store.replace(aor, bindings, Instant::now());
        // A REGISTER here between the check above and the replacement was queued with the state
        // it made, which is the newest and the one Redis will hold: the store takes it back.
        if let Some(mine) = self.pending.peek(aor, unix_ms()) {
            self.store.replace(aor, mine, Instant::now());
        }
        self.stats.imports.fetch_add(1, Ordering::Relaxed);
    }
}
