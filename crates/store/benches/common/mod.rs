//! Shared by `benches/bindings.rs` and `examples/binding_memory.rs`: a counting allocator and
//! the one-million-binding fill. Each user takes what it needs.
#![allow(dead_code)]

use herald_store::{Aor, ContactUpdate, LocationStore, Update};
use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Counts the bytes currently allocated (requested sizes, not the allocator's rounding).
pub struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// Stand-in for `herald_core::Peer` (transport, socket address, optional connection id) with
/// the same size (56 bytes): herald-core depends on this crate, not the other way round.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub transport: u8,
    pub addr: SocketAddr,
    pub conn: Option<u64>,
}

pub const N: usize = 1_000_000;

pub fn aor(i: usize) -> String {
    format!("user{i}@example.com")
}

pub fn contact(i: usize) -> String {
    format!("sip:user{i}@192.0.2.{}:5060;transport=udp", i % 250)
}

/// A 32-character Call-ID, a typical length for UAs that use a UUID or a random hex string.
pub fn call_id(i: usize) -> String {
    format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

pub fn source(i: usize) -> Source {
    Source { transport: 0, addr: SocketAddr::from((Ipv4Addr::new(192, 0, 2, (i % 250) as u8), 5060)), conn: None }
}

/// Registers `n` distinct AoRs with one binding each; returns the total length of the AoR keys
/// and of the contact strings, which the per-binding figure excludes.
pub fn fill(store: &LocationStore<Source>, n: usize, now: Instant) -> (usize, usize) {
    let (mut aor_bytes, mut contact_bytes) = (0, 0);
    for i in 0..n {
        let (key, uri, cid) = (aor(i), contact(i), call_id(i));
        aor_bytes += key.len();
        contact_bytes += uri.len();
        let contacts = [ContactUpdate::new(&uri, 3600)];
        let update = Update { call_id: &cid, cseq: 1, path: None, source: source(i), contacts: &contacts };
        if let Err(e) = store.apply(&Aor::from_canonical(key.into_bytes()), now, &update) {
            panic!("fill failed at {i}: {e}");
        }
    }
    (aor_bytes, contact_bytes)
}

/// `VmRSS` and `VmHWM` from /proc/self/status, in KiB (None where there is no procfs).
pub fn rss_kib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field =
        |name: &str| status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse::<u64>().ok();
    Some((field("VmRSS:")?, field("VmHWM:")?))
}
