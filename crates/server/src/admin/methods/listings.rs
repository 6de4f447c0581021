//! Listings in progress (`registrations.list`): where each one is in the store's scan, kept
//! here under an opaque cursor handed to the client, and bounded: at most [`MAX_OPEN`]
//! listings, each forgotten [`IDLE`] after its last page (a client that stops half-way costs
//! nothing lasting).

use herald_store::ScanCursor;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Listings open at once; opening one more forgets the one idle longest.
const MAX_OPEN: usize = 32;
/// A listing not continued for this long is forgotten.
const IDLE: Duration = Duration::from_secs(300);
/// Open listings by cursor.
#[derive(Default)]
pub(crate) struct Listings {
    open: Mutex<HashMap<u64, Listing>>,
    /// Keys the cursor numbers, so a cursor cannot be guessed from another.
    keys: RandomState,
    next: std::sync::atomic::AtomicU64,
}

pub(super) struct Listing {
    pub at: ScanCursor,
    pub filter: Filter,
    pub touched: Instant,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Filter {
    /// The AoR key (`user@host`) starts with this.
    pub prefix: Option<String>,
    /// The AoR's user part is exactly this.
    pub user: Option<String>,
}

impl Filter {
    pub fn matches(&self, aor: &str) -> bool {
        let user = aor.rsplit_once('@').map_or(aor, |(u, _)| u);
        self.prefix.as_deref().is_none_or(|p| aor.starts_with(p)) && self.user.as_deref().is_none_or(|u| u == user)
    }
}

impl Listings {
    /// The listing of `cursor`, taken out (it is put back with its new position).
    pub fn take(&self, cursor: &str, now: Instant) -> Option<Listing> {
        let id = u64::from_str_radix(cursor, 16).ok()?;
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|_, l| now.duration_since(l.touched) < IDLE);
        open.remove(&id)
    }

    pub fn put(&self, listing: Listing) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = self.keys.hash_one(n);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.len() >= MAX_OPEN {
            if let Some(oldest) = open.iter().min_by_key(|(_, l)| l.touched).map(|(k, _)| *k) {
                open.remove(&oldest);
            }
        }
        open.insert(id, listing);
        format!("{id:016x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_prefix_and_user() {
        let f = Filter { prefix: Some("al".into()), user: None };
        assert!(f.matches("alice@example.com") && !f.matches("bob@example.com"));
        let f = Filter { prefix: None, user: Some("bob".into()) };
        assert!(f.matches("bob@example.com") && !f.matches("bobby@example.com"));
        assert!(Filter::default().matches("anything"));
    }
}
