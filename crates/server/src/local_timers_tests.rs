use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A runtime as a worker's: current-thread, I/O only (no tokio time driver).
fn io_only() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_sleep_fires_at_its_deadline_not_before_without_tokios_time_driver() {
    io_only().block_on(async {
        let at = Instant::now() + ms(30);
        let mut sleep = Sleep::until(at);
        assert!(!sleep.is_elapsed());
        (&mut sleep).await;
        assert!(Instant::now() >= at);
        assert!(sleep.is_elapsed());
        // Set again: no longer elapsed until the new deadline.
        sleep.reset(Instant::now() + ms(10));
        assert!(!sleep.is_elapsed());
        (&mut sleep).await;
        assert!(sleep.is_elapsed());
    });
}

#[test]
fn timers_fire_in_deadline_order_after_resets_and_drops() {
    io_only().block_on(async {
        let start = Instant::now();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Deadlines given out of order; 3 and 4 are moved (one later, one earlier) after
        // registering; 5 is dropped before its deadline.
        for (i, d) in [(0usize, 40u64), (1, 10), (2, 25), (3, 5), (4, 60), (5, 15)] {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = Sleep::until(start + ms(d));
                if i >= 3 {
                    // Registered, then changed.
                    let _ = poll_fn(|cx| Poll::Ready(s.poll_elapsed(cx))).await;
                    match i {
                        3 => s.reset(start + ms(50)),
                        4 => s.reset(start + ms(20)),
                        _ => return,
                    }
                }
                (&mut s).await;
                assert!(Instant::now() >= s.deadline());
                order.lock().unwrap().push(i);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 4, 2, 0, 3]);
        // Everything fired or dropped: nothing is left queued.
        TIMERS.with(|t| assert!(t.borrow().queue.is_empty()));
    });
}

#[test]
fn timeout_gives_the_output_or_elapses() {
    io_only().block_on(async {
        assert_eq!(timeout(ms(50), async { 7 }).await, Ok(7));
        let started = Instant::now();
        assert_eq!(timeout(ms(20), std::future::pending::<()>()).await, Err(()));
        assert!(started.elapsed() >= ms(20));
        let started = Instant::now();
        sleep(ms(15)).await;
        assert!(started.elapsed() >= ms(15));
    });
}

#[test]
fn a_later_runtime_on_the_same_thread_starts_its_own_driver() {
    for _ in 0..3 {
        let rt = io_only();
        rt.block_on(sleep(ms(5)));
        // One still queued when the runtime goes: forgotten with it.
        let pending = rt.spawn(sleep(Duration::from_secs(3600)));
        rt.block_on(tokio::task::yield_now());
        drop(rt);
        drop(pending);
    }
    TIMERS.with(|t| assert!(t.borrow().fd.is_none() && t.borrow().queue.is_empty()));
}

#[test]
fn many_timers_each_fire_once_at_or_after_their_deadline() {
    io_only().block_on(async {
        let start = Instant::now();
        let fired = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        // A simple linear congruential sequence: deadlines 0-39 ms, some sharing an instant.
        let mut x: u64 = 12345;
        for _ in 0..200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = start + Duration::from_micros((x >> 33) % 40_000);
            let fired = fired.clone();
            tasks.push(tokio::spawn(async move {
                Sleep::until(at).await;
                assert!(Instant::now() >= at);
                fired.fetch_add(1, Ordering::Relaxed);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(fired.load(Ordering::Relaxed), 200);
        TIMERS.with(|t| {
            let t = t.borrow();
            assert!(t.queue.is_empty());
            assert_eq!(t.free.len(), t.slots.len(), "every slot released");
        });
    });
}

#[test]
fn start_starts_one_driver_and_sleeps_use_it() {
    io_only().block_on(async {
        start().unwrap();
        let fd = TIMERS.with(|t| t.borrow().fd.clone()).expect("started");
        start().unwrap();
        let again = TIMERS.with(|t| t.borrow().fd.clone()).expect("still started");
        assert!(Arc::ptr_eq(&fd, &again), "one driver per thread");
        let started = Instant::now();
        sleep(ms(5)).await;
        assert!(started.elapsed() >= ms(5));
    });
}
