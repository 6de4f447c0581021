//! Counts of the responses the engines build themselves, by status code: the proxy's own
//! refusals (RFC 3261 §16.3: 400, 416, 420, 482, 483), "nobody there" (404, 480), the final
//! answers it synthesizes when no branch gave one it may forward (408, 500, 502, 503: §16.7
//! step 6), 200 to OPTIONS and CANCEL, and the digest challenges (401, 407). Responses relayed from downstream are not counted here, and
//! the registrar counts its answers itself (`crate::registrar::RegistrarStats`), as the runtime
//! counts the 503s it sends before a request reaches an engine (overload, transaction limit).
//!
//! One table is shared by every engine shard (`Engine::with_response_stats`) and exported by
//! the runtime (`herald_server::Stats::export_responses`, `herald_local_responses_total`).

use std::sync::atomic::{AtomicU64, Ordering};

/// The lowest status code counted; 100..=699 are SIP's (RFC 3261 §21).
const FIRST: u16 = 100;
const CODES: usize = 600;

#[derive(Debug)]
pub struct ResponseStats {
    /// `by_status[code - 100]`; codes outside 100..=699 (none is ever built) are clamped into it.
    by_status: Box<[AtomicU64]>,
}

impl Default for ResponseStats {
    fn default() -> Self {
        ResponseStats { by_status: (0..CODES).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl ResponseStats {
    /// Counts one response with `status` (the engine calls it for each response it builds).
    pub fn count(&self, status: u16) {
        let i = usize::from(status.saturating_sub(FIRST)).min(CODES - 1);
        self.by_status[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The codes answered at least once, in ascending order, with their counts.
    pub fn snapshot(&self) -> Vec<(u16, u64)> {
        self.by_status
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then_some((FIRST + i as u16, n))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_code_and_lists_only_those_seen() {
        let s = ResponseStats::default();
        assert!(s.snapshot().is_empty());
        for code in [483, 404, 404, 100, 699] {
            s.count(code);
        }
        assert_eq!(s.snapshot(), vec![(100, 1), (404, 2), (483, 1), (699, 1)]);
        // Out-of-range codes cannot index out of bounds.
        s.count(0);
        s.count(u16::MAX);
        assert_eq!(s.snapshot(), vec![(100, 2), (404, 2), (483, 1), (699, 2)]);
    }
}
