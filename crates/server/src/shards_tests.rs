//! Tests of module `shards`: the order of a shard's sends across threads, its clock and
//! published deadlines, and the walk over a worker's shards.

use super::*;

use crate::send_order::Flushes;
use bytes::Bytes;
use herald_core::{Peer, Transport};
use std::time::Duration;

fn udp_peer() -> Peer {
    Peer { transport: Transport::Udp, addr: ([127, 0, 0, 1], 9).into(), conn: None }
}

/// A thread's sender as `egress::Egress` is one: output queued until its flush, which puts
/// it on one wire that all senders share.
struct Queue {
    flushes: Arc<Flushes>,
    queued: Vec<Output>,
    wire: Arc<Mutex<Vec<Bytes>>>,
    worker: usize,
    /// As `Egress`: a flush owed nothing is skipped, its number not counted.
    owed: bool,
}

impl Queue {
    fn new(wire: &Arc<Mutex<Vec<Bytes>>>) -> Queue {
        Queue { flushes: Arc::default(), queued: Vec::new(), wire: wire.clone(), worker: 0, owed: false }
    }
}

impl Sender for Queue {
    fn flushes(&self) -> &Arc<Flushes> {
        &self.flushes
    }
    fn worker(&self) -> usize {
        self.worker
    }
    fn owe_flush(&mut self) {
        self.owed = true;
    }
    fn flush(&mut self) {
        for o in self.queued.drain(..) {
            if let Output::Send { bytes, .. } = o {
                self.wire.lock().unwrap().push(bytes);
            }
        }
        if std::mem::take(&mut self.owed) {
            self.flushes.completed();
        }
    }
}

/// A handler that answers each input with one datagram: its shard and the datagram's number
/// in the order it made them (big-endian).
struct Numbered(u8, u32);

impl SipHandler for Numbered {
    fn handle(&mut self, _now: Instant, _input: Input, out: &mut Vec<Output>) {
        self.1 += 1;
        let mut bytes = vec![self.0];
        bytes.extend_from_slice(&self.1.to_be_bytes());
        out.push(Output::Send { to: udp_peer(), bytes: Bytes::from(bytes) });
    }
    fn handle_timeouts(&mut self, _now: Instant, _out: &mut Vec<Output>) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn active_transactions(&self) -> usize {
        0
    }
    fn held_bytes(&self) -> usize {
        0
    }
}

/// The flake of tests/sipp_calls.rs `udp_caller_to_tcp_callee_double_record_route`: thread
/// A handles a message of a shard and has not flushed yet (a receiver in its batch, or
/// preempted) when thread B handles the next message of that shard and flushes at once.
/// B's call must wait for A's flush, so that the shard's first datagram leaves first. (B
/// is started 100 ms before A flushes: without the wait, B's datagram would leave first.)
#[test]
fn a_shards_datagrams_leave_in_the_order_it_made_them_across_threads() {
    let (shards, wire) = one_numbered_shard();
    let mut a = Queue::new(&wire);
    call_first_shard(&shards, &mut a);
    let b = std::thread::spawn({
        let (shards, wire) = (shards.clone(), wire.clone());
        move || {
            let mut b = Queue::new(&wire);
            call_first_shard(&shards, &mut b);
            b.flush();
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    a.flush();
    b.join().unwrap();
    assert_eq!(*wire.lock().unwrap(), [Bytes::from_static(&[0, 0, 0, 0, 1]), Bytes::from_static(&[0, 0, 0, 0, 2])]);
}

/// One shard that answers each input with a numbered datagram, and the wire its senders'
/// flushes write to.
fn one_numbered_shard() -> (Arc<Shards<Numbered>>, Arc<Mutex<Vec<Bytes>>>) {
    (Arc::new(Shards::new(1, 1, |_| Numbered(0, 0))), Arc::new(Mutex::new(Vec::new())))
}

/// `me`'s call on shard 0, its datagram queued for `me`'s next flush.
fn call_first_shard(shards: &Shards<Numbered>, me: &mut Queue) {
    let mut out = Vec::new();
    shards.handle(0, Input::TransportError { to: udp_peer() }, shards.timers().epoch(), &mut out, me);
    me.queued.append(&mut out);
}

/// A call that leaves output owes its sender a counted flush (`Sender::owe_flush`): a sender
/// may skip counting a flush nobody took the number of, but once this one has flushed, another
/// sender's call on the shard goes ahead. Were the flush not counted, B would wait for ever
/// (checked here with a time limit instead of a hang).
#[test]
fn a_flush_after_output_is_counted_so_the_next_sender_does_not_wait() {
    let (shards, wire) = one_numbered_shard();
    let mut a = Queue::new(&wire);
    a.flush();
    call_first_shard(&shards, &mut a);
    a.flush();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn({
        let (shards, wire) = (shards.clone(), wire.clone());
        move || {
            call_first_shard(&shards, &mut Queue::new(&wire));
            let _ = done_tx.send(());
        }
    });
    assert!(done_rx.recv_timeout(Duration::from_secs(5)).is_ok(), "B waited for a flush that had happened");
    assert_eq!(a.flushes.next(), 2, "the flush before any output is not counted, the one after it is");
}

/// Three threads handle messages of four shards in an interleaving of the scheduler's
/// choosing, each flushing every few messages: every shard's datagrams reach the wire in
/// the order the shard made them, and no thread waits for ever (a thread waits only with
/// nothing of its own pending, so no two wait for each other).
#[test]
fn shards_handled_by_many_threads_keep_their_order_without_deadlock() {
    const SHARDS: usize = 4;
    const ROUNDS: usize = 2000;
    let wire = Arc::new(Mutex::new(Vec::new()));
    let shards = Arc::new(Shards::new(SHARDS, 1, |i| Numbered(i as u8, 0)));
    let now = shards.timers().epoch();
    let start = Arc::new(std::sync::Barrier::new(3));
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let (shards, wire, start) = (shards.clone(), wire.clone(), start.clone());
            std::thread::spawn(move || {
                let mut me = Queue::new(&wire);
                let mut out = Vec::new();
                start.wait();
                for i in 0..ROUNDS {
                    let input = Input::TransportError { to: udp_peer() };
                    shards.handle((i * 7 + t) % SHARDS, input, now, &mut out, &mut me);
                    me.queued.append(&mut out);
                    // Between the call and the flush, as a preempted receiver is.
                    std::thread::yield_now();
                    if i % (t + 2) == 0 {
                        me.flush();
                    }
                }
                me.flush();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let wire = wire.lock().unwrap();
    assert_eq!(wire.len(), 3 * ROUNDS);
    let mut last = [0u32; SHARDS];
    for d in wire.iter() {
        let n = u32::from_be_bytes([d[1], d[2], d[3], d[4]]);
        let shard = usize::from(d[0]);
        assert_eq!(n, last[shard] + 1, "shard {shard}: datagram {n} after {}", last[shard]);
        last[shard] = n;
    }
}

/// A handler whose next deadline the test sets, and which records the `now` of each call.
struct Probe {
    next: Arc<Mutex<Option<Instant>>>,
    seen: Arc<Mutex<Vec<Instant>>>,
}

impl SipHandler for Probe {
    fn handle(&mut self, now: Instant, _input: Input, _out: &mut Vec<Output>) {
        self.seen.lock().unwrap().push(now);
    }
    fn handle_timeouts(&mut self, now: Instant, _out: &mut Vec<Output>) {
        self.seen.lock().unwrap().push(now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        *self.next.lock().unwrap()
    }
    fn active_transactions(&self) -> usize {
        0
    }
    fn held_bytes(&self) -> usize {
        0
    }
}

/// A shard's clock never goes back whatever order its callers come in, and every deadline a
/// call leaves that differs from the last published one is published (a call that leaves
/// it unchanged publishes nothing, and must not need to).
#[test]
fn a_shard_gets_the_latest_now_and_each_new_deadline_is_published() {
    let (next, seen) = (Arc::new(Mutex::new(None)), Arc::new(Mutex::new(Vec::new())));
    let shards = Shards::new(1, 1, |_| Probe { next: next.clone(), seen: seen.clone() });
    let t0 = shards.timers().epoch();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let input = || Input::TransportError { to: udp_peer() };
    let mut out = Vec::new();
    let mut me = Queue::new(&Arc::default());
    assert_eq!(shards.due(0), NO_DEADLINE);
    shards.handle(0, input(), at(10), &mut out, &mut me);
    shards.handle(0, input(), at(5), &mut out, &mut me);
    shards.handle_timeouts(0, at(7), &mut out, &mut me);
    shards.handle(0, input(), at(12), &mut out, &mut me);
    assert_eq!(*seen.lock().unwrap(), [at(10), at(10), at(10), at(12)]);
    let due = |s| shards.timers().encode(Some(at(s)));
    for deadline in [Some(40), Some(40), Some(30), Some(50), None, None, Some(20)] {
        *next.lock().unwrap() = deadline.map(at);
        shards.handle(0, input(), at(12), &mut out, &mut me);
        assert_eq!(shards.due(0), deadline.map_or(NO_DEADLINE, due), "{deadline:?}");
    }
}

/// The general path of a walk over a worker's shards: shard by shard through [`Shards::due`],
/// `run` on each due one; the earliest deadline, read after the run for a shard that ran.
fn walk_by_due(shards: &Shards<Probe>, first: usize, step: usize, now_at: u64, mut run: impl FnMut(usize)) -> u64 {
    let mut earliest = NO_DEADLINE;
    for i in (first..shards.len()).step_by(step) {
        let mut due = shards.due(i);
        if due <= now_at {
            run(i);
            due = shards.due(i);
        }
        earliest = earliest.min(due);
    }
    earliest
}

/// The walk over a worker's shards ([`Shards::run_due`], [`Shards::earliest`]) against the
/// general path, shard by shard through [`Shards::due`]: for every worker layout (first
/// shard, step) of up to 3 workers over 1 to 6 shards, deadlines and alarms from a small
/// set (none, past, now, later) and a run that leaves a shard with a later deadline, the
/// same shards run in the same order and the same earliest deadline comes back.
#[test]
fn the_walk_over_a_workers_shards_agrees_with_a_look_at_each() {
    let at = |t0: Instant, s: u64| t0 + Duration::from_secs(s);
    for count in 1..=6usize {
        let nexts: Vec<_> = (0..count).map(|_| Arc::new(Mutex::new(None))).collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shards = Shards::new(count, 1, |i| Probe { next: nexts[i].clone(), seen: seen.clone() });
        let t0 = shards.timers().epoch();
        let mut me = Queue::new(&Arc::default());
        let mut out = Vec::new();
        let choices = [None, Some(1), Some(5), Some(9)];
        for case in 0..4usize.pow(count as u32) {
            // Shard i's deadline is choice (case / 4^i) % 4; every third shard also rings an
            // alarm two seconds after it (or at 3 s when it has none).
            for (i, next) in nexts.iter().enumerate() {
                *next.lock().unwrap() = choices[case / 4usize.pow(i as u32) % 4].map(|s| at(t0, s));
                shards.handle(i, Input::TransportError { to: udp_peer() }, t0, &mut out, &mut me);
                shards.timers().take_alarm(i, NO_DEADLINE - 1);
                if (case + i) % 3 == 0 {
                    let deadline = next.lock().unwrap().map_or(3, |d| d.duration_since(t0).as_secs() + 2);
                    shards.timers().alarm(i, at(t0, deadline));
                }
            }
            let saved: Vec<_> = nexts.iter().map(|n| *n.lock().unwrap()).collect();
            let alarms: Vec<_> = (0..count).map(|i| shards.timers().alarm_of(i)).collect();
            let restore = |shards: &Shards<Probe>, me: &mut Queue, out: &mut Vec<Output>| {
                for (i, next) in nexts.iter().enumerate() {
                    *next.lock().unwrap() = saved[i];
                    shards.handle(i, Input::TransportError { to: udp_peer() }, t0, out, me);
                    shards.timers().take_alarm(i, NO_DEADLINE - 1);
                    if alarms[i] != NO_DEADLINE {
                        shards.timers().alarm(i, shards.timers().decode(alarms[i]).unwrap());
                    }
                }
            };
            for step in 1..=3usize {
                for first in 0..step {
                    for now_s in [0, 5, 20] {
                        let now_at = shards.timers().encode(Some(at(t0, now_s)));
                        // A run moves the shard's deadline to 30 s (its timers ran).
                        let run = |i: usize, ran: &mut Vec<usize>, me: &mut Queue, out: &mut Vec<Output>| {
                            ran.push(i);
                            shards.timers().take_alarm(i, now_at);
                            *nexts[i].lock().unwrap() = Some(at(t0, 30));
                            shards.handle_timeouts(i, at(t0, now_s), out, me);
                        };
                        assert_eq!(
                            shards.earliest(first, step),
                            (first..count).step_by(step).map(|i| shards.due(i)).min().unwrap_or(NO_DEADLINE)
                        );
                        let mut general_ran = Vec::new();
                        let general =
                            walk_by_due(&shards, first, step, now_at, |i| run(i, &mut general_ran, &mut me, &mut out));
                        restore(&shards, &mut me, &mut out);
                        let (mut me2, mut out2, mut walk_ran) = (Queue::new(&Arc::default()), Vec::new(), Vec::new());
                        let walk = shards.run_due(first, step, now_at, |i| run(i, &mut walk_ran, &mut me2, &mut out2));
                        restore(&shards, &mut me, &mut out);
                        let case = (count, case, step, first, now_s);
                        assert_eq!(walk_ran, general_ran, "{case:?}");
                        assert_eq!(walk, general, "{case:?}");
                    }
                }
            }
        }
    }
}

/// The walk notes due shards 64 reads at a time: over 150 shards, for every worker layout of
/// up to 3 workers and a spread of deadlines, it runs the shards the look at each would run,
/// in the same order, and finds the same earliest deadline.
#[test]
fn the_walk_agrees_with_a_look_at_each_past_64_shards() {
    let count = 150;
    let nexts: Vec<_> = (0..count).map(|_| Arc::new(Mutex::new(None))).collect();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shards = Shards::new(count, 3, |i| Probe { next: nexts[i].clone(), seen: seen.clone() });
    let t0 = shards.timers().epoch();
    let (mut me, mut out) = (Queue::new(&Arc::default()), Vec::new());
    for pattern in 0..5u64 {
        for step in 1..=3usize {
            for first in 0..step {
                // Shard i due at (i * 7 + pattern) % 11 s, every fifth without a deadline.
                let set = |shards: &Shards<Probe>, me: &mut Queue, out: &mut Vec<Output>| {
                    for (i, next) in nexts.iter().enumerate() {
                        let s = (i as u64 * 7 + pattern) % 11;
                        *next.lock().unwrap() = (i % 5 != 0).then(|| t0 + Duration::from_secs(s));
                        shards.handle(i, Input::TransportError { to: udp_peer() }, t0, out, me);
                    }
                };
                let now_at = shards.timers().encode(Some(t0 + Duration::from_secs(4)));
                let run = |i: usize, ran: &mut Vec<usize>, me: &mut Queue, out: &mut Vec<Output>| {
                    ran.push(i);
                    *nexts[i].lock().unwrap() = Some(t0 + Duration::from_secs(30 + i as u64));
                    shards.handle_timeouts(i, t0, out, me);
                };
                set(&shards, &mut me, &mut out);
                let mut general_ran = Vec::new();
                let general =
                    walk_by_due(&shards, first, step, now_at, |i| run(i, &mut general_ran, &mut me, &mut out));
                set(&shards, &mut me, &mut out);
                let (mut me2, mut out2, mut walk_ran) = (Queue::new(&Arc::default()), Vec::new(), Vec::new());
                let walk = shards.run_due(first, step, now_at, |i| run(i, &mut walk_ran, &mut me2, &mut out2));
                assert!(!walk_ran.is_empty() && walk_ran.len() < count / step);
                assert_eq!(walk_ran, general_ran, "{pattern} {step} {first}");
                assert_eq!(walk, general, "{pattern} {step} {first}");
            }
        }
    }
}

/// A handler whose load (`transactions()`, `held_bytes()`) the test sets.
struct Loaded(Arc<Mutex<(usize, usize)>>);

impl SipHandler for Loaded {
    fn handle(&mut self, _now: Instant, _input: Input, _out: &mut Vec<Output>) {}
    fn handle_timeouts(&mut self, _now: Instant, _out: &mut Vec<Output>) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn active_transactions(&self) -> usize {
        self.0.lock().unwrap().0
    }
    fn held_bytes(&self) -> usize {
        self.0.lock().unwrap().1
    }
}

/// The load summed from the workers' shares is the sum over the shards' values after their
/// last calls (what the walk over every shard's cached values gave), whichever workers made
/// the calls: 20,000 random calls of 3 workers' threads into 70 shards, each leaving the
/// shard a random load (often less than another worker counted, so shares go "negative"),
/// checked after every call; the values a shard starts with count too.
#[test]
fn the_workers_shares_sum_to_the_load_over_all_shards() {
    const SHARDS: usize = 70;
    let loads: Vec<_> = (0..SHARDS).map(|i| Arc::new(Mutex::new((i % 3, 100 * i)))).collect();
    let shards = Shards::new(SHARDS, 3, |i| Loaded(loads[i].clone()));
    let sum = |loads: &[Arc<Mutex<(usize, usize)>>]| {
        loads.iter().fold((0, 0), |(t, b), l| {
            let l = l.lock().unwrap();
            (t + l.0, b + l.1)
        })
    };
    assert_eq!(shards.load(), sum(&loads));
    let wire = Arc::default();
    // Worker 3 is not one of the three: counted in the first share, never lost.
    let mut senders: Vec<_> = (0..4)
        .map(|w| {
            let mut q = Queue::new(&wire);
            q.worker = w;
            q
        })
        .collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as usize
    };
    let (mut out, now) = (Vec::new(), shards.timers().epoch());
    for step in 0..20_000 {
        let (shard, worker) = (next(SHARDS as u64), next(4));
        // Mostly small changes, sometimes back to nothing or a jump.
        *loads[shard].lock().unwrap() = match next(4) {
            0 => (0, 0),
            1 => (next(1 << 20), next(1 << 40)),
            _ => (next(40), next(70_000)),
        };
        if step % 2 == 0 {
            shards.handle(shard, Input::TransportError { to: udp_peer() }, now, &mut out, &mut senders[worker]);
        } else {
            shards.handle_timeouts(shard, now, &mut out, &mut senders[worker]);
        }
        assert_eq!(shards.load(), sum(&loads), "step {step}");
        assert_eq!(shards.transactions(), sum(&loads).0);
    }
}

/// Read while other threads add to them, the shares may sum below zero (a decrease seen
/// without the increase it undoes): that reads as no load, not as a wrapped-around huge one
/// that would refuse every new request.
#[test]
fn a_sum_of_shares_below_zero_reads_as_zero() {
    let shards = Shards::new(4, 2, |_| Loaded(Arc::new(Mutex::new((0, 0)))));
    shards.shares[1].transactions.store(5usize.wrapping_neg(), Ordering::Relaxed);
    shards.shares[1].held.store(700usize.wrapping_neg(), Ordering::Relaxed);
    shards.shares[0].held.store(300, Ordering::Relaxed);
    assert_eq!(shards.load(), (0, 0));
    shards.shares[0].transactions.store(7, Ordering::Relaxed);
    shards.shares[0].held.store(1_000, Ordering::Relaxed);
    assert_eq!(shards.load(), (2, 300));
}

#[test]
fn counts_are_powers_of_two_and_at_least_64() {
    assert_eq!(shard_count(1), 64);
    assert_eq!(shard_count(4), 64);
    assert_eq!(shard_count(5), 128);
    assert_eq!(shard_count(16), 256);
    assert_eq!(shard_count(17), 512);
}

/// A handler that starts a transaction on every other input (the first, the third, ...) and
/// ends one on each timer run.
struct StartsEveryOther {
    calls: usize,
    held: usize,
}

impl SipHandler for StartsEveryOther {
    fn handle(&mut self, _now: Instant, _input: Input, _out: &mut Vec<Output>) {
        self.calls += 1;
        if self.calls % 2 == 1 {
            self.held += 1;
        }
    }
    fn handle_timeouts(&mut self, _now: Instant, _out: &mut Vec<Output>) {
        self.held = self.held.saturating_sub(1);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn active_transactions(&self) -> usize {
        self.held
    }
    fn held_bytes(&self) -> usize {
        0
    }
}

/// `handle` says whether the input left its shard holding more transactions than before: what
/// the per-source budget charges an answered request for (module `source_budget`: a challenge
/// answered statelessly holds nothing). A timer run that ended one in between does not make
/// the next input that starts none look like one that did.
#[test]
fn handle_says_whether_the_input_started_a_transaction() {
    let shards = Shards::new(1, 1, |_| StartsEveryOther { calls: 0, held: 0 });
    let wire = Arc::new(Mutex::new(Vec::new()));
    let mut me = Queue::new(&wire);
    let now = shards.timers().epoch();
    let mut out = Vec::new();
    let mut handle = |shards: &Shards<StartsEveryOther>| {
        shards.handle(0, Input::TransportError { to: udp_peer() }, now, &mut out, &mut me)
    };
    assert!(handle(&shards), "the first input started one");
    assert!(!handle(&shards), "the second started none");
    assert!(handle(&shards), "the third started one");
    shards.handle_timeouts(0, now, &mut Vec::new(), &mut Queue::new(&wire));
    assert!(!handle(&shards), "the fourth started none, after a timer ended one");
    assert_eq!(shards.transactions(), 1);
}
