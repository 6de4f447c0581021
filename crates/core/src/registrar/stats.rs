//! Counters of the registrar's answers, shared by every clone of one [`super::Registrar`] (the
//! engine shards each hold a clone) and exported by the runtime (`herald_server::Stats::
//! export_registrar`): every REGISTER the registrar refuses is counted by reason.

use herald_store::StoreError;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct RegistrarStats {
    /// REGISTERs answered 200 (bindings added, refreshed, removed or listed).
    pub accepted: AtomicU64,
    /// 503 + Retry-After: the AoR already holds `max_bindings_per_aor` bindings.
    pub too_many_bindings: AtomicU64,
    /// 500: Call-ID/CSeq not newer than the binding's (§10.3 step 7).
    pub out_of_order: AtomicU64,
    /// 423 Interval Too Brief (§10.3 step 7).
    pub interval_too_brief: AtomicU64,
    /// 404: the AoR's domain is not one this registrar holds (§10.3 step 3).
    pub not_found: AtomicU64,
    /// 420 Bad Extension (§10.3 step 2).
    pub bad_extension: AtomicU64,
    /// 400: malformed or inconsistent request (Contact `*` misuse, bad To, bad Expires, ...).
    pub malformed: AtomicU64,
    /// Any other refusal (405 for a method that is not REGISTER).
    pub other: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegistrarStatsSnapshot {
    pub accepted: u64,
    pub too_many_bindings: u64,
    pub out_of_order: u64,
    pub interval_too_brief: u64,
    pub not_found: u64,
    pub bad_extension: u64,
    pub malformed: u64,
    pub other: u64,
}

impl RegistrarStats {
    pub fn snapshot(&self) -> RegistrarStatsSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RegistrarStatsSnapshot {
            accepted: l(&self.accepted),
            too_many_bindings: l(&self.too_many_bindings),
            out_of_order: l(&self.out_of_order),
            interval_too_brief: l(&self.interval_too_brief),
            not_found: l(&self.not_found),
            bad_extension: l(&self.bad_extension),
            malformed: l(&self.malformed),
            other: l(&self.other),
        }
    }

    /// Counts a request refused before the store was touched ([`super::request`]), by the
    /// status it is answered with: each of those statuses has one cause there.
    pub(super) fn refused_request(&self, status: u16) {
        let c = match status {
            423 => &self.interval_too_brief,
            404 => &self.not_found,
            420 => &self.bad_extension,
            400 => &self.malformed,
            _ => &self.other,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an update the store refused.
    pub(super) fn refused_update(&self, e: &StoreError) {
        let c = match e {
            StoreError::TooManyBindings { .. } => &self.too_many_bindings,
            StoreError::OutOfOrder { .. } => &self.out_of_order,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }
}

impl RegistrarStatsSnapshot {
    /// The refusals by reason, as `(reason, count)`: the `reason` label of
    /// `herald_registrar_rejected_total` on the metrics endpoint.
    pub fn rejections(&self) -> [(&'static str, u64); 7] {
        [
            ("too_many_bindings", self.too_many_bindings),
            ("out_of_order", self.out_of_order),
            ("interval_too_brief", self.interval_too_brief),
            ("not_found", self.not_found),
            ("bad_extension", self.bad_extension),
            ("malformed", self.malformed),
            ("other", self.other),
        ]
    }
}
