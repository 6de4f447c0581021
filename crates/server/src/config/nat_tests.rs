//! `[nat]` and `[registrar] use_domain`: parsed, translated for the engine, refused with file,
//! line and key.

use crate::config::{Config, EdgePath, Keepalive, NatDetect};

#[track_caller]
fn refused(text: &str, line: usize, key: &str, needle: &str) {
    let e = Config::from_toml(text, "nat.toml").expect_err("refused");
    assert_eq!((e.line, e.key.as_str()), (line, key), "{e}");
    assert!(e.to_string().starts_with(&format!("nat.toml:{line}: key '{key}': ")) && e.message.contains(needle), "{e}");
}

#[test]
fn nat_keys_parse_and_bad_values_name_file_line_and_key() {
    let c = Config::from_toml(
        "[nat]\ndetect = \"contact_differs\"\nfix_contact = false\nkeepalive = \"options\"\nkeepalive_interval_s = 15\nkeepalive_max_failures = 5\nedge_path = \"always\"\n[registrar]\nuse_domain = false\n",
        "nat.toml",
    )
    .unwrap();
    assert_eq!(c.nat.detect, NatDetect::ContactDiffers);
    assert_eq!((c.nat.keepalive, c.nat.edge_path), (Keepalive::Options, EdgePath::Always));
    assert_eq!(c.nat.keepalive_interval(), Some(std::time::Duration::from_secs(15)));
    let engine = c.nat.engine();
    assert!(!engine.fix_contact);
    assert_eq!(engine.edge_path, herald_core::nat::EdgePath::Always);
    assert!(!c.registrar_config(herald_core::Seed::fixed(1)).use_domain);
    let off = Config::from_toml("[nat]\nkeepalive = \"off\"\n", "nat.toml").unwrap();
    assert_eq!(off.nat.keepalive_interval(), None);

    refused("[nat]\nfix_contact = true\nkeepalive_interval_s = 0\n", 3, "nat.keepalive_interval_s", "1..=3600");
    refused("[nat]\nkeepalive_max_failures = 1000\n", 2, "nat.keepalive_max_failures", "1..=100");
    refused("[nat]\n\ndetect = \"sometimes\"\n", 3, "nat.detect", "unknown variant");
    refused("[nat]\nkeepalive = \"sip\"\n", 2, "nat.keepalive", "unknown variant");
    refused("[nat]\nkeepalives = \"crlf\"\n", 2, "nat.keepalives", "unknown field");
    refused("[registrar]\nuse_domain = \"no\"\n", 2, "registrar.use_domain", "");
}
