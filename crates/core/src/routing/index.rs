//! The prefix index: the user matchers of kind prefix and exact compiled into a byte trie, so
//! that a lookup walks the Request-URI user once (one node per character) instead of testing
//! thousands of rules. Each node lists, in rule order, the rules whose prefix ends there and
//! the rules whose exact user ends there.

/// A node: its children by next byte (sorted), and the rule indices (ascending) of the
/// prefixes and exact users that end at it.
#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(u8, u32)>,
    prefix_rules: Vec<u32>,
    exact_rules: Vec<u32>,
}

/// A byte trie from user prefixes and exact users to rule indices.
#[derive(Debug, Clone)]
pub struct PrefixIndex {
    nodes: Vec<Node>,
}

impl Default for PrefixIndex {
    fn default() -> Self {
        PrefixIndex { nodes: vec![Node::default()] }
    }
}

impl PrefixIndex {
    /// Rule `rule` holds for users starting with `prefix`. Rules are added in ascending order.
    pub fn add_prefix(&mut self, prefix: &str, rule: u32) {
        let n = self.node_for(prefix);
        push_once(&mut self.nodes[n].prefix_rules, rule);
    }

    /// Rule `rule` holds for the user `user` exactly. Rules are added in ascending order.
    pub fn add_exact(&mut self, user: &str, rule: u32) {
        let n = self.node_for(user);
        push_once(&mut self.nodes[n].exact_rules, rule);
    }

    fn node_for(&mut self, key: &str) -> usize {
        let mut n = 0;
        for &b in key.as_bytes() {
            n = match self.nodes[n].children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => self.nodes[n].children[i].1 as usize,
                Err(i) => {
                    let new = self.nodes.len();
                    self.nodes.push(Node::default());
                    self.nodes[n].children.insert(i, (b, new as u32));
                    new
                }
            };
        }
        n
    }

    /// Calls `visit` with each list of candidate rules for `user` (each list ascending): the
    /// rules of every prefix of `user`, then those whose exact user is `user`.
    pub fn candidates<'s>(&'s self, user: &str, mut visit: impl FnMut(&'s [u32])) {
        let mut n = &self.nodes[0];
        visit(&n.prefix_rules);
        for &b in user.as_bytes() {
            match n.children.binary_search_by_key(&b, |c| c.0) {
                Ok(i) => n = &self.nodes[n.children[i].1 as usize],
                Err(_) => return,
            }
            visit(&n.prefix_rules);
        }
        visit(&n.exact_rules);
    }
}

/// Appends `rule` unless it is already last (one rule listing the same prefix twice).
fn push_once(list: &mut Vec<u32>, rule: u32) {
    if list.last() != Some(&rule) {
        list.push(rule);
    }
}
