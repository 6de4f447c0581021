//! The position of a paged scan ([`crate::LocationStore::scan`]).

/// Where a scan resumes. Within a shard AoRs are visited in the order of their key hash, and the
/// cursor is the last hash visited, so a page resumes correctly whatever happened in between:
/// an AoR present for the whole scan is visited exactly once, even when the shard's table grew,
/// shrank or was rehashed; AoRs added or removed meanwhile may or may not be seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCursor {
    pub(crate) shard: usize,
    /// Hashes up to this one in `shard` are done; `None`: none yet.
    pub(crate) after: Option<u64>,
}

impl ScanCursor {
    /// The beginning of a scan.
    pub const START: ScanCursor = ScanCursor { shard: 0, after: None };
}
