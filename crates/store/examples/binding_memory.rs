//! Memory of the location store at one million bindings.
//!
//! `cargo run --release -p herald-store --example binding_memory [N]`
//!
//! Registers N (default 1,000,000) distinct AoRs "user{i}@example.com", each with the contact
//! "sip:user{i}@192.0.2.{i%250}:5060;transport=udp" and a 32-character Call-ID, and prints the
//! heap bytes per binding beyond the AoR and contact strings (counted by a wrapping global
//! allocator: requested sizes, so the C allocator's own overhead shows only in the RSS).

#[path = "../benches/common/mod.rs"]
mod common;

use common::{allocated, fill, rss_kib, Source, N};
use herald_store::{Binding, LocationStore};
use std::time::Instant;

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(N);
    let rss_before = rss_kib();
    let store = LocationStore::<Source>::new();
    let before = allocated();
    let started = Instant::now();
    let (aor_bytes, contact_bytes) = fill(&store, n, started);
    let elapsed = started.elapsed();
    let after = allocated();
    let total = after - before;
    let per = (total - aor_bytes - contact_bytes) as f64 / n as f64;
    println!(
        "bindings: {} in {} AoRs, inserted in {:.2?} ({:.0} ns each)",
        store.len(),
        store.aor_count(),
        elapsed,
        elapsed.as_nanos() as f64 / n as f64
    );
    println!("size_of::<Binding<Source>>() = {} bytes", std::mem::size_of::<Binding<Source>>());
    println!("heap allocated by the store: {:.1} MiB", total as f64 / 1048576.0);
    println!(
        "average AoR key {:.1} bytes, contact {:.1} bytes",
        aor_bytes as f64 / n as f64,
        contact_bytes as f64 / n as f64
    );
    println!("bytes per binding (excluding strings): {per:.0}");
    match (rss_before, rss_kib()) {
        (Some((rss0, _)), Some((rss, hwm))) => println!(
            "RSS: {:.1} MiB total ({:.1} MiB more than before the fill), peak {:.1} MiB",
            rss as f64 / 1024.0,
            (rss - rss0) as f64 / 1024.0,
            hwm as f64 / 1024.0
        ),
        _ => println!("RSS: /proc/self/status not available"),
    }
    // Keep the store alive until after the measurement.
    drop(store);
}
