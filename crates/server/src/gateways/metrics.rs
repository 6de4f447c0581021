//! The gateway families of the metrics endpoint (issue 18 item 5), one sample per set and
//! destination (labels `set`, `destination` = the configured URI):
//!
//! | family | type | what |
//! | --- | --- | --- |
//! | `herald_gateway_up` | gauge | 1 while calls go there (the forced state if any, else the rules'), 0 while down |
//! | `herald_gateway_forced` | gauge | 1 while an operator forces the state (admin API) |
//! | `herald_gateway_calls_total` | counter | call attempts sent there |
//! | `herald_gateway_call_failures_total` | counter | attempts that failed over (failover status, no answer) |
//! | `herald_gateway_probes_total` | counter | probes, by `result` = `ok` or `failed` |
//! | `herald_gateway_state_changes_total` | counter | up↔down changes by the health rules |
//! | `herald_gateway_state_age_seconds` | gauge | seconds since the last change (since start if none) |
//! | `herald_gateway_active_calls` | gauge | calls in progress there (see `herald_core::gateways`) |
//!
//! The collector reads the destinations' atomics at scrape time: the engines count without a
//! lock, and a scrape takes none of theirs. It asks for the sets in force at each scrape, so a
//! reload's sets are shown (a destination that stays keeps its counters).

use herald_core::gateways::{Gateways, HealthSnapshot, HealthState};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::Arc;
use std::time::Instant;

/// Exports every destination of the sets in force (register once with
/// `Stats::export_collector`).
pub struct GatewayMetrics {
    /// The sets in force now (the engines' latest configuration's).
    sets: Box<dyn Fn() -> Arc<Gateways> + Send + Sync>,
}

impl GatewayMetrics {
    pub fn new(sets: impl Fn() -> Arc<Gateways> + Send + Sync + 'static) -> GatewayMetrics {
        GatewayMetrics { sets: Box::new(sets) }
    }
}

impl std::fmt::Debug for GatewayMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayMetrics").field("sets", &(self.sets)().len()).finish()
    }
}

/// What one family shows of a snapshot.
enum Value {
    Gauge(i64),
    Seconds(f64),
    Counter(u64),
}

type Pick = fn(&HealthSnapshot, Instant) -> Value;

/// Name (counters without `_total`, which the encoder adds), help, type and value.
const FAMILIES: [(&str, &str, MetricType, Pick); 7] = [
    ("herald_gateway_up", "1 while the destination takes calls, 0 while it is down", MetricType::Gauge, |s, _| {
        Value::Gauge(i64::from(s.effective == HealthState::Up))
    }),
    ("herald_gateway_forced", "1 while an operator forces the destination's state", MetricType::Gauge, |s, _| {
        Value::Gauge(i64::from(s.forced.is_some()))
    }),
    ("herald_gateway_calls", "Call attempts sent to the destination", MetricType::Counter, |s, _| {
        Value::Counter(s.calls)
    }),
    (
        "herald_gateway_call_failures",
        "Call attempts that failed over from the destination (failover status or no answer)",
        MetricType::Counter,
        |s, _| Value::Counter(s.call_failures),
    ),
    (
        "herald_gateway_state_changes",
        "Changes between up and down made by the health rules",
        MetricType::Counter,
        |s, _| Value::Counter(s.changes),
    ),
    (
        "herald_gateway_state_age_seconds",
        "Seconds since the destination's last state change (since start if none)",
        MetricType::Gauge,
        |s, now| Value::Seconds(now.saturating_duration_since(s.since).as_secs_f64()),
    ),
    ("herald_gateway_active_calls", "Calls in progress at the destination", MetricType::Gauge, |s, _| {
        Value::Gauge(i64::try_from(s.active_calls).unwrap_or(i64::MAX))
    }),
];

impl Collector for GatewayMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gateways = (self.sets)();
        if gateways.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        let snapshots: Vec<(&str, &str, HealthSnapshot)> = gateways
            .iter()
            .flat_map(|set| {
                set.destinations.iter().map(move |d| (set.name.as_str(), d.uri.as_str(), d.health.snapshot()))
            })
            .collect();
        for (name, help, kind, pick) in FAMILIES {
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for (set, destination, snap) in &snapshots {
                let labels = [("set", *set), ("destination", *destination)];
                let sample = family.encode_family(&labels)?;
                match pick(snap, now) {
                    Value::Gauge(v) => ConstGauge::new(v).encode(sample)?,
                    Value::Seconds(v) => ConstGauge::new(v).encode(sample)?,
                    Value::Counter(v) => ConstCounter::new(v).encode(sample)?,
                }
            }
        }
        let mut probes = encoder.encode_descriptor(
            "herald_gateway_probes",
            "OPTIONS probes of the destination, by result",
            None,
            MetricType::Counter,
        )?;
        for (set, destination, snap) in &snapshots {
            for (result, n) in [("ok", snap.probes_ok), ("failed", snap.probes_failed)] {
                let labels = [("set", *set), ("destination", *destination), ("result", result)];
                ConstCounter::new(n).encode(probes.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::gateways::{Algorithm, Destination, GatewaySet, Health, HealthRules};
    use prometheus_client::registry::Registry;

    #[test]
    fn every_destination_has_its_samples() {
        let now = Instant::now();
        let dest =
            |uri: &str| Destination { uri: uri.into(), weight: 1, priority: 0, health: Arc::new(Health::new(now)) };
        let set = GatewaySet::new("pstn", Algorithm::RoundRobin, vec![dest("sip:192.0.2.1"), dest("sip:192.0.2.2")]);
        let rules = HealthRules { probe_failures_down: 1, call_failures_down: 0, probe_successes_up: 1 };
        let gw2 = set.destinations[1].health.clone();
        gw2.record_probe(now, false, &rules);
        gw2.call_started();
        gw2.active_inc();
        let gateways = Arc::new(Gateways::new(vec![set], None));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(GatewayMetrics::new(move || gateways.clone())));
        let mut text = String::new();
        prometheus_client::encoding::text::encode_registry(&mut text, &registry).unwrap();
        let one = r#"{set="pstn",destination="sip:192.0.2.2"}"#;
        for line in [
            format!("herald_gateway_up{one} 0"),
            r#"herald_gateway_up{set="pstn",destination="sip:192.0.2.1"} 1"#.to_string(),
            format!("herald_gateway_calls_total{one} 1"),
            format!("herald_gateway_active_calls{one} 1"),
            format!("herald_gateway_state_changes_total{one} 1"),
            r#"herald_gateway_probes_total{set="pstn",destination="sip:192.0.2.2",result="failed"} 1"#.to_string(),
            r#"herald_gateway_probes_total{set="pstn",destination="sip:192.0.2.2",result="ok"} 0"#.to_string(),
        ] {
            assert!(text.contains(&format!("{line}\n")), "no {line:?} in\n{text}");
        }
        assert!(text.contains("# TYPE herald_gateway_state_age_seconds gauge"), "{text}");
    }

    #[test]
    fn no_sets_no_families() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(GatewayMetrics::new(|| Arc::new(Gateways::default()))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode_registry(&mut text, &registry).unwrap();
        assert!(!text.contains("herald_gateway"), "{text}");
    }
}
