//! The flows of phones behind NAT that herald, as their edge proxy, registered with another
//! registrar (its Path with a flow token, `engine::flows::edge_path`): herald holds no binding
//! for them, yet it is the hop whose address their NAT's mapping points at, so it is the one to
//! keep that mapping open (the registrar cannot send a CRLF through a proxy). The runtime's
//! keep-alive loop reads [`EdgeFlows::due`] every round.
//!
//! Bounded: at most [`MAX_EDGE_FLOWS`] flows; a REGISTER of a flow past it is not kept (its
//! phone keeps its mapping open with its own REGISTERs, as without herald), and every entry
//! ends with the registration it came from.

use herald_sip::Message;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Flows kept at most (a few MB of map at the cap).
pub const MAX_EDGE_FLOWS: usize = 100_000;
/// The longest a flow is kept without a new REGISTER (registrars rarely grant more).
const MAX_KEEP: Duration = Duration::from_secs(86_400);

/// The interval a REGISTER asks for: its first Contact's `expires`, else its Expires header,
/// else 3600 (RFC 3261 §10.2.1.1); 0 for an unregistration (also `Contact: *`).
pub fn requested_expires(req: &Message) -> u32 {
    let contact = req.contacts().next().and_then(Result::ok).and_then(|c| c.expires());
    contact.or_else(|| req.expires().ok().flatten()).unwrap_or(3600)
}

/// Told when a flow is noted (see [`EdgeFlows::set_alarm`]).
type FlowAlarm = Box<dyn Fn() + Send + Sync>;

/// UDP flows to keep open and until when; shared by every engine shard and the keep-alive loop.
#[derive(Default)]
pub struct EdgeFlows {
    flows: Mutex<HashMap<SocketAddr, Instant>>,
    alarm: OnceLock<FlowAlarm>,
}

impl std::fmt::Debug for EdgeFlows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeFlows").field("flows", &self.flows).finish_non_exhaustive()
    }
}

impl EdgeFlows {
    /// Installs the alarm told whenever a flow is noted (not when one is forgotten): how the
    /// keep-alive loop, asleep while it has nothing to keep open, learns that it has. Called
    /// outside the table's lock. Once only; returns the alarm back if one is installed.
    pub fn set_alarm(&self, alarm: FlowAlarm) -> Result<(), FlowAlarm> {
        self.alarm.set(alarm)
    }

    /// A REGISTER from `flow` was forwarded with herald's Path and asked for `expires` seconds
    /// (0: an unregistration, the flow is forgotten).
    pub fn note(&self, flow: SocketAddr, now: Instant, expires: u32) {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        if expires == 0 {
            flows.remove(&flow);
            return;
        }
        if flows.len() >= MAX_EDGE_FLOWS && !flows.contains_key(&flow) {
            flows.retain(|_, until| *until > now);
            if flows.len() >= MAX_EDGE_FLOWS {
                return;
            }
        }
        flows.insert(flow, now + Duration::from_secs(u64::from(expires)).min(MAX_KEEP));
        drop(flows);
        if let Some(alarm) = self.alarm.get() {
            alarm();
        }
    }

    /// The flows still registered at `now`; expired ones are forgotten.
    pub fn due(&self, now: Instant) -> Vec<SocketAddr> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        flows.retain(|_, until| *until > now);
        flows.keys().copied().collect()
    }

    pub fn len(&self) -> usize {
        self.flows.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_last_as_long_as_their_registration_and_no_longer() {
        let now = Instant::now();
        let e = EdgeFlows::default();
        let a: SocketAddr = "203.0.113.7:40001".parse().unwrap();
        let b: SocketAddr = "203.0.113.8:40002".parse().unwrap();
        e.note(a, now, 60);
        e.note(b, now, 3600);
        assert_eq!(e.due(now + Duration::from_secs(30)).len(), 2);
        assert_eq!(e.due(now + Duration::from_secs(61)), vec![b], "a's registration ran out");
        e.note(b, now, 0);
        assert!(e.due(now).is_empty(), "unregistered");
        // A year asked for is a day kept.
        e.note(a, now, u32::MAX);
        assert!(e.due(now + MAX_KEEP + Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let now = Instant::now();
        let e = EdgeFlows::default();
        for i in 0..MAX_EDGE_FLOWS as u32 {
            e.note(SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 5060)), now, 60);
        }
        let extra: SocketAddr = "203.0.113.9:5060".parse().unwrap();
        e.note(extra, now, 60);
        assert_eq!(e.len(), MAX_EDGE_FLOWS);
        assert!(!e.due(now).contains(&extra));
        // Once the others have expired there is room again.
        e.note(extra, now + Duration::from_secs(61), 60);
        assert_eq!(e.due(now + Duration::from_secs(61)), vec![extra]);
    }
}
