//! The runtime's part of NAT traversal (`[nat]`): keep-alives to registered phones behind NAT.
//! Detection and the Contact fix are the engine's (`herald_core::nat`); what needs a socket, a
//! clock and a loop is here.
//!
//! Metrics (counters, registered with `Stats::export_metric` when the loop starts):
//!
//! | family | what |
//! | --- | --- |
//! | `herald_nat_keepalives_sent_total` | keep-alives sent (CRLF datagrams or OPTIONS) |
//! | `herald_nat_keepalives_answered_total` | OPTIONS keep-alives answered (any final response) |
//! | `herald_nat_keepalive_bindings_dropped_total` | bindings removed after `keepalive_max_failures` unanswered OPTIONS in a row |
//! | `herald_nat_keepalive_rounds_total` | keep-alive rounds run (none while no NATed UDP binding or edge flow is stored) |

mod keepalive;
#[cfg(test)]
mod tests;
mod wake;

use crate::bind::WorkerSockets;
use crate::config::{Keepalive, Nat};
use crate::shared::Shared;
use herald_core::nat::EdgeFlows;
use herald_core::registrar::Location;
use keepalive::{KeepaliveCounters, Keepalives, MAX_IN_FLIGHT};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use tokio::runtime::Handle;
use wake::Wake;

/// The running keep-alive loop; dropping it stops the loop.
pub(crate) struct KeepaliveTask(tokio::task::JoinHandle<()>);

impl Drop for KeepaliveTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Copies of one worker's UDP sockets with their bound addresses: keep-alives leave from
/// herald's SIP port (the address the phone's NAT mapping points at). Take them before the
/// workers get their sockets.
pub(crate) fn senders(sockets: &[WorkerSockets]) -> Vec<(SocketAddr, UdpSocket)> {
    let Some(first) = sockets.first() else { return Vec::new() };
    first.udp.iter().filter_map(|s| Some((s.local_addr().ok()?, s.try_clone().ok()?))).collect()
}

/// Starts the keep-alive loop on `runtime` as `[nat]` says, over `store` and the flows herald
/// registered elsewhere as an edge proxy (`edge`, the registrar's `edge_flows`); `None` when
/// keep-alives are off or herald has no UDP socket. `shards`: the engine shard count (for
/// OPTIONS keep-alives, which go through the engines).
pub(crate) fn start(
    runtime: &Handle,
    nat: &Nat,
    store: Arc<Location>,
    edge: Arc<EdgeFlows>,
    senders: Vec<(SocketAddr, UdpSocket)>,
    shared: &Shared,
    shards: usize,
) -> Option<KeepaliveTask> {
    let interval = nat.keepalive_interval()?;
    if senders.is_empty() {
        tracing::warn!("[nat] keep-alives need a UDP listener; none is configured");
        return None;
    }
    let (pinger, reports) = match nat.keepalive {
        Keepalive::Options => match shared.pings.client(shared.ctl.clone(), shards, MAX_IN_FLIGHT) {
            Some((p, r)) => (Some(p), Some(r)),
            None => {
                tracing::error!("NAT keep-alives cannot start: no room for another ping client");
                return None;
            }
        },
        _ => (None, None),
    };
    let counters = KeepaliveCounters::default();
    let stats = &shared.stats;
    stats.export_metric(
        "herald_nat_keepalives_sent",
        "NAT keep-alives sent to UDP bindings behind NAT (CRLF datagrams or OPTIONS)",
        counters.sent.clone(),
    );
    stats.export_metric(
        "herald_nat_keepalives_answered",
        "OPTIONS NAT keep-alives answered (any final response)",
        counters.answered.clone(),
    );
    stats.export_metric(
        "herald_nat_keepalive_bindings_dropped",
        "Bindings removed after [nat] keepalive_max_failures unanswered OPTIONS keep-alives in a row",
        counters.dropped.clone(),
    );
    stats.export_metric(
        "herald_nat_keepalive_rounds",
        "NAT keep-alive rounds run (none while no NATed UDP binding or edge flow is stored)",
        counters.rounds.clone(),
    );
    tracing::info!(mode = ?nat.keepalive, interval_s = interval.as_secs(), "NAT keep-alives started");
    let detect = nat.engine().detect;
    let wake = Wake::install(&store, Some(&edge), move |b| keepalive::needs_keepalive(b, detect));
    let ka = Keepalives::new(nat, store, Some(edge), senders, pinger, counters);
    Some(KeepaliveTask(runtime.spawn(keepalive::run(ka, interval, wake, reports))))
}
