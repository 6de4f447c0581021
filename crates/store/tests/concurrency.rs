//! Several threads registering, refreshing, looking up and expiring at once, on distinct AoRs
//! and on one shared AoR.

use herald_store::{Aor, Applied, ContactUpdate, LocationStore, StoreConfig, StoreError, Update};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const PER_THREAD: usize = 2000;

#[test]
fn distinct_aors_from_many_threads() {
    let store = Arc::new(LocationStore::<usize>::with_config(StoreConfig { shards: 16, ..StoreConfig::default() }));
    let t0 = Instant::now();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (store.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for i in 0..PER_THREAD {
                    let aor = Aor::parse(&format!("sip:t{t}u{i}@example.com")).unwrap();
                    let uri = format!("sip:t{t}u{i}@192.0.2.{}", i % 250);
                    let contacts = [ContactUpdate::new(&uri, 60 + (i % 2) as u32 * 3600)];
                    let update = Update { call_id: "cid", cseq: 1, path: None, source: t, contacts: &contacts };
                    store.apply(&aor, t0, &update).unwrap();
                    let got = store.lookup(&aor, t0);
                    assert_eq!((got.len(), got[0].source, &*got[0].contact), (1, t, uri.as_str()));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!((store.len(), store.aor_count()), (THREADS * PER_THREAD, THREADS * PER_THREAD));

    // Expire concurrently from every thread with small budgets: each due binding is removed
    // exactly once.
    let later = t0 + Duration::from_secs(60);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || {
                let mut removed = 0;
                loop {
                    let n = store.expire(later, 50);
                    assert!(n <= 50);
                    if n == 0 {
                        break removed;
                    }
                    removed += n;
                }
            })
        })
        .collect();
    let removed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    // A thread can stop early on a pass that found nothing while another held the work, so
    // finish from here.
    let rest = (0..).map(|_| store.expire(later, 1000)).take_while(|&n| n > 0).sum::<usize>();
    assert_eq!(removed + rest, THREADS * PER_THREAD / 2);
    assert_eq!(store.len(), THREADS * PER_THREAD / 2);
}

#[test]
fn one_aor_from_many_threads() {
    let store = Arc::new(LocationStore::<usize>::with_config(StoreConfig {
        max_bindings_per_aor: THREADS,
        ..StoreConfig::default()
    }));
    let aor = Aor::parse("sip:shared@example.com").unwrap();
    let t0 = Instant::now();
    // One Call-ID, CSeq handed out in increasing order but applied in whatever order the
    // threads reach the lock: every request either applies or fails with OutOfOrder, and the
    // stored CSeq only ever grows.
    let next = Arc::new(AtomicU32::new(1));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, aor, next, barrier) = (store.clone(), aor.clone(), next.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                // Two threads share each contact, so their CSeqs interleave on one binding.
                let uri = format!("sip:shared@192.0.2.{}", t % 2);
                let (mut ok, mut out_of_order) = (0, 0);
                for _ in 0..PER_THREAD {
                    let cseq = next.fetch_add(1, Ordering::SeqCst);
                    let contacts = [ContactUpdate::new(&uri, 3600)];
                    let update = Update { call_id: "same", cseq, path: None, source: t, contacts: &contacts };
                    match store.apply(&aor, t0, &update) {
                        Ok(Applied { bindings, .. }) => {
                            ok += 1;
                            assert!(bindings.len() <= THREADS);
                            let mine = bindings.iter().find(|b| *b.contact == *uri).unwrap();
                            assert_eq!((mine.cseq, mine.source), (cseq, t));
                        }
                        Err(StoreError::OutOfOrder { stored_cseq, request_cseq, .. }) => {
                            assert!(stored_cseq >= request_cseq);
                            out_of_order += 1;
                        }
                        Err(e) => panic!("unexpected {e}"),
                    }
                    let seen = store.lookup(&aor, t0);
                    assert!(!seen.is_empty() && seen.len() <= THREADS);
                }
                (ok, out_of_order)
            })
        })
        .collect();
    let results: Vec<(usize, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(results.iter().all(|&(ok, _)| ok > 0));
    eprintln!("(applied, out of order) per thread: {results:?}");
    assert_eq!(results.iter().map(|&(ok, ooo)| ok + ooo).sum::<usize>(), THREADS * PER_THREAD);
    let bindings = store.lookup(&aor, t0);
    assert_eq!(bindings.len(), 2);
    // The highest CSeq handed out to each thread's contact is what is stored, or a lower one if
    // that request lost its race; never anything above what was handed out.
    assert!(bindings.iter().all(|b| b.cseq < next.load(Ordering::SeqCst)));
}
