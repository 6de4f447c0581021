//! Tests of module `timer_c`: the memo of a live front against the full look-up it saves.

use crate::engine::context::{Branch, BranchState, Planned};
use crate::engine::timer_c::{Entry, TimerC};
use crate::transaction::TxId;
use std::time::{Duration, Instant};

/// Contexts and branches as the engine keeps them, small enough that random steps collide.
struct Model {
    contexts: Vec<Option<Vec<Branch>>>,
}

impl Model {
    fn live(&self, (at, TxId(sid), idx): Entry) -> bool {
        let branch = self.contexts.get(sid as usize).and_then(|c| c.as_ref()?.get(idx));
        branch.is_some_and(|b| b.timer_c.at().is_some_and(|t| t >= at) && b.is_pending())
    }
}

/// xorshift64: a fixed sequence, so that a failure replays.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Random steps of every kind that changes a branch's Timer C (arm, reset, disarm with a final
/// status or an abandonment, a context's end, a context's start), entries firing and
/// re-queued, each followed by `drop_stale`: the queue with the memo pops exactly what a queue
/// without it pops (its memo forgotten before every `drop_stale`), and `drop_stale`'s debug
/// assertion checks every hit of the memo against the look-up.
#[test]
fn the_remembered_front_drops_what_the_full_look_up_drops() {
    const CONTEXTS: u64 = 3;
    const BRANCHES: u64 = 2;
    let t0 = Instant::now();
    let mut state = 0x9e37_79b9_7f4a_7c15;
    for round in 0..300 {
        let mut model = Model { contexts: (0..CONTEXTS).map(|_| None).collect() };
        let (mut memo, mut plain) = (TimerC::default(), TimerC::default());
        let mut now = t0;
        for step in 0..200 {
            let r = next(&mut state);
            let (sid, idx) = (r % CONTEXTS, (r >> 8) % BRANCHES);
            let at = now + Duration::from_millis((r >> 16) % 50);
            let entry = (at, TxId(sid), idx as usize);
            let op = (r >> 32) % 9; // 8: time passes
            if op == 8 {
                // Timer C runs, as the engine's `handle_timeouts` and `on_timer_c` do.
                now += Duration::from_millis(10);
                while let Some(fired) = memo.pop_due(now) {
                    assert_eq!(plain.pop_due(now), Some(fired), "round {round} step {step}");
                    let (_, TxId(fsid), fidx) = fired;
                    let Some(b) = model.contexts[fsid as usize].as_mut().and_then(|c| c.get_mut(fidx)) else {
                        continue;
                    };
                    match b.timer_c.at() {
                        _ if !b.is_pending() => {}
                        Some(t) if t > fired.0 => {
                            memo.requeue((t, TxId(fsid), fidx));
                            plain.requeue((t, TxId(fsid), fidx));
                        }
                        Some(t) if t == fired.0 => {
                            b.state = BranchState::Done(408);
                            memo.disarm(&mut b.timer_c, TxId(fsid), fidx);
                            plain.disarm(&mut b.timer_c, TxId(fsid), fidx);
                        }
                        _ => {}
                    }
                }
                assert_eq!(plain.pop_due(now), None, "round {round} step {step}");
            } else if op == 0 || model.contexts[sid as usize].is_none() {
                if model.contexts[sid as usize].is_some() {
                    model.contexts[sid as usize] = None;
                    memo.context_ended(TxId(sid));
                    plain.context_ended(TxId(sid));
                } else {
                    model.contexts[sid as usize] = Some((0..BRANCHES).map(|_| Branch::new(Planned::spent())).collect());
                }
            } else {
                let branches = model.contexts[sid as usize].as_mut().unwrap();
                let b = &mut branches[idx as usize];
                // The two queues see the same branch, so each change is made to a copy and
                // the copy kept: the change to the branch is the same both times.
                let before = (b.timer_c, b.state, b.abandoned);
                let pending = b.is_pending();
                match op {
                    1 | 2 => memo.arm(&mut b.timer_c, pending, entry),
                    3 | 4 => memo.reset(&mut b.timer_c, pending, entry),
                    5 => {
                        b.state = BranchState::Done(487);
                        memo.disarm(&mut b.timer_c, TxId(sid), idx as usize);
                    }
                    6 => {
                        b.abandoned = true;
                        memo.disarm(&mut b.timer_c, TxId(sid), idx as usize);
                    }
                    _ => {}
                }
                let after = (b.timer_c, b.state, b.abandoned);
                (b.timer_c, b.state, b.abandoned) = before;
                match op {
                    1 | 2 => plain.arm(&mut b.timer_c, pending, entry),
                    3 | 4 => plain.reset(&mut b.timer_c, pending, entry),
                    5 | 6 => plain.disarm(&mut b.timer_c, TxId(sid), idx as usize),
                    _ => {}
                }
                (b.timer_c, b.state, b.abandoned) = after;
            }
            memo.drop_stale(|e| model.live(e));
            plain.forget_front();
            plain.drop_stale(|e| model.live(e));
            assert_eq!(memo.entries(), plain.entries(), "round {round} step {step}");
        }
    }
}
