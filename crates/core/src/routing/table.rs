//! The routing table: rules in order, first match wins. Lookups go through the prefix index
//! for the rules that match the user by prefix or exactly, and test the other rules in order;
//! the answer is the lowest-numbered rule all of whose matchers hold, whichever kind it is.

use super::index::PrefixIndex;
use super::rule::{Query, Rule, UserMatch};

/// The compiled table. The empty table matches nothing: herald's default routing applies.
#[derive(Debug, Clone, Default)]
pub struct RoutingTable {
    rules: Vec<Rule>,
    index: PrefixIndex,
    /// Rules the index does not hold (no user matcher, or a regular expression), ascending.
    unindexed: Vec<u32>,
}

impl RoutingTable {
    /// Compiles `rules` (in their order of precedence).
    pub fn new(rules: Vec<Rule>) -> RoutingTable {
        let mut index = PrefixIndex::default();
        let mut unindexed = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let i = u32::try_from(i).expect("fewer than 2^32 rules");
            match &rule.user {
                Some(UserMatch::Prefix(ps)) => ps.iter().for_each(|p| index.add_prefix(p, i)),
                Some(UserMatch::Exact(u)) => index.add_exact(u, i),
                Some(UserMatch::Regex(_)) | None => unindexed.push(i),
            }
        }
        RoutingTable { rules, index, unindexed }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule (its index and itself) whose every matcher holds for `q`.
    pub fn lookup(&self, q: &Query<'_>) -> Option<(usize, &Rule)> {
        if self.rules.is_empty() {
            return None;
        }
        let mut best = u32::MAX;
        if let Some(user) = q.user {
            // Indexed candidates: their user matcher holds already.
            self.index.candidates(user, |list| {
                if let Some(&i) =
                    list.iter().take_while(|i| **i < best).find(|i| self.rules[**i as usize].holds_besides_user(q))
                {
                    best = i;
                }
            });
        }
        // Only rules before the best indexed one can win.
        if let Some(&i) = self
            .unindexed
            .iter()
            .take_while(|i| **i < best)
            .find(|i| self.rules[**i as usize].user_holds(q) && self.rules[**i as usize].holds_besides_user(q))
        {
            best = i;
        }
        (best != u32::MAX).then(|| (best as usize, &self.rules[best as usize]))
    }
}
