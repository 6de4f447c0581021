//! Nonce-count replay detection with bounded memory (RFC 7616 §3.4 "nc", §5.13; RFC 3261
//! §22.4 leaves replay protection to the nonce).
//!
//! A client reusing a nonce must send a higher nonce-count each time. After a response checks
//! out, the highest nc seen for its nonce is recorded; an nc not above it is a replay. Only
//! verified answers create entries (an attacker without a password cannot fill the table), and
//! an entry is useless once its nonce expired, so expired entries go first.
//!
//! Memory is bounded: each of [`SHARDS`] shards holds at most `capacity / SHARDS` nonces. When
//! a shard is full its oldest entry is dropped and the shard's *floor* rises to that entry's
//! issue time: any nonce issued at or before the floor counts as used up (the client gets a
//! stale challenge and a fresh nonce). So dropping state never opens a replay window.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Shards of the table: answers on different engine shards rarely contend.
pub const SHARDS: usize = 64;

/// What the table says about one (nonce, nc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcCheck {
    /// A new, higher nonce-count: recorded.
    Fresh,
    /// Not above the highest seen for this nonce.
    Replay,
    /// The nonce's state was dropped to bound memory: treat it as used up.
    Forgotten,
}

#[derive(Debug, Default)]
struct Shard {
    highest: HashMap<[u8; 16], u32>,
    /// Insertion order with issue times, for expiry and eviction.
    order: VecDeque<([u8; 16], u64)>,
    floor: Option<u64>,
}

#[derive(Debug)]
pub struct NonceCounts {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
}

impl NonceCounts {
    /// At most `capacity` nonces tracked (at least one per shard).
    pub fn new(capacity: usize) -> NonceCounts {
        let per_shard = (capacity / SHARDS).max(1);
        NonceCounts { shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(), per_shard }
    }

    /// Checks and records `nc` for the nonce `id` issued at `issued`. `expired_before`: nonces
    /// issued before this (Unix seconds) are expired and their entries may go.
    pub fn check(&self, id: [u8; 16], issued: u64, nc: u32, expired_before: u64) -> NcCheck {
        let shard = usize::from(id[15]) % SHARDS; // the low byte of the salt: round robin
        let mut s = self.shards[shard].lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(&(old, at)) = s.order.front() {
            if at >= expired_before {
                break;
            }
            s.order.pop_front();
            s.highest.remove(&old);
        }
        if s.floor.is_some_and(|f| issued <= f) {
            return NcCheck::Forgotten;
        }
        if let Some(h) = s.highest.get_mut(&id) {
            if nc <= *h {
                return NcCheck::Replay;
            }
            *h = nc;
            return NcCheck::Fresh;
        }
        while s.highest.len() >= self.per_shard {
            let Some((old, at)) = s.order.pop_front() else { break };
            s.highest.remove(&old);
            s.floor = Some(s.floor.map_or(at, |f| f.max(at)));
        }
        if s.floor.is_some_and(|f| issued <= f) {
            return NcCheck::Forgotten;
        }
        s.highest.insert(id, nc);
        s.order.push_back((id, issued));
        NcCheck::Fresh
    }

    /// Nonces tracked now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).highest.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
