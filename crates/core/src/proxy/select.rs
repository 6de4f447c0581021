//! Choosing the best final response of a response context (RFC 3261 §16.7 step 6).

/// Returns the index of the response to forward among the final responses collected
/// (status codes; a branch that timed out counts as 408, §16.7 step 6 / §16.8).
///
/// * A 6xx wins whenever present.
/// * Otherwise the lowest class wins; within 4xx, 401, 407, 415, 420 and 484 are preferred
///   because the caller can act on them.
/// * Ties keep the first received.
pub fn best_response(statuses: &[u16]) -> Option<usize> {
    if let Some(i) = statuses.iter().position(|s| (600..700).contains(s)) {
        return Some(i);
    }
    let class = statuses.iter().map(|s| s / 100).min()?;
    let in_class = |s: &u16| s / 100 == class;
    if class == 4 {
        const PREFERRED: [u16; 5] = [401, 407, 415, 420, 484];
        if let Some(i) = statuses.iter().position(|s| PREFERRED.contains(s)) {
            return Some(i);
        }
    }
    statuses.iter().position(in_class)
}

/// §16.7 step 6: a 503 chosen as best is forwarded as 500, because the 503 said that the
/// *next hop* is unavailable, not this proxy (the caller would otherwise try another proxy).
pub fn status_to_forward(status: u16) -> u16 {
    if status == 503 {
        500
    } else {
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_rules() {
        assert_eq!(best_response(&[]), None);
        assert_eq!(best_response(&[486, 603, 404]), Some(1));
        assert_eq!(best_response(&[503, 404]), Some(1));
        assert_eq!(best_response(&[404, 407, 401]), Some(1));
        assert_eq!(best_response(&[302, 404]), Some(0));
        assert_eq!(best_response(&[408, 480]), Some(0));
        assert_eq!(best_response(&[500, 503]), Some(0));
        assert_eq!(status_to_forward(503), 500);
        assert_eq!(status_to_forward(486), 486);
    }
}
