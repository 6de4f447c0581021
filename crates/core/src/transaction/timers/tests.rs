//! Tests of the transaction timers (`super`).

use super::*;

/// `next` picks what the flattened slots' `min_by_key` picks, over every filling of the three
/// slots from a few deadlines (ties included) and kinds, empty slots anywhere.
#[test]
fn next_is_the_minimum_of_the_armed_slots() {
    let t0 = Instant::now();
    let mut values = vec![None];
    for ms in [0, 1, 5] {
        for kind in [TimerKind::A, TimerKind::B, TimerKind::D, TimerKind::M] {
            values.push(Some((t0 + Duration::from_millis(ms), kind)));
        }
    }
    for &a in &values {
        for &b in &values {
            for &c in &values {
                let t = TimerTable { armed: [a, b, c] };
                let want = t.armed.iter().flatten().copied().min_by_key(|&(at, kind)| (at, kind.index()));
                assert_eq!(t.next(), want, "{:?}", t.armed);
            }
        }
    }
}

#[test]
fn absorbing_timers_are_scheduled_on_the_grid_and_the_others_on_time() {
    let epoch = Instant::now();
    let ms = Duration::from_millis;
    let grid = Timers { absorb_grid: Some(AbsorbGrid { epoch, step: ms(250) }), ..Timers::default() };
    for (after, on_grid) in [(0, 0), (1, 250), (249, 250), (250, 250), (251, 500), (5_000, 5_000)] {
        for kind in TimerKind::ALL {
            let want = if kind.absorbs() { epoch + ms(on_grid) } else { epoch + ms(after) };
            assert_eq!(grid.scheduled_at(epoch + ms(after), kind), want, "{kind:?} at {after} ms");
        }
    }
    let exact = Timers::default();
    assert_eq!(exact.scheduled_at(epoch + ms(1), TimerKind::K), epoch + ms(1), "no grid: exact");
    assert_eq!(grid.scheduled_at(epoch, TimerKind::A), epoch);
    let absorbing: Vec<_> = TimerKind::ALL.into_iter().filter(|k| k.absorbs()).collect();
    use TimerKind::*;
    assert_eq!(absorbing, [D, I, J, K, L, M]);
}

#[test]
fn re_arming_a_kind_moves_its_one_deadline_and_ties_go_to_the_kind_listed_first() {
    let t0 = Instant::now();
    let mut t = TimerTable::default();
    t.arm(TimerKind::B, t0, Duration::from_secs(32));
    t.arm(TimerKind::A, t0, Duration::from_millis(500));
    t.arm(TimerKind::A, t0, Duration::from_secs(1));
    assert_eq!(t.get(TimerKind::A), Some(t0 + Duration::from_secs(1)));
    assert_eq!(t.next(), Some((t0 + Duration::from_secs(1), TimerKind::A)));
    t.arm(TimerKind::D, t0, Duration::from_secs(1));
    assert_eq!(t.next(), Some((t0 + Duration::from_secs(1), TimerKind::A)), "A is listed before D");
    assert!(!t.take_due(TimerKind::B, t0 + Duration::from_secs(1)), "B is not due yet");
    assert!(t.take_due(TimerKind::A, t0 + Duration::from_secs(1)));
    assert!(!t.take_due(TimerKind::A, t0 + Duration::from_secs(1)), "a timer fires once");
    assert_eq!(t.next(), Some((t0 + Duration::from_secs(1), TimerKind::D)));
    t.clear(TimerKind::D);
    assert_eq!(t.next(), Some((t0 + Duration::from_secs(32), TimerKind::B)));
    t.clear_all();
    assert_eq!(t.next(), None);
}

#[test]
fn an_unrepresentable_deadline_disarms_the_timer() {
    let t0 = Instant::now();
    let mut t = TimerTable::default();
    t.arm(TimerKind::F, t0, Duration::from_secs(1));
    t.arm(TimerKind::F, t0, Duration::MAX);
    assert_eq!(t.get(TimerKind::F), None);
}

/// The table answers as a list of its armed pairs would, through any sequence of arming
/// (up to two kinds at once, as the machines do), clearing and firing.
#[test]
fn the_next_timer_is_the_earliest_of_those_armed() {
    let t0 = Instant::now();
    let mut t = TimerTable::default();
    let mut model: Vec<(Instant, TimerKind)> = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let kind = TimerKind::ALL[(x % 3) as usize * 4 % TimerKind::COUNT];
        let at = Duration::from_millis((x >> 8) % 5);
        match (x >> 4) % 4 {
            0 | 1 if model.len() < 2 || model.iter().any(|(_, k)| *k == kind) => {
                t.arm(kind, t0, at);
                model.retain(|(_, k)| *k != kind);
                model.push((t0 + at, kind));
            }
            2 => {
                t.clear(kind);
                model.retain(|(_, k)| *k != kind);
            }
            _ => {
                let now = t0 + Duration::from_millis((x >> 12) % 5);
                let due = model.iter().position(|(at, k)| *k == kind && *at <= now);
                assert_eq!(t.take_due(kind, now), due.is_some());
                if let Some(i) = due {
                    model.remove(i);
                }
            }
        }
        let earliest = model.iter().copied().min_by_key(|&(at, k)| (at, k.index()));
        assert_eq!(t.next(), earliest);
        for kind in TimerKind::ALL {
            assert_eq!(t.get(kind), model.iter().find(|(_, k)| *k == kind).map(|(at, _)| *at));
        }
    }
}

/// `client_started` leaves the table arming an empty one does, for both transports, every
/// pair of kinds it is started with and durations that are and are not representable.
#[test]
fn a_started_client_table_is_the_one_arming_leaves() {
    let t0 = Instant::now();
    let durations = [Duration::ZERO, Duration::from_micros(10), Duration::from_millis(500), Duration::MAX];
    for t1 in durations {
        for t2 in durations {
            let timers = Timers { t1, d: t2, ..Timers::default() };
            for reliable in [false, true] {
                for (retransmit, timeout) in
                    [(TimerKind::A, TimerKind::B), (TimerKind::E, TimerKind::F), (TimerKind::G, TimerKind::D)]
                {
                    let mut want = TimerTable::default();
                    if !reliable {
                        want.arm_retransmit(retransmit, t0, timers.initial(retransmit, reliable));
                    }
                    want.arm(timeout, t0, timers.initial(timeout, reliable));
                    let got = TimerTable::client_started(t0, &timers, reliable, retransmit, timeout);
                    assert_eq!(got, want, "{t1:?} {t2:?} {reliable} {retransmit:?}");
                }
            }
        }
    }
}

/// `clear_pair` clears as two `clear`s do, over every filling of the slots from a few
/// kinds and deadlines.
#[test]
fn clearing_a_pair_is_clearing_each() {
    let t0 = Instant::now();
    let kinds = [TimerKind::A, TimerKind::B, TimerKind::G, TimerKind::M];
    let mut values = vec![None];
    for ms in [0, 7] {
        values.extend(kinds.map(|k| Some((t0 + Duration::from_millis(ms), k))));
    }
    for &a in &values {
        for &b in &values {
            for &c in &values {
                for x in kinds {
                    for y in kinds {
                        let mut want = TimerTable { armed: [a, b, c] };
                        want.clear(x);
                        want.clear(y);
                        let mut got = TimerTable { armed: [a, b, c] };
                        got.clear_pair(x, y);
                        assert_eq!(got, want);
                    }
                }
            }
        }
    }
}

#[test]
fn a_table_is_small() {
    // Three slots of (Instant, kind): what a lingering transaction pays for its timers.
    assert!(std::mem::size_of::<TimerTable>() <= 80, "{}", std::mem::size_of::<TimerTable>());
}
