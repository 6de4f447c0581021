//! Test support for the text filters that run before a parse (`nat::may_name_private_address`,
//! `flows::may_need_flow`): a caller may ask such a filter of a whole header line before
//! splitting a value out of it only if no part of a text the filter clears passes it.

/// For 3,000 texts made of 2 to 17 of `parts` (a fixed pseudo-random sequence from `seed`):
/// every part of each text `passes` rejects is rejected too. At least 300 texts must be rejected,
/// so that the property was tested at all.
pub(crate) fn assert_no_part_of_a_cleared_text_passes(parts: &[&[u8]], seed: u64, passes: fn(&[u8]) -> bool) {
    let n = parts.len() as u64;
    let mut seed = seed;
    let mut cleared = 0;
    for _ in 0..3_000 {
        let mut v = Vec::new();
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let mut s = seed;
        for _ in 0..(seed >> 60) + 2 {
            v.extend_from_slice(parts[(s % n) as usize]);
            s /= n;
        }
        if passes(&v) {
            continue;
        }
        cleared += 1;
        for i in 0..v.len() {
            for j in i..=v.len() {
                assert!(!passes(&v[i..j]), "{} in {}", String::from_utf8_lossy(&v[i..j]), String::from_utf8_lossy(&v));
            }
        }
    }
    assert!(cleared > 300, "enough texts the filter clears: {cleared}");
}
