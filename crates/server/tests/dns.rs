//! RFC 3263 resolution against names that never leave the machine: `localhost` (RFC 6761) and
//! IP literals. The resolver has no name servers, so no query can be sent anywhere.

use herald_core::{ResolveRequest, Target, Transport};
use herald_server::dns::Resolver;

fn resolve(host: &str, port: Option<u16>, transport: Option<Transport>, secure: bool) -> Result<Vec<Target>, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let r = Resolver::hosts_only(vec![Transport::Udp, Transport::Tcp]);
        r.resolve(&ResolveRequest { host: host.into(), port, transport, secure }).await.map_err(|e| e.to_string())
    })
}

fn t(transport: Transport, addr: &str) -> Target {
    Target { transport, addr: addr.parse().unwrap() }
}

#[test]
fn localhost_with_port_is_address_records_only() {
    let got = resolve("localhost", Some(5070), None, false).unwrap();
    assert_eq!(got[0], t(Transport::Udp, "127.0.0.1:5070"));
    assert!(got.iter().all(|x| x.transport == Transport::Udp && x.addr.port() == 5070), "{got:?}");
    assert!(got.iter().any(|x| x.addr.ip().is_loopback() && x.addr.is_ipv6()), "both families: {got:?}");
}

#[test]
fn localhost_with_transport_and_without_anything() {
    let got = resolve("localhost", None, Some(Transport::Tcp), false).unwrap();
    assert_eq!(got[0], t(Transport::Tcp, "127.0.0.1:5060"));
    // No NAPTR, no SRV for localhost: A/AAAA, UDP, port 5060 (RFC 3263 §4.1, §4.2).
    let got = resolve("LocalHost.", None, None, false).unwrap();
    assert_eq!(got[0], t(Transport::Udp, "127.0.0.1:5060"));
}

#[test]
fn unusable_requests_are_errors() {
    // sips needs TLS, which herald does not send yet.
    let e = resolve("localhost", None, None, true).unwrap_err();
    assert!(e.contains("no usable target"), "{e}");
    let e = resolve("localhost", Some(5060), Some(Transport::Ws), false).unwrap_err();
    assert!(e.contains("localhost"), "{e}");
}

#[test]
fn failures_are_typed() {
    use herald_core::ResolveError;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let r = Resolver::hosts_only(vec![Transport::Udp, Transport::Tcp]);
    let ask = |host: &str, secure: bool| {
        rt.block_on(r.resolve(&ResolveRequest { host: host.into(), port: None, transport: None, secure }))
    };
    // localhost resolves, but a sips URI needs TLS, which this resolver was not given.
    let e = ask("localhost", true).unwrap_err();
    assert_eq!((e.host.as_str(), e.error), ("localhost", ResolveError::NoUsableTarget));
    // No name servers: a name outside the hosts file has no address, whatever the reason.
    let e = ask("nothing.invalid", false).unwrap_err();
    assert_ne!(e.error, ResolveError::TooManyLookups, "{e}");
    assert!(e.to_string().starts_with("nothing.invalid: "), "{e}");
}

#[test]
fn ip_literals_need_no_lookup() {
    assert_eq!(
        resolve("127.0.0.1", None, Some(Transport::Tcp), false).unwrap(),
        vec![t(Transport::Tcp, "127.0.0.1:5060")]
    );
    assert_eq!(resolve("[::1]", Some(5080), None, false).unwrap(), vec![t(Transport::Udp, "[::1]:5080")]);
}
