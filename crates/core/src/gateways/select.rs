//! The order in which one call tries a set's destinations (the algorithms of [`Algorithm`]).
//! Pure functions of the set, the destinations that are up and the call's keys: no clock, no
//! randomness (the weighted draw comes from the set's call counter).

use super::set::{Algorithm, GatewaySet};
use crate::hash::fnv1a;
use std::sync::atomic::Ordering::Relaxed;

/// What of a call the algorithms look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallKeys<'a> {
    pub call_id: &'a [u8],
    /// The From URI's user, unescaped (empty when it has none).
    pub from_user: &'a [u8],
}

/// The indexes of `set`'s up destinations, in the order this call tries them (every up
/// destination, the caller cuts it to the attempts allowed). Advances the set's call counter
/// for the algorithms that use it.
pub fn order(set: &GatewaySet, keys: CallKeys<'_>) -> Vec<usize> {
    let mut up: Vec<usize> = (0..set.destinations.len()).filter(|&i| set.destinations[i].health.is_up()).collect();
    if up.len() <= 1 {
        return up;
    }
    match set.algorithm {
        Algorithm::RoundRobin => {
            let start = (set.counter.fetch_add(1, Relaxed) % up.len() as u64) as usize;
            up.rotate_left(start);
        }
        Algorithm::LeastActive => {
            // Round-robin first, so that equally loaded destinations take turns; the sort is
            // stable.
            let start = (set.counter.fetch_add(1, Relaxed) % up.len() as u64) as usize;
            up.rotate_left(start);
            up.sort_by_key(|&i| set.destinations[i].health.active());
        }
        Algorithm::Priority => up.sort_by_key(|&i| set.destinations[i].priority),
        Algorithm::HashCallId => rendezvous(set, &mut up, fnv1a(keys.call_id)),
        Algorithm::HashFromUser => rendezvous(set, &mut up, fnv1a(keys.from_user)),
        Algorithm::Weighted => {
            let draw = mix(set.counter.fetch_add(1, Relaxed) ^ fnv1a(set.name.as_bytes()));
            weighted_rendezvous(set, &mut up, draw);
        }
    }
    up
}

/// Highest random weight (rendezvous) hashing, RFC 2991's "hash-threshold" alternative: each
/// destination scores hash(key, destination URI) and the highest goes first. A key keeps its
/// destination while that one is up, and the calls of a destination that goes down spread
/// over the others instead of all moving to its neighbour.
fn rendezvous(set: &GatewaySet, up: &mut [usize], key: u64) {
    up.sort_by_key(|&i| std::cmp::Reverse(mix(key ^ fnv1a(set.destinations[i].uri.as_bytes()))));
}

/// Weighted rendezvous (Schindelhauer and Schomaker): destination i scores -ln(u_i) / w_i with
/// u_i uniform in (0, 1] from hash(draw, i); the lowest goes first, which happens with
/// probability w_i / sum(w), and the rest follow in a weighted draw without replacement.
/// Weight 0 goes last, in configuration order.
fn weighted_rendezvous(set: &GatewaySet, up: &mut [usize], draw: u64) {
    let score = |i: usize| {
        let w = set.destinations[i].weight;
        if w == 0 {
            return f64::INFINITY;
        }
        let h = mix(draw ^ fnv1a(set.destinations[i].uri.as_bytes()));
        // 53 random bits, shifted off zero: u in (0, 1].
        let u = ((h >> 11) + 1) as f64 / (1u64 << 53) as f64;
        -u.ln() / f64::from(w)
    };
    up.sort_by(|&a, &b| score(a).total_cmp(&score(b)));
}

/// SplitMix64's finalizer: spreads every input bit over the output (FNV's high bits alone are
/// weak for short keys, and consecutive counters differ in one bit).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateways::health::{Health, HealthState};
    use crate::gateways::set::Destination;
    use std::sync::Arc;
    use std::time::Instant;

    fn set(algorithm: Algorithm, weights: &[(u32, u32)]) -> GatewaySet {
        let now = Instant::now();
        let dests = weights
            .iter()
            .enumerate()
            .map(|(i, &(weight, priority))| Destination {
                uri: format!("sip:192.0.2.{}:5060", i + 1),
                weight,
                priority,
                health: Arc::new(Health::new(now)),
            })
            .collect();
        GatewaySet::new("pstn", algorithm, dests)
    }

    fn keys(call_id: &str) -> CallKeys<'_> {
        CallKeys { call_id: call_id.as_bytes(), from_user: b"" }
    }

    /// How many of `calls` calls each destination gets first.
    fn firsts(s: &GatewaySet, calls: usize) -> Vec<usize> {
        let mut n = vec![0; s.destinations.len()];
        for c in 0..calls {
            let id = format!("call-{c}");
            n[order(s, keys(&id))[0]] += 1;
        }
        n
    }

    #[test]
    fn round_robin_takes_turns_and_skips_a_down_destination() {
        let s = set(Algorithm::RoundRobin, &[(1, 0); 3]);
        let o: Vec<Vec<usize>> = (0..3).map(|_| order(&s, keys("x"))).collect();
        assert_eq!(o, [vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]);
        s.destinations[1].health.force(Some(HealthState::Down));
        assert_eq!(firsts(&s, 1000), [500, 0, 500]);
    }

    #[test]
    fn weighted_spreads_calls_by_weight() {
        let s = set(Algorithm::Weighted, &[(1, 0), (3, 0), (6, 0)]);
        let n = firsts(&s, 10_000);
        for (got, want) in n.iter().zip([1_000, 3_000, 6_000]) {
            assert!(got.abs_diff(want) < 250, "{n:?}");
        }
        // The failover order is a full permutation of the up destinations.
        let mut o = order(&s, keys("x"));
        o.sort();
        assert_eq!(o, [0, 1, 2]);
        // The same counter gives the same draw: deterministic.
        let again = set(Algorithm::Weighted, &[(1, 0), (3, 0), (6, 0)]);
        assert_eq!(firsts(&again, 10_000), n);
    }

    #[test]
    fn weight_zero_is_the_last_resort() {
        let s = set(Algorithm::Weighted, &[(0, 0), (1, 0)]);
        for _ in 0..100 {
            assert_eq!(order(&s, keys("x")), [1, 0]);
        }
    }

    #[test]
    fn hash_call_id_sticks_and_moves_only_the_down_destinations_calls() {
        let s = set(Algorithm::HashCallId, &[(1, 0); 4]);
        let before: Vec<usize> = (0..400).map(|c| order(&s, keys(&format!("c{c}")))[0]).collect();
        let again: Vec<usize> = (0..400).map(|c| order(&s, keys(&format!("c{c}")))[0]).collect();
        assert_eq!(before, again, "a Call-ID always gets the same destination");
        let mut per = [0; 4];
        for &d in &before {
            per[d] += 1;
        }
        assert!(per.iter().all(|&n| (60..140).contains(&n)), "{per:?}");
        s.destinations[2].health.force(Some(HealthState::Down));
        for (c, &d) in before.iter().enumerate() {
            let now = order(&s, keys(&format!("c{c}")))[0];
            if d != 2 {
                assert_eq!(now, d, "call c{c} moved although its destination is up");
            } else {
                assert_ne!(now, 2);
            }
        }
    }

    #[test]
    fn hash_from_user_sticks_to_the_caller() {
        let s = set(Algorithm::HashFromUser, &[(1, 0); 3]);
        let k =
            |call: &'static str, user: &'static str| CallKeys { call_id: call.as_bytes(), from_user: user.as_bytes() };
        let first = order(&s, k("a", "+4930111"));
        assert_eq!(order(&s, k("b", "+4930111")), first, "another call of the same caller");
        let users: std::collections::HashSet<usize> =
            (0..50).map(|u| order(&s, CallKeys { call_id: b"z", from_user: format!("{u}").as_bytes() })[0]).collect();
        assert_eq!(users.len(), 3, "callers spread over every destination");
    }

    #[test]
    fn priority_takes_the_first_up_destination() {
        let s = set(Algorithm::Priority, &[(1, 20), (1, 10), (1, 10), (1, 30)]);
        assert_eq!(order(&s, keys("x")), [1, 2, 0, 3]);
        assert_eq!(firsts(&s, 100), [0, 100, 0, 0]);
        s.destinations[1].health.force(Some(HealthState::Down));
        assert_eq!(order(&s, keys("x")), [2, 0, 3]);
    }

    #[test]
    fn least_active_prefers_the_idle_and_takes_turns_among_equals() {
        let s = set(Algorithm::LeastActive, &[(1, 0); 3]);
        s.destinations[0].health.active_inc();
        s.destinations[0].health.active_inc();
        s.destinations[2].health.active_inc();
        assert_eq!(order(&s, keys("x")), [1, 2, 0]);
        s.destinations[1].health.active_inc();
        // 1 and 2 have one call each: they alternate at the head.
        let heads: Vec<usize> = (0..4).map(|_| order(&s, keys("x"))[0]).collect();
        assert!(heads.contains(&1) && heads.contains(&2) && !heads.contains(&0), "{heads:?}");
    }

    #[test]
    fn nothing_up_gives_nothing() {
        let s = set(Algorithm::RoundRobin, &[(1, 0); 2]);
        for d in &s.destinations {
            d.health.force(Some(HealthState::Down));
        }
        assert!(order(&s, keys("x")).is_empty());
    }
}
