//! `[location.redis]`: validation, loading, the advertised address.

use super::*;

fn valid() -> Redis {
    Redis { node: "a".into(), nodes: vec!["127.0.0.2".into()], ..Redis::default() }
}

#[test]
fn a_named_node_is_valid_and_the_rest_is_checked() {
    assert_eq!(valid().validate(), Ok(()));
    assert_eq!(Redis::default().validate().unwrap_err().0, "node");
    assert_eq!(Redis { node: "a b".into(), ..valid() }.validate().unwrap_err().0, "node");
    assert_eq!(Redis { url: "http://x".into(), ..valid() }.validate().unwrap_err().0, "url");
    assert_eq!(Redis { nodes: vec!["10.0.0.0/33".into()], ..valid() }.validate().unwrap_err().0, "nodes");
    let any = Some("0.0.0.0:5060".parse().unwrap());
    assert_eq!(Redis { advertise: any, ..valid() }.validate().unwrap_err().0, "advertise");
    assert_eq!(Redis { timeout_ms: 0, ..valid() }.validate().unwrap_err().0, "timeout_ms");
}

#[test]
fn the_section_loads_and_its_errors_name_file_line_and_key() {
    let load = |toml: &str| crate::config::Config::from_toml(toml, "herald.toml").map_err(|e| e.to_string());
    let c = load("[location]\nmode = \"redis\"\n[location.redis]\nnode = \"a\"\nnodes = [\"10.0.0.2\"]\n").unwrap();
    assert_eq!(c.location.redis.node, "a");
    assert!(c.location.cluster_nodes()[0].contains("10.0.0.2".parse().unwrap()));
    let e = load("[location]\nmode = \"redis\"\n[location.redis]\nurl = \"redis://r:6379/\"\nnode = \"a b\"\n")
        .unwrap_err();
    assert!(e.starts_with("herald.toml:5: key 'location.redis.node'"), "{e}");
    let e = load("[location]\nmode = \"redis\"\n").unwrap_err();
    assert!(e.contains("key 'location.redis.node'"), "{e}");
    // Outside redis mode the section is not checked, and nobody is a node.
    let c = load("[location]\nmode = \"memory\"\n[location.redis]\nnodes = [\"10.0.0.2\"]\n").unwrap();
    assert!(c.location.cluster_nodes().is_empty());
    assert!(load("[location.redis]\nnode_name = \"a\"\n").unwrap_err().contains("location.redis.node_name"));
}

#[test]
fn the_advertised_address_defaults_to_a_specific_udp_listener() {
    let any: SocketAddr = "0.0.0.0:5060".parse().unwrap();
    let one: SocketAddr = "127.0.0.2:5070".parse().unwrap();
    assert_eq!(valid().advertised([any, one]), Ok(one));
    assert!(valid().advertised([any]).is_err());
    let set: SocketAddr = "192.0.2.1:5060".parse().unwrap();
    assert_eq!(Redis { advertise: Some(set), ..valid() }.advertised([one]), Ok(set));
    assert!(valid().node_prefixes()[0].contains("127.0.0.2".parse().unwrap()));
}
