//! [`Gateways`]: every gateway set of a configuration, by name.

use super::set::GatewaySet;
use std::collections::HashMap;
use std::sync::Arc;

/// Every gateway set of one configuration (`EngineConfig::gateways`); empty by default.
#[derive(Debug, Default)]
pub struct Gateways {
    sets: Vec<Arc<GatewaySet>>,
    by_name: HashMap<String, usize>,
}

impl Gateways {
    /// The sets of a (new) configuration. With `previous` (the configuration it replaces, on
    /// a reload), a destination whose set name and URI are unchanged keeps its health: state,
    /// counters and active calls go on where they were, and calls in flight decrement the
    /// count they incremented. A later set of the same name replaces an earlier one (the
    /// configuration loader reports duplicates before this).
    pub fn new(sets: Vec<GatewaySet>, previous: Option<&Gateways>) -> Gateways {
        let mut out = Gateways::default();
        for mut set in sets {
            if let Some(old) = previous.and_then(|p| p.get(&set.name)) {
                for d in &mut set.destinations {
                    if let Some(o) = old.destination(&d.uri) {
                        d.health = o.health.clone();
                    }
                }
            }
            let name = set.name.clone();
            match out.by_name.get(&name) {
                Some(&i) => out.sets[i] = Arc::new(set),
                None => {
                    out.by_name.insert(name, out.sets.len());
                    out.sets.push(Arc::new(set));
                }
            }
        }
        out
    }

    /// The set named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<GatewaySet>> {
        self.by_name.get(name).map(|&i| &self.sets[i])
    }

    /// Every set, in configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<GatewaySet>> + '_ {
        self.sets.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateways::health::{Health, HealthState};
    use crate::gateways::set::{Algorithm, Destination};
    use std::time::Instant;

    fn set(name: &str, uris: &[&str]) -> GatewaySet {
        let now = Instant::now();
        let dests = uris
            .iter()
            .map(|u| Destination { uri: u.to_string(), weight: 1, priority: 0, health: Arc::new(Health::new(now)) })
            .collect();
        GatewaySet::new(name, Algorithm::RoundRobin, dests)
    }

    #[test]
    fn a_reload_keeps_the_health_of_unchanged_destinations() {
        let old = Gateways::new(vec![set("pstn", &["sip:192.0.2.1", "sip:192.0.2.2"])], None);
        let gw1 = &old.get("pstn").unwrap().destinations[0].health;
        gw1.force(Some(HealthState::Down));
        gw1.active_inc();
        let new = Gateways::new(
            vec![set("pstn", &["sip:192.0.2.1", "sip:192.0.2.3"]), set("media", &["sip:192.0.2.1"])],
            Some(&old),
        );
        let pstn = new.get("pstn").unwrap();
        assert!(Arc::ptr_eq(&pstn.destinations[0].health, gw1));
        assert!(!pstn.destinations[0].health.is_up());
        assert_eq!(pstn.destinations[0].health.active(), 1);
        assert!(pstn.destinations[1].health.is_up(), "a new destination starts up");
        // The same URI in another set is another destination.
        assert!(!Arc::ptr_eq(&new.get("media").unwrap().destinations[0].health, gw1));
        assert_eq!(new.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["pstn", "media"]);
        assert!(new.get("nope").is_none());
    }
}
