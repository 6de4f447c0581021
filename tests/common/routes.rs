//! `[[route]]` rules that more than one test's configuration starts its table with.

/// The "premium" rule (+1900 rejected with 403 "Premium Numbers Barred") and the "uk" rule
/// (+44 or 0044, + becomes 00, on to `next_hop`), as TOML ending in a newline.
pub fn premium_and_uk(next_hop: &str) -> String {
    format!(
        r#"[[route]]
name = "premium"
user_prefix = "+1900"
reject = 403
reason = "Premium Numbers Barred"

[[route]]
name = "uk"
user_prefix = ["+44", "0044"]
replace_plus_with = "00"
next_hop = "{next_hop}"
"#
    )
}
