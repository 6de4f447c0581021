//! The location store with one million bindings present: memory per binding (printed before the
//! timings), lookup, and a REGISTER refresh.

mod common;

use common::{allocated, call_id, contact, fill, source, Source, N};
use criterion::{black_box, Criterion};
use herald_store::{Aor, ContactUpdate, LocationStore, Update};
use std::time::{Duration, Instant};

/// Indices spread over the whole store, in an order the CPU cannot predict.
fn sample(k: usize) -> Vec<usize> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..k)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % N as u64) as usize
        })
        .collect()
}

fn main() {
    let t0 = Instant::now();
    let store = LocationStore::<Source>::new();
    let before = allocated();
    let (aor_bytes, contact_bytes) = fill(&store, N, t0);
    let per = (allocated() - before - aor_bytes - contact_bytes) as f64 / N as f64;
    println!("location store: {N} bindings inserted in {:.2?}", t0.elapsed());
    println!("bytes per binding (excluding strings): {per:.0}");

    let picks = sample(1 << 16);
    let keys: Vec<Aor> = picks.iter().map(|&i| Aor::from_canonical(common::aor(i).into_bytes())).collect();
    let refresh: Vec<(String, String)> = picks.iter().map(|&i| (contact(i), call_id(i))).collect();
    let now = t0 + Duration::from_secs(1);

    let mut c = Criterion::default().configure_from_args();
    let mut k = 0;
    c.bench_function("lookup (1M bindings present)", |b| {
        b.iter(|| {
            k = (k + 1) & (keys.len() - 1);
            black_box(store.lookup(&keys[k], now))
        })
    });
    // CSeq only grows, so every refresh passes the RFC 3261 §10.3 step 7 check.
    let mut cseq = 1u32;
    c.bench_function("register refresh (1M bindings present)", |b| {
        b.iter(|| {
            k = (k + 1) & (keys.len() - 1);
            cseq += 1;
            let (uri, cid) = &refresh[k];
            let contacts = [ContactUpdate::new(uri, 3600)];
            let update = Update { call_id: cid, cseq, path: None, source: source(picks[k]), contacts: &contacts };
            black_box(store.apply(&keys[k], now, &update).is_ok())
        })
    });
    c.bench_function("expire, nothing due (1M bindings present)", |b| b.iter(|| black_box(store.expire(now, 256))));
    c.final_summary();
}
