use super::*;
use std::time::Duration;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "test.toml")
}

fn error(text: &str) -> ConfigError {
    load(text).expect_err("config should be refused")
}

#[track_caller]
fn assert_error(text: &str, line: usize, key: &str, needle: &str) {
    let e = error(text);
    assert_eq!((e.file.as_str(), e.line, e.key.as_str()), ("test.toml", line, key), "{e}");
    assert!(e.message.contains(needle), "message {:?} lacks {needle:?}", e.message);
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("test.toml:{line}: key '{key}': ")), "{shown}");
}

#[test]
fn builtin_config_is_the_default() {
    let c = Config::load_or_default(None).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.listen[0].address, "0.0.0.0:5060".parse().unwrap());
    assert_eq!(c.listen[0].transports, vec![ListenTransport::Udp, ListenTransport::Tcp]);
    assert_eq!(c.listen.len(), if ipv6_available() { 2 } else { 1 });
    assert_eq!(c.limits.sip(), herald_sip::Limits::default());
    assert_eq!(c.timers.t1(), Duration::from_millis(500));
}

#[test]
fn example_file_parses_to_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../herald.example.toml");
    let c = Config::load(std::path::Path::new(path)).unwrap();
    // The example spells the listen set out; it equals the default on an IPv6 machine.
    let want = Config { listen: c.listen.clone(), ..Config::default() };
    assert_eq!(c, want);
    assert_eq!(c.listen[0].address, "0.0.0.0:5060".parse().unwrap());
}

#[test]
fn every_key_can_be_set() {
    let c = load(
        r#"
domains = ["example.com", "sip.example.com"]
[server]
workers = 3
udp_buffer_bytes = 65536
drain_timeout_s = 5
transparent_huge_pages = true
[[listen]]
address = "127.0.0.1:5070"
transports = ["tcp"]
[[listen]]
address = "[::1]:5070"
[timers]
t1_ms = 250
t2_ms = 2000
t4_ms = 2500
[proxy]
forking = "sequential"
record_route = "cross-transport"
stateless = true
[registrar]
default_expires = 600
min_expires = 30
max_expires = 7200
max_bindings_per_aor = 3
[limits]
max_message_size = 4096
max_headers = 64
max_header_line = 1024
max_via = 10
max_route = 10
max_start_line = 1024
max_tcp_connections = 10
tcp_idle_timeout_s = 7
tcp_write_queue_bytes = 8192
inbox_capacity = 16
max_tcp_connections_per_ip = 4
tcp_incomplete_message_timeout_s = 3
max_transactions = 500
max_held_bytes = 2097152
[log]
level = "debug,herald_server=trace"
[flood]
enabled = false
window_s = 5
max_requests = 10
auth_window_s = 30
max_auth_failures = 3
ban_s = 60
max_sources = 1000
trusted = ["10.0.0.0/8", "::1"]
[overload]
enabled = false
max_queue_wait_ms = 50
retry_after_s = 9
"#,
    )
    .unwrap();
    assert_eq!(c.server.effective_workers(), 3);
    assert!(c.server.transparent_huge_pages);
    assert_eq!(c.listen[0].transports, vec![ListenTransport::Tcp]);
    assert_eq!(c.listen[1].transports.len(), 2);
    assert_eq!(c.proxy.forking, Forking::Sequential);
    assert_eq!(c.proxy.record_route, RecordRoute::CrossTransport);
    assert_eq!(c.limits.sip().max_via, 10);
    assert_eq!(c.limits.max_tcp_connections_per_ip, 4);
    assert_eq!(c.limits.max_transactions, 500);
    assert_eq!(c.limits.max_held_bytes, 2 << 20);
    let f = c.flood.settings();
    assert!(!c.flood.enabled);
    assert_eq!((f.max_requests, f.max_auth_failures, f.ban.as_secs()), (10, 3, 60));
    assert!(f.trusted[0].contains("10.1.2.3".parse().unwrap()));
    assert!(f.trusted[1].contains("::1".parse().unwrap()));
    let o = c.overload.settings();
    assert_eq!((o.enabled, o.max_queue_wait.as_millis(), o.retry_after_s), (false, 50, 9));
    assert_eq!(c.effective_domains(), vec!["example.com".to_string(), "sip.example.com".to_string()]);
}

#[test]
fn syntax_errors_name_line_and_key() {
    assert_error("[server]\nworkers = 2\n\n[timers]\nt1_ms = = 5\n", 5, "timers.t1_ms", "");
    assert_error("[server]\nworkers = \"two\n", 2, "server.workers", "");
}

#[test]
fn type_errors_name_line_and_key() {
    assert_error("[server]\n\nworkers = \"two\"\n", 3, "server.workers", "invalid type");
    assert_error(
        "[[listen]]\naddress = \"1.2.3.4:5\"\n[[listen]]\naddress = \"nowhere\"\n",
        4,
        "listen[1].address",
        "",
    );
    assert_error(
        "[[listen]]\naddress = \"1.2.3.4:5\"\ntransports = [\"udp\", \"sctp\"]\n",
        3,
        "listen[0].transports[1]",
        "sctp",
    );
    assert_error("[proxy]\nforking = \"random\"\n", 2, "proxy.forking", "random");
    assert_error("domains = \"example.com\"\n", 1, "domains", "invalid type");
}

#[test]
fn unknown_keys_name_line_and_key() {
    assert_error("[server]\nworkers = 1\nwokers = 2\n", 3, "server.wokers", "unknown field");
    assert_error("\n\nlisten_on = 1\n", 3, "listen_on", "unknown field");
    assert_error("[dns]\nx = 1\n", 1, "dns", "unknown field");
}

#[test]
fn missing_required_key_names_the_entry() {
    assert_error("[log]\nlevel = \"info\"\n[[listen]]\ntransports = [\"udp\"]\n", 3, "listen[0]", "address");
}

#[test]
fn validation_errors_name_line_and_key() {
    assert_error("[timers]\nt1_ms = 5000\n", 2, "timers.t1_ms", "must not exceed t2_ms");
    assert_error("[timers]\n\nt2_ms = 100\n", 3, "timers.t2_ms", "must not exceed t2_ms");
    assert_error("[timers]\nt1_ms = 0\n", 2, "timers.t1_ms", "at least 1");
    assert_error("[registrar]\nmin_expires = 7200\n", 2, "registrar.min_expires", "min_expires (7200)");
    assert_error("[registrar]\nmax_bindings_per_aor = 0\n", 2, "registrar.max_bindings_per_aor", "at least 1");
    assert_error("[server]\nworkers = 5000\n", 2, "server.workers", "1024");
    assert_error("[limits]\nmax_message_size = 10\n", 2, "limits.max_message_size", "outside");
    assert_error("[limits]\ntcp_write_queue_bytes = 100\n", 2, "limits.tcp_write_queue_bytes", "must fit");
    assert_error("[limits]\ntcp_idle_timeout_s = 0\n", 2, "limits.tcp_idle_timeout_s", "at least 1");
    assert_error("[log]\nlevel = \"[[[\"\n", 2, "log.level", "log level");
    assert_error("[limits]\nmax_transactions = 0\n", 2, "limits.max_transactions", "outside");
    assert_error("[limits]\nmax_held_bytes = 1000\n", 2, "limits.max_held_bytes", "outside");
    assert_error(
        "[limits]\ntcp_incomplete_message_timeout_s = 0\n",
        2,
        "limits.tcp_incomplete_message_timeout_s",
        "between",
    );
    assert_error("[flood]\n\nmax_requests = 0\n", 3, "flood.max_requests", "at least 1");
    assert_error("[flood]\ntrusted = [\"10.0.0.0/33\"]\n", 2, "flood.trusted", "prefix length");
    assert_error("[flood]\ntrusted = [\"nope\"]\n", 2, "flood.trusted", "not an IP address");
    assert_error("[overload]\nmax_queue_wait_ms = 0\n", 2, "overload.max_queue_wait_ms", "between");
    assert_error("domains = [\"ok.example\", \"bad name\"]\n", 1, "domains[1]", "not a host name");
    assert_error("listen = []\n", 1, "listen", "at least one");
    let dup =
        "[[listen]]\naddress = \"127.0.0.1:5060\"\n[[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = [\"tcp\"]\n";
    assert_error(dup, 4, "listen[1].address", "clashes with listen[0]");
    assert_error(
        "[[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = []\n",
        3,
        "listen[0].transports",
        "at least one",
    );
    assert_error(
        "[[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = [\"tcp\", \"tcp\"]\n",
        3,
        "listen[0].transports",
        "twice",
    );
}

#[test]
fn unreadable_file_names_the_file() {
    let e = Config::load(std::path::Path::new("/nonexistent/herald.toml")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().starts_with("/nonexistent/herald.toml: cannot read"), "{e}");
}

#[test]
fn effective_domains_default_to_host_and_addresses() {
    let c = load("[[listen]]\naddress = \"127.0.0.1:5060\"\n[[listen]]\naddress = \"0.0.0.0:5080\"\n").unwrap();
    let d = c.effective_domains();
    assert!(d.contains(&"127.0.0.1".to_string()), "{d:?}");
    assert_eq!(d.iter().filter(|x| *x == "127.0.0.1").count(), 1, "deduplicated: {d:?}");
}

#[test]
fn metrics_endpoint_is_off_unless_set() {
    assert_eq!(Config::default().metrics.listen, None);
    assert_eq!(load("[metrics]\n").unwrap().metrics.listen, None);
    assert_eq!(load("[metrics]\nlisten = \"\"\n").unwrap().metrics.listen, None);
    let c = load("[metrics]\nlisten = \"127.0.0.1:9090\"\n").unwrap();
    assert_eq!(c.metrics.listen, Some("127.0.0.1:9090".parse().unwrap()));
    let c = load("[metrics]\nlisten = \"[::1]:0\"\n").unwrap();
    assert_eq!(c.metrics.listen, Some("[::1]:0".parse().unwrap()));
}

#[test]
fn metrics_errors_name_line_and_key() {
    assert_error(
        "[log]\nlevel = \"info\"\n[metrics]\nlisten = \"localhost:9090\"\n",
        4,
        "metrics.listen",
        "is not IP:PORT",
    );
    assert_error("[metrics]\nlisten = 9090\n", 2, "metrics.listen", "invalid type");
    assert_error("[metrics]\nlisten = \"127.0.0.1:9090\"\npath = \"/m\"\n", 3, "metrics.path", "unknown field");
}

#[test]
fn auth_defaults_require_authentication() {
    let builtin = Config::load_or_default(None).unwrap();
    assert!(builtin.auth.enabled && builtin.auth.register && builtin.auth.local_callers);
    assert_eq!(builtin.auth, Auth::default());
    // MD5 alone: the one algorithm every phone answers (issue 15: baresip and linphone refuse
    // a topmost SHA-512-256 challenge even when MD5 follows).
    assert_eq!(builtin.auth.algorithms, [DigestAlgorithm::Md5]);
    assert!(builtin.auth.problems().is_none());
    // The realm: auth.realm, else the first domain.
    let c = load("domains = [\"example.com\", \"b.org\"]\n[auth]\n").unwrap();
    assert_eq!(c.auth_realm(), "example.com");
    let c = load("domains = [\"example.com\"]\n[auth]\nrealm = \"r.example\"\n").unwrap();
    assert_eq!(c.auth_realm(), "r.example");
    assert!(c.domain_realms().is_empty(), "one realm set: it is the realm of every domain");
    assert_eq!(c.realm_of_domain("example.com"), "r.example");
}

#[test]
fn each_configured_domain_is_a_realm() {
    let c = load("domains = [\"Example.com\", \"b.org\"]\n").unwrap();
    assert_eq!(c.auth_realm(), "Example.com");
    assert_eq!(
        c.domain_realms(),
        [("example.com".to_owned(), "Example.com".to_owned()), ("b.org".to_owned(), "b.org".to_owned())]
    );
    assert_eq!(c.realm_of_domain("B.ORG."), "b.org");
    assert_eq!(c.realm_of_domain("10.0.0.1"), "Example.com", "an address: the default realm");
    assert_eq!(c.challenge_realms(), ["Example.com", "b.org"]);
    // Without domains: one realm, the host name's.
    assert!(Config::default().domain_realms().is_empty());
}

#[test]
fn auth_keys_parse_and_errors_name_line_and_key() {
    let c = load(
        "[auth]\nenabled = false\nalgorithms = [\"MD5\"]\nidentity = \"any\"\nmethods = [\"INVITE\"]\n[auth.aliases]\nalice = [\"1001\"]\n",
    )
    .unwrap();
    assert!(!c.auth.enabled);
    assert_eq!(c.auth.algorithms, [DigestAlgorithm::Md5]);
    assert_eq!(c.auth.identity, IdentityMode::Any);
    assert_eq!(c.auth.aliases["alice"], ["1001"]);
    assert_error("[auth]\nalgorithms = [\"SHA-1\"]\n", 2, "auth.algorithms[0]", "unknown variant");
    assert_error("[auth]\nidentity = \"loose\"\n", 2, "auth.identity", "unknown variant");
    assert_error("[auth]\nenable = true\n", 2, "auth.enable", "unknown field");
    let bad = |text: &str| load(text).unwrap().auth.problems().map(|(k, _)| k);
    assert_eq!(bad("[auth]\nnonce_lifetime_s = 1\n"), Some("auth.nonce_lifetime_s"));
    assert_eq!(bad("[auth]\nalgorithms = []\n"), Some("auth.algorithms"));
    assert_eq!(bad("[auth]\nsecret = \"short\"\n"), Some("auth.secret"));
    assert_eq!(bad("[auth]\nrealm = \"a b\"\n"), Some("auth.realm"));
    assert_eq!(bad("[auth]\nmethods = [\"IN VITE\"]\n"), Some("auth.methods"));
    assert_eq!(bad("[auth]\ntrusted_peers = [\"10.0.0.0/33\"]\n"), Some("auth.trusted_peers"));
    assert_eq!(bad("[auth]\ntrusted_peers = [\"trunk.example\"]\n"), Some("auth.trusted_peers"));
    assert_eq!(bad("[auth]\ntrusted_peers = [\"203.0.113.7\", \"10.0.0.0/8\", \"2001:db8::/32\"]\n"), None);
}

#[test]
fn tls_keys_and_errors_name_line_and_key() {
    let listen_tls = "[[listen]]\naddress = \"127.0.0.1:5061\"\ntransports = [\"tls\"]\n";
    assert_error(listen_tls, 1, "tls.certificate", "needs [tls] certificate");
    assert_error(
        "[[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = [\"tcp\", \"tls\"]\n",
        3,
        "listen[0].transports",
        "own address",
    );
    let clash = "[[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = [\"udp\", \"tcp\"]\n\
                 [[listen]]\naddress = \"127.0.0.1:5060\"\ntransports = [\"tls\"]\n";
    assert_error(clash, 5, "listen[1].address", "tls clashes with listen[0]");
    assert_error("[tls]\nprivate_key = \"k.pem\"\n", 1, "tls.certificate", "private_key is set");
    // A missing key is reported at its section.
    assert_error("[tls]\n\ncertificate = \"c.pem\"\n", 1, "tls.private_key", "private_key is not");
    assert_error("[tls]\nverify_client = \"required\"\n", 1, "tls.client_ca_file", "client_ca_file");
    assert_error("[tls]\nverify_client = \"maybe\"\n", 2, "tls.verify_client", "unknown variant");
    assert_error("[tls]\nhandshake_timeout_s = 0\n", 2, "tls.handshake_timeout_s", "between");
    // Files are read at load: a missing or wrong file is named with the key that names it.
    let dir = std::env::temp_dir().join(format!("herald-config-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.pem");
    let text = format!("[tls]\ncertificate = \"{0}\"\nprivate_key = \"{0}\"\n", missing.display());
    let e = error(&text);
    assert_eq!((e.line, e.key.as_str()), (2, "tls.certificate"), "{e}");
    assert!(e.message.contains("missing.pem") && e.message.contains("cannot read"), "{e}");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let text = format!("[tls]\ncertificate = \"{0}\"\nprivate_key = \"{0}\"\n", not_pem.display());
    let e = error(&text);
    assert_eq!(e.key, "tls.certificate", "{e}");
    assert!(e.message.contains("no CERTIFICATE"), "{e}");
    let text = format!("[tls]\nca_file = \"{}\"\n", not_pem.display());
    assert_eq!(error(&text).key, "tls.ca_file");
    let _ = std::fs::remove_dir_all(&dir);
    // Defaults: no TLS, verify next hops, no client certificates.
    let c = load("").unwrap();
    assert!(c.tls.verify_server && c.tls.certificate.is_none());
    assert_eq!(c.tls.verify_client, ClientVerify::None);
}

#[test]
fn websocket_listeners_and_their_section() {
    let c = load(
        "[[listen]]\naddress = \"127.0.0.1:8080\"\ntransports = [\"ws\"]\n\
         [websocket]\nping_interval_s = 5\nallowed_origins = [\"https://phone.example.com\"]\n\
         max_message_size = 4096\nhandshake_timeout_s = 3\n",
    )
    .unwrap();
    assert_eq!(c.listen[0].transports, [ListenTransport::Ws]);
    assert_eq!(c.listen[0].transports[0].to_transport(), herald_core::Transport::Ws);
    assert_eq!(c.websocket.ping_interval(), Some(Duration::from_secs(5)));
    assert_eq!(c.websocket.message_limit(65_535), 4096);
    assert_eq!(c.websocket.allowed_origins, ["https://phone.example.com"]);
    assert_eq!(WebSocket::default().message_limit(65_535), 65_535);
    assert_eq!(WebSocket { ping_interval_s: 0, ..WebSocket::default() }.ping_interval(), None);
}

#[test]
fn websocket_errors_name_line_and_key() {
    let listen = "[[listen]]\naddress = \"127.0.0.1:8080\"\n";
    assert_error(&format!("{listen}transports = [\"ws\", \"tcp\"]\n"), 3, "listen[0].transports", "ws and tcp");
    assert_error(&format!("{listen}transports = [\"wss\"]\n"), 1, "tls.certificate", "\"wss\" listener needs");
    assert_error(&format!("{listen}transports = [\"wz\"]\n"), 3, "listen[0].transports[0]", "wz");
    assert_error(
        "[websocket]\nallowed_origins = [\"phone.example.com\"]\n",
        2,
        "websocket.allowed_origins",
        "not an origin",
    );
    assert_error("[websocket]\nhandshake_timeout_s = 0\n", 2, "websocket.handshake_timeout_s", "between 1 and 300");
    assert_error("[websocket]\nmax_message_size = 100\n", 2, "websocket.max_message_size", "outside");
    assert_error("[websocket]\nping_interval = 5\n", 2, "websocket.ping_interval", "unknown field");
}
