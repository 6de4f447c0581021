//! An AoR's unexpired bindings in the order a proxy tries them, borrowed where they are stored.

use crate::Binding;
use std::iter::FusedIterator;

/// The unexpired bindings of one AoR, highest q first, most recently updated first among equal
/// q-values (RFC 3261 §16.6 and §10.3), borrowed from the store
/// ([`crate::LocationStore::lookup_with`]): a lookup that cloned them (four boxed strings each)
/// was ~850 instructions of every INVITE to a registered user (issue 21).
///
/// Walks the bindings (oldest first as stored) backwards once per distinct q-value: an AoR holds
/// a handful (`max_bindings_per_aor`), nearly always of one q-value, and nothing is allocated.
#[derive(Debug, Clone)]
pub struct OrderedBindings<'a, S> {
    bindings: &'a [Binding<S>],
    now_s: u32,
    /// The q-value being walked (`None`: all walked).
    level: Option<u16>,
    /// How many bindings, from the start, are still to look at for `level`.
    pos: usize,
    /// Unexpired bindings not yet returned.
    left: usize,
}

impl<'a, S> OrderedBindings<'a, S> {
    /// `bindings` as stored (oldest update first), seen at `now_s` (seconds since the store's
    /// epoch).
    pub(crate) fn new(bindings: &'a [Binding<S>], now_s: u32) -> Self {
        let live = bindings.iter().filter(|b| b.expires_at > now_s);
        let (left, level) = live.fold((0, None), |(n, q): (usize, Option<u16>), b| {
            (n + 1, Some(q.map_or(b.q_or_default(), |q| q.max(b.q_or_default()))))
        });
        OrderedBindings { bindings, now_s, level, pos: bindings.len(), left }
    }

    /// The highest q-value of the unexpired bindings below `q`.
    fn level_below(&self, q: u16) -> Option<u16> {
        self.bindings.iter().filter(|b| b.expires_at > self.now_s).map(Binding::q_or_default).filter(|&v| v < q).max()
    }
}

impl<'a, S> Iterator for OrderedBindings<'a, S> {
    type Item = &'a Binding<S>;

    fn next(&mut self) -> Option<&'a Binding<S>> {
        loop {
            let level = self.level?;
            while self.pos > 0 {
                self.pos -= 1;
                let b = &self.bindings[self.pos];
                if b.expires_at > self.now_s && b.q_or_default() == level {
                    self.left -= 1;
                    return Some(b);
                }
            }
            self.level = if self.left == 0 { None } else { self.level_below(level) };
            self.pos = self.bindings.len();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<S> ExactSizeIterator for OrderedBindings<'_, S> {}

impl<S> FusedIterator for OrderedBindings<'_, S> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;

    fn binding(n: u32, q: Option<u16>, expires_at: u32) -> Binding<()> {
        Binding {
            contact: format!("sip:{n}@example.com").into(),
            call_id: "c".into(),
            path: None,
            instance: None,
            source: (),
            expires_at,
            cseq: n,
            reg_id: None,
            q,
        }
    }

    /// The order is a stable sort by q descending of the unexpired bindings, newest first.
    #[test]
    fn the_order_is_q_descending_then_newest_first_without_the_expired() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..2_000u32 {
            let n = (round % 9) as usize;
            let bindings: Vec<Binding<()>> = (0..n as u32)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let q = [None, Some(1000), Some(500), Some(0), Some(700)][(x % 5) as usize];
                    binding(i, q, 10 + (x >> 8) as u32 % 4)
                })
                .collect();
            let now_s = 10 + (x >> 16) as u32 % 4;
            let mut want: Vec<&Binding<()>> = bindings.iter().rev().filter(|b| b.expires_at > now_s).collect();
            want.sort_by_key(|b| Reverse(b.q_or_default()));
            let got = OrderedBindings::new(&bindings, now_s);
            assert_eq!(got.len(), want.len());
            assert_eq!(got.collect::<Vec<_>>(), want, "round {round}");
        }
    }
}
