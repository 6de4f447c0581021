use super::*;

const UDP_TCP: &[Transport] = &[Transport::Udp, Transport::Tcp];
const ALL: &[Transport] = &[Transport::Udp, Transport::Tcp, Transport::Tls];

fn req(host: &str, port: Option<u16>, transport: Option<Transport>, secure: bool) -> ResolveRequest {
    ResolveRequest { host: host.into(), port, transport, secure }
}

fn t(transport: Transport, addr: &str) -> Target {
    Target { transport, addr: addr.parse().unwrap() }
}

fn srv(priority: u16, weight: u16, port: u16, target: &str) -> Srv {
    Srv { priority, weight, port, target: target.into() }
}

fn naptr(order: u16, preference: u16, services: &str, replacement: &str) -> Naptr {
    Naptr { order, preference, flags: "S".into(), services: services.into(), replacement: replacement.into() }
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

/// Runs the decision to completion against `rec`, answering unknown names as empty; returns the
/// queries asked, in order, and the targets.
fn drive(r: &ResolveRequest, rec: &Records, supported: &[Transport]) -> (Vec<Query>, Vec<Target>) {
    let mut rec = rec.clone();
    let mut asked = Vec::new();
    // Deterministic "random": always the low end, so the order is by running weight.
    let mut random = |_n: u32| 0;
    for _ in 0..50 {
        match next(r, &rec, supported, &mut random) {
            Next::Done(targets) => return (asked, targets),
            Next::Query(q) => {
                assert!(!asked.contains(&q), "asked twice: {q:?}");
                asked.push(q.clone());
                rec.insert_empty(&q);
            }
        }
    }
    panic!("no end")
}

#[test]
fn ip_literal_needs_no_lookup() {
    let (q, out) = drive(&req("192.0.2.1", None, None, false), &Records::default(), UDP_TCP);
    assert!(q.is_empty());
    assert_eq!(out, vec![t(Transport::Udp, "192.0.2.1:5060")]);
    let (_, out) = drive(&req("[2001:db8::1]", Some(5070), Some(Transport::Tcp), false), &Records::default(), UDP_TCP);
    assert_eq!(out, vec![t(Transport::Tcp, "[2001:db8::1]:5070")]);
    // sips to an IP: TLS on 5061, which this element may not support.
    let (_, out) = drive(&req("192.0.2.1", None, None, true), &Records::default(), ALL);
    assert_eq!(out, vec![t(Transport::Tls, "192.0.2.1:5061")]);
    assert!(drive(&req("192.0.2.1", None, None, true), &Records::default(), UDP_TCP).1.is_empty());
}

#[test]
fn explicit_port_means_address_records_only() {
    let mut rec = Records::default();
    rec.addrs.insert("example.com".into(), ips(&["192.0.2.7", "2001:db8::7"]));
    let (q, out) = drive(&req("Example.COM.", Some(5080), None, false), &rec, UDP_TCP);
    assert_eq!(q, vec![]);
    assert_eq!(out, vec![t(Transport::Udp, "192.0.2.7:5080"), t(Transport::Udp, "[2001:db8::7]:5080")]);
    let (q, _) = drive(&req("other.example", Some(5080), Some(Transport::Tcp), false), &Records::default(), UDP_TCP);
    assert_eq!(q, vec![Query::Addr("other.example".into())]);
}

#[test]
fn explicit_transport_means_srv_for_that_transport() {
    let mut rec = Records::default();
    rec.srv.insert("_sip._tcp.example.com".into(), vec![srv(10, 0, 5090, "pbx.example.com.")]);
    rec.addrs.insert("pbx.example.com".into(), ips(&["192.0.2.9"]));
    let (q, out) = drive(&req("example.com", None, Some(Transport::Tcp), false), &rec, UDP_TCP);
    assert!(q.is_empty(), "no NAPTR query with an explicit transport: {q:?}");
    assert_eq!(out, vec![t(Transport::Tcp, "192.0.2.9:5090")]);
    // No SRV: A/AAAA at the default port.
    let mut rec = Records::default();
    rec.addrs.insert("example.net".into(), ips(&["192.0.2.3"]));
    let (q, out) = drive(&req("example.net", None, Some(Transport::Tcp), false), &rec, UDP_TCP);
    assert_eq!(q, vec![Query::Srv("_sip._tcp.example.net".into())]);
    assert_eq!(out, vec![t(Transport::Tcp, "192.0.2.3:5060")]);
    // An unsupported explicit transport yields nothing.
    assert!(drive(&req("example.net", None, Some(Transport::Ws), false), &rec, UDP_TCP).1.is_empty());
}

#[test]
fn naptr_then_srv_then_addresses_in_order() {
    let mut rec = Records::default();
    rec.naptr.insert(
        "example.com".into(),
        vec![
            naptr(50, 50, "SIPS+D2T", "_sips._tcp.example.com."),
            naptr(90, 50, "SIP+D2U", "_sip._udp.example.com."),
            naptr(90, 40, "SIP+D2T", "_sip._tcp.example.com."),
            Naptr { flags: "U".into(), ..naptr(10, 10, "SIP+D2U", "ignored.example.com") },
            naptr(5, 5, "SIP+D2X", "_unknown.example.com"),
        ],
    );
    rec.srv.insert("_sip._tcp.example.com".into(), vec![srv(0, 0, 5060, "tcp.example.com")]);
    rec.srv.insert("_sip._udp.example.com".into(), vec![srv(0, 0, 5062, "udp.example.com")]);
    rec.addrs.insert("tcp.example.com".into(), ips(&["192.0.2.1"]));
    rec.addrs.insert("udp.example.com".into(), ips(&["192.0.2.2"]));
    let (q, out) = drive(&req("example.com", None, None, false), &rec, UDP_TCP);
    assert!(q.is_empty(), "{q:?}");
    // SIPS+D2T skipped (TLS unsupported); order 90: preference 40 (TCP) before 50 (UDP).
    assert_eq!(out, vec![t(Transport::Tcp, "192.0.2.1:5060"), t(Transport::Udp, "192.0.2.2:5062")]);
}

#[test]
fn sips_uses_only_tls() {
    let mut rec = Records::default();
    rec.naptr.insert(
        "example.com".into(),
        vec![naptr(10, 10, "SIP+D2U", "_sip._udp.example.com"), naptr(20, 10, "SIPS+D2T", "_sips._tcp.example.com")],
    );
    rec.srv.insert("_sips._tcp.example.com".into(), vec![srv(1, 1, 5061, "tls.example.com")]);
    rec.addrs.insert("tls.example.com".into(), ips(&["192.0.2.5"]));
    let (_, out) = drive(&req("example.com", None, None, true), &rec, ALL);
    assert_eq!(out, vec![t(Transport::Tls, "192.0.2.5:5061")]);
    let (_, out) = drive(&req("example.com", None, None, true), &rec, UDP_TCP);
    assert!(out.is_empty(), "no TLS support, no target: {out:?}");
    // sips with transport=tcp means TLS (RFC 3261 §26.2.2).
    let (q, _) = drive(&req("example.com", None, Some(Transport::Tcp), true), &rec, ALL);
    assert!(q.is_empty());
}

#[test]
fn without_naptr_srv_is_tried_per_supported_transport_then_a() {
    let (q, out) = drive(&req("example.org", None, None, false), &Records::default(), UDP_TCP);
    assert_eq!(
        q,
        vec![
            Query::Naptr("example.org".into()),
            Query::Srv("_sip._udp.example.org".into()),
            Query::Srv("_sip._tcp.example.org".into()),
            Query::Addr("example.org".into()),
        ]
    );
    assert!(out.is_empty(), "nothing resolved");
    let mut rec = Records::default();
    rec.naptr.insert("example.org".into(), vec![]);
    rec.srv.insert("_sip._tcp.example.org".into(), vec![srv(0, 0, 5070, "t.example.org")]);
    rec.addrs.insert("t.example.org".into(), ips(&["192.0.2.8"]));
    let (_, out) = drive(&req("example.org", None, None, false), &rec, UDP_TCP);
    assert_eq!(out, vec![t(Transport::Tcp, "192.0.2.8:5070")]);
    let mut rec = Records::default();
    rec.addrs.insert("example.org".into(), ips(&["192.0.2.4"]));
    let (_, out) = drive(&req("example.org", None, None, false), &rec, UDP_TCP);
    assert_eq!(out, vec![t(Transport::Udp, "192.0.2.4:5060")], "§4.2 fallback: UDP, default port");
}

#[test]
fn srv_dot_target_means_unavailable() {
    let mut rec = Records::default();
    rec.srv.insert("_sip._udp.example.com".into(), vec![srv(0, 0, 0, ".")]);
    rec.addrs.insert("example.com".into(), ips(&["192.0.2.1"]));
    let (_, out) = drive(&req("example.com", None, Some(Transport::Udp), false), &rec, UDP_TCP);
    assert_eq!(out, vec![t(Transport::Udp, "192.0.2.1:5060")]);
}

#[test]
fn srv_priority_then_weight() {
    let records = vec![srv(20, 0, 1, "c"), srv(10, 60, 2, "a"), srv(10, 40, 3, "b"), srv(10, 0, 4, "z")];
    // random = 0: zero-weight first, then in list order by running sum.
    let order: Vec<u16> = order_srv(&records, &mut |_| 0).iter().map(|s| s.port).collect();
    assert_eq!(order, vec![4, 2, 3, 1]);
    // random = max: the last of the running sum.
    let order: Vec<u16> = order_srv(&records, &mut |n| n).iter().map(|s| s.port).collect();
    assert_eq!(order, vec![3, 2, 4, 1]);
    // Weighted choice: over many draws the heavier record comes first more often.
    let mut state = 12345u32;
    let mut first_a = 0;
    for _ in 0..1000 {
        let mut rnd = |n: u32| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            if n == 0 {
                0
            } else {
                (state >> 8) % (n + 1)
            }
        };
        if order_srv(&records[1..3], &mut rnd)[0].port == 2 {
            first_a += 1;
        }
    }
    assert!((500..700).contains(&first_a), "weight 60 of 100 first {first_a} times in 1000");
}
