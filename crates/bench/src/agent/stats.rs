//! What a run counts while it runs: calls (or registrations) by outcome, failures by reason,
//! retransmissions, RFC 6076 delays and per-method response times.

use super::output::Measure;
use crate::latency::LatencyRecorder;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Stats {
    pub attempted: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub failures: BTreeMap<String, u64>,
    pub retransmissions: u64,
    /// RFC 6076 §4.2: first INVITE sent → first 180 (or 2xx).
    pub srd: LatencyRecorder,
    /// RFC 6076 §4.3: BYE sent → its 2xx.
    pub sdd: LatencyRecorder,
    /// Request sent → final response, per method.
    pub response_time: BTreeMap<&'static str, LatencyRecorder>,
    /// Client transactions completed as expected / not (the SPEC SIP criterion counts these).
    pub transactions: u64,
    pub transactions_failed: u64,
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Messages that matched no call, dialog or registration (late retransmissions, garbage).
    pub stray: u64,
}

impl Stats {
    pub fn fail(&mut self, reason: &str) {
        self.failed += 1;
        match self.failures.get_mut(reason) {
            Some(n) => *n += 1,
            None => {
                self.failures.insert(reason.to_string(), 1);
            }
        }
    }

    pub fn succeed(&mut self, outcome: Option<&'static str>) {
        self.succeeded += 1;
        if let Some(o) = outcome {
            *self.outcomes.entry(o).or_default() += 1;
        }
    }

    pub fn response_time(&mut self, method: &'static str, us: u64) {
        self.response_time.entry(method).or_default().record_us(us);
    }

    pub fn transaction(&mut self, ok: bool) {
        self.transactions += 1;
        if !ok {
            self.transactions_failed += 1;
        }
    }

    /// Adds another event loop's counts and latencies (`--threads`).
    pub fn merge(&mut self, other: &Stats) {
        self.attempted += other.attempted;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        for (reason, n) in &other.failures {
            *self.failures.entry(reason.clone()).or_default() += n;
        }
        self.retransmissions += other.retransmissions;
        self.srd.merge(&other.srd);
        self.sdd.merge(&other.sdd);
        for (method, r) in &other.response_time {
            self.response_time.entry(method).or_default().merge(r);
        }
        self.transactions += other.transactions;
        self.transactions_failed += other.transactions_failed;
        for (outcome, n) in &other.outcomes {
            *self.outcomes.entry(outcome).or_default() += n;
        }
        self.stray += other.stray;
    }

    /// Counts one measurement a protocol role reported.
    pub fn record(&mut self, measure: Measure) {
        match measure {
            Measure::Attempt => self.attempted += 1,
            Measure::Success(outcome) => self.succeed(outcome),
            Measure::Failure(reason) => self.fail(&reason),
            Measure::Srd(us) => self.srd.record_us(us),
            Measure::Sdd(us) => self.sdd.record_us(us),
            Measure::ResponseTime(method, us) => self.response_time(method, us),
            Measure::Transaction(ok) => self.transaction(ok),
            Measure::Stray => self.stray += 1,
        }
    }
}

/// The failure reason for an unexpected final status.
pub fn status_reason(status: u16) -> String {
    format!("status {status}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_group_by_reason() {
        let mut s = Stats::default();
        s.fail("timeout");
        s.fail(&status_reason(503));
        s.fail("timeout");
        s.succeed(Some("answered"));
        s.response_time("INVITE", 1500);
        assert_eq!(s.failed, 3);
        assert_eq!(s.failures["timeout"], 2);
        assert_eq!(s.failures["status 503"], 1);
        assert_eq!(s.outcomes["answered"], 1);
        assert_eq!(s.response_time["INVITE"].count(), 1);
        let mut total = Stats::default();
        total.merge(&s);
        total.merge(&s);
        assert_eq!((total.failed, total.failures["timeout"], total.outcomes["answered"]), (6, 4, 2));
        assert_eq!(total.response_time["INVITE"].count(), 2);
    }
}
