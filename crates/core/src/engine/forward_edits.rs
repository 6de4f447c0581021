//! Edits every forwarded copy of a request gets, whether a branch of a response context
//! (`fork`) or a stateless forward (`stateless`): the loop-detecting branch parameter and the
//! strict-router rewrite.

use super::context::Planned;
use crate::proxy::route::Preprocessed;
use crate::proxy::validate::LOOP_SEP;

/// §16.6 step 6 for a strict next hop: its own Route value is removed (it became the
/// Request-URI) and the old Request-URI is returned as the Route value to append.
pub(super) fn strict_route_edits(pre: &mut Preprocessed<'_>, planned: &Planned) -> Vec<String> {
    let Some(tail) = &planned.strict_route_tail else { return Vec::new() };
    let first = pre.first_remaining().map(|r| r.value);
    pre.remove.extend(first);
    vec![tail.clone()]
}

/// A branch of ours: its unique part, then the request's loop hash (§16.6 step 8), which
/// [`crate::proxy::validate`] looks for to tell a loop from a spiral.
pub(super) fn loop_branch(mut unique: String, loop_hash: u64) -> String {
    unique.push(LOOP_SEP);
    herald_sip::text::push_hex(&mut unique, loop_hash, 16);
    unique
}
