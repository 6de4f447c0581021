//! The limits of `[flood]` that a configuration reload may change while herald serves
//! (`herald ctl reload`, SIGHUP): thresholds and durations, read with relaxed loads of a cache
//! line that only a reload writes (no lock, no read-modify-write on the request path). What
//! shapes the tables - the windows, `max_sources` - and the `trusted` prefixes, read before
//! any lock for every request, are fixed until a restart.

use crate::config::FloodSettings;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Debug)]
pub(super) struct Tuned {
    max_requests: AtomicU32,
    max_auth_failures: AtomicU32,
    max_auth_failures_per_source: AtomicU32,
    account_failures: AtomicU32,
    ban_ms: AtomicU64,
    account_lock_max_ms: AtomicU64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Tuned {
    pub(super) fn new(s: &FloodSettings) -> Tuned {
        Tuned {
            max_requests: AtomicU32::new(s.max_requests),
            max_auth_failures: AtomicU32::new(s.max_auth_failures),
            max_auth_failures_per_source: AtomicU32::new(s.max_auth_failures_per_source),
            account_failures: AtomicU32::new(s.account_failures),
            ban_ms: AtomicU64::new(ms(s.ban)),
            account_lock_max_ms: AtomicU64::new(ms(s.account_lock_max)),
        }
    }

    pub(super) fn max_requests(&self) -> u32 {
        self.max_requests.load(Relaxed)
    }

    pub(super) fn max_auth_failures(&self) -> u32 {
        self.max_auth_failures.load(Relaxed)
    }

    pub(super) fn max_auth_failures_per_source(&self) -> u32 {
        self.max_auth_failures_per_source.load(Relaxed)
    }

    pub(super) fn account_failures(&self) -> u32 {
        self.account_failures.load(Relaxed)
    }

    pub(super) fn ban(&self) -> Duration {
        Duration::from_millis(self.ban_ms.load(Relaxed))
    }

    pub(super) fn account_lock_max(&self) -> Duration {
        Duration::from_millis(self.account_lock_max_ms.load(Relaxed))
    }

    /// Takes `new`'s limits, when only those differ from `fixed` (the settings the guard was
    /// built with). `Err(key)`: the first `[flood]` key that cannot change while serving;
    /// nothing is changed then. Bans and locks in force keep their end; new ones take the new
    /// durations.
    pub(super) fn retune(&self, fixed: &FloodSettings, new: &FloodSettings) -> Result<(), &'static str> {
        if new.window != fixed.window {
            return Err("window_s");
        }
        if new.auth_window != fixed.auth_window {
            return Err("auth_window_s");
        }
        if new.max_sources != fixed.max_sources {
            return Err("max_sources");
        }
        if new.trusted != fixed.trusted {
            return Err("trusted");
        }
        self.max_requests.store(new.max_requests, Relaxed);
        self.max_auth_failures.store(new.max_auth_failures, Relaxed);
        self.max_auth_failures_per_source.store(new.max_auth_failures_per_source, Relaxed);
        self.account_failures.store(new.account_failures, Relaxed);
        self.ban_ms.store(ms(new.ban), Relaxed);
        self.account_lock_max_ms.store(ms(new.account_lock_max), Relaxed);
        Ok(())
    }
}
