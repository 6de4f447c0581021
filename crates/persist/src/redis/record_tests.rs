use super::*;
use herald_core::peer::ConnId;
use herald_core::Seed;

const NOW: u64 = 1_764_200_000_000;

fn codec(node: &str, advertise: &str, seed: u64) -> Codec {
    Codec { node: node.into(), advertise: advertise.parse().unwrap(), tokens: FlowTokens::new(Seed::fixed(seed)) }
}

fn binding(contact: &str, source: Peer, path: Option<&str>, left_s: u32) -> Binding<Peer> {
    Binding {
        contact: contact.into(),
        call_id: "call-1".into(),
        path: path.map(Into::into),
        instance: Some("<urn:uuid:00000000-0000-0000-0000-000000000001>".into()),
        source,
        expires_at: left_s,
        cseq: 7,
        reg_id: NonZeroU32::new(1),
        q: Some(500),
    }
}

fn ws_phone() -> Peer {
    Peer { transport: Transport::Ws, addr: "198.51.100.4:50000".parse().unwrap(), conn: Some(ConnId(42)) }
}

#[test]
fn a_binding_registered_here_is_stored_with_this_nodes_path_and_comes_back_whole() {
    let a = codec("a", "127.0.0.1:5060", 1);
    let b = binding("sip:x@df7jal23ls0d.invalid;transport=ws", ws_phone(), None, 60);
    let (value, latest) = a.export(std::slice::from_ref(&b), NOW).unwrap();
    assert_eq!(latest, NOW + 60_000);
    let stored = &value.bindings[0];
    let path = stored.path.as_deref().unwrap();
    assert!(path.starts_with("<sip:127.0.0.1:5060;lr;ft="), "{path}");
    assert_eq!(stored.source, "ws 198.51.100.4:50000");
    // Through the JSON, and back at the owner: the flow (its connection too) from the token.
    let value = decode(&encode(&value)).unwrap();
    let back = a.import(&value, NOW + 1_500);
    assert!(!back.rewrite);
    assert_eq!(back.bindings, vec![Binding { expires_at: 59, ..b.clone() }]);
    // At another node: the Path to A stays, the source is only informative.
    let other = codec("b", "127.0.0.2:5060", 2).import(&value, NOW);
    assert_eq!(other.bindings[0].path.as_deref(), Some(path));
    assert_eq!(other.bindings[0].source, Peer { conn: None, ..ws_phone() });
}

#[test]
fn a_token_of_an_earlier_run_is_replaced_and_the_stored_source_used() {
    let before = codec("a", "127.0.0.1:5060", 1);
    let udp = Peer::udp("203.0.113.9:5062".parse().unwrap());
    let b = binding("sip:x@10.0.0.5:5060", udp, None, 60);
    let (value, _) = before.export(std::slice::from_ref(&b), NOW).unwrap();
    let after = codec("a", "127.0.0.1:5060", 99);
    let back = after.import(&value, NOW);
    assert!(back.rewrite);
    assert_eq!(back.bindings[0].source, udp);
    assert_eq!(back.bindings[0].path, None);
}

#[test]
fn an_edge_proxys_path_is_kept_and_expired_bindings_are_left_out() {
    let a = codec("a", "127.0.0.1:5060", 1);
    let edge = "<sip:edge.example.com;lr>, <sip:10.1.1.1;lr>";
    let kept = binding("sip:x@192.0.2.7", Peer::udp("192.0.2.7:5060".parse().unwrap()), Some(edge), 30);
    let gone = binding("sip:y@192.0.2.8", Peer::udp("192.0.2.8:5060".parse().unwrap()), None, 0);
    let (value, _) = a.export(&[kept, gone], NOW).unwrap();
    assert_eq!(value.bindings.len(), 1);
    assert_eq!(value.bindings[0].path.as_deref(), Some(edge));
    // 30 s later the binding has lapsed at every node.
    assert!(a.import(&value, NOW + 30_000).bindings.is_empty());
    assert!(a.export(&[], NOW).is_none());
}

#[test]
fn own_path_before_an_edge_path_is_stripped_to_the_edge_path() {
    let a = codec("a", "127.0.0.1:5060", 1);
    let token = a.tokens.mint(ws_phone());
    let mut value = a.export(&[binding("sip:x@h.invalid", ws_phone(), None, 60)], NOW).unwrap().0;
    value.bindings[0].path = Some(format!("<sip:127.0.0.1:5060;lr;ft={token};ob>, <sip:edge.example.com;lr>"));
    let back = a.import(&value, NOW);
    assert_eq!(back.bindings[0].path.as_deref(), Some("<sip:edge.example.com;lr>"));
    assert_eq!(back.bindings[0].source, ws_phone());
}

#[test]
fn other_versions_and_garbage_are_refused() {
    assert!(decode(b"{\"v\":2,\"node\":\"a\",\"bindings\":[]}").unwrap_err().contains("version 2"));
    assert!(decode(b"not json").is_err());
    // A binding whose source cannot be read is skipped, not guessed.
    let a = codec("a", "127.0.0.1:5060", 1);
    let mut value = a.export(&[binding("sip:x@192.0.2.7", ws_phone(), None, 60)], NOW).unwrap().0;
    value.bindings[0].source = "carrier-pigeon 1.2.3.4".into();
    assert!(a.import(&value, NOW).bindings.is_empty());
}
