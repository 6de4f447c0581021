//! The configuration as the sans-IO core takes it: [`EngineConfig`], [`RegistrarConfig`] and
//! [`AuthConfig`] are built here and nowhere else, so a new key is added to the schema and to
//! its translation in one crate (the `herald serve` command only wires the results together).
//!
//! What needs the machine stays with the caller: the sockets actually bound (their real ports),
//! the routing table for wildcard listeners, the seed and the random bytes of a per-process
//! nonce secret.

use super::auth::{DigestAlgorithm, IdentityMode};
use super::schema::{Config, Forking, RecordRoute};
use herald_core::auth::{Algorithm, AuthConfig, AuthPolicy, IdentityRule, PeerPrefix};
use herald_core::engine::{self, EngineConfig, Listener, SourceRoute};
use herald_core::proxy::Identity;
use herald_core::registrar::RegistrarConfig;
use herald_core::transaction::Timers;
use herald_core::Seed;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Timer C (RFC 3261 §16.6 step 11, "larger than 3 minutes"): herald has always armed it for
/// 180 s, and no key changes it.
const TIMER_C: Duration = Duration::from_secs(180);

impl Config {
    /// What the engines need, given the sockets actually bound (`bound`: a wildcard or port 0
    /// is resolved only there). `source_routes` answers "which address do I send from towards
    /// X" for wildcard listeners (the runtime's `KernelRoutes`); it is kept only when some
    /// listener is on a wildcard address. `seed` keys the engines' branches and tags
    /// (`Seed::random()` in a real process).
    pub fn engine_config(&self, bound: &[Listener], source_routes: Arc<dyn SourceRoute>, seed: Seed) -> EngineConfig {
        let interfaces = herald_sys::interface_addresses();
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for b in bound {
            if b.addr.ip().is_unspecified() {
                for ip in interfaces.iter().filter(|ip| ip.is_ipv4() == b.addr.is_ipv4()) {
                    addrs.push(SocketAddr::new(*ip, b.addr.port()));
                }
            } else {
                addrs.push(b.addr);
            }
        }
        addrs.sort();
        addrs.dedup();
        // A wildcard listener is advertised with the address the routing table picks towards each
        // peer (RFC 3261 §16.6 step 4), never as 0.0.0.0.
        let wildcard = bound.iter().any(|b| b.addr.ip().is_unspecified());
        EngineConfig {
            identity: Identity::new(addrs, self.effective_domains()).with_names(self.own_names()),
            listeners: bound.to_vec(),
            timers: Timers { t1: self.timers.t1(), t2: self.timers.t2(), t4: self.timers.t4(), ..Timers::default() },
            record_route: match self.proxy.record_route {
                RecordRoute::Always => engine::RecordRoute::Always,
                RecordRoute::CrossTransport => engine::RecordRoute::CrossTransport,
                RecordRoute::Never => engine::RecordRoute::Never,
            },
            forking: match self.proxy.forking {
                Forking::Parallel => engine::Forking::Parallel,
                Forking::Sequential => engine::Forking::Sequential,
            },
            stateless: self.proxy.stateless,
            timer_c: TIMER_C,
            routes: wildcard.then_some(source_routes),
            seed,
            nat: self.nat.engine(),
            gateways: Arc::new(super::gateways::to_core(&self.gateway_set, None)),
            routing: Arc::new(super::routing::table(&self.route, &self.gateway_set)),
        }
    }

    /// `[registrar]` for the core's registrar. Its domain check is left to the engine, which
    /// hands it only REGISTERs for a served domain (RFC 3261 §10.3 step 1). `seed` keys its
    /// To tags and the location store's hash.
    pub fn registrar_config(&self, seed: Seed) -> RegistrarConfig {
        let r = &self.registrar;
        RegistrarConfig {
            default_expires: r.default_expires,
            min_expires: r.min_expires,
            max_expires: r.max_expires,
            max_bindings_per_aor: r.max_bindings_per_aor as usize,
            domains: Vec::new(),
            use_domain: r.use_domain,
            seed,
        }
    }

    /// `[auth]` for the core's authenticator: realms, algorithms, nonce lifetime and policy.
    /// Call it on a configuration whose [`super::Auth::problems`] is `None`: a trusted peer
    /// that does not parse is left out rather than reported here.
    pub fn auth_config(&self) -> AuthConfig {
        let a = &self.auth;
        let policy = AuthPolicy {
            register: a.register,
            local_callers: a.local_callers,
            allow_inbound_to_local: a.allow_inbound_to_local,
            allow_relay: a.allow_relay,
            methods: a.methods.iter().map(|m| m.to_ascii_uppercase()).collect(),
            identity: match a.identity {
                IdentityMode::Exact => IdentityRule::Exact,
                IdentityMode::Any => IdentityRule::Any,
            },
            aliases: a.aliases.clone().into_iter().collect(),
            trusted_peers: a.trusted_peers.iter().filter_map(|p| PeerPrefix::parse(p).ok()).collect(),
            nodes: self.location.cluster_nodes(),
        };
        let algorithms = a
            .algorithms
            .iter()
            .map(|x| match x {
                DigestAlgorithm::Sha512_256 => Algorithm::Sha512_256,
                DigestAlgorithm::Sha256 => Algorithm::Sha256,
                DigestAlgorithm::Md5 => Algorithm::Md5,
            })
            .collect();
        AuthConfig {
            realm: self.auth_realm(),
            domain_realms: self.domain_realms(),
            algorithms,
            nonce_lifetime: Duration::from_secs(a.nonce_lifetime_s),
            policy,
        }
    }

    /// The key of the nonce MAC: `auth.secret`, or `random` when it is empty (nonces then do
    /// not survive a restart, nor validate on another node).
    pub fn nonce_secret(&self, random: &[u8]) -> Vec<u8> {
        if self.auth.secret.is_empty() {
            random.to_vec()
        } else {
            self.auth.secret.as_bytes().to_vec()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::Transport;
    use std::net::IpAddr;

    #[derive(Debug)]
    struct NoRoute;

    impl SourceRoute for NoRoute {
        fn source_for(&self, _: IpAddr) -> Option<IpAddr> {
            None
        }
    }

    fn load(text: &str) -> Config {
        Config::from_toml(text, "test.toml").expect("valid config")
    }

    fn listener(transport: Transport, addr: &str) -> Listener {
        Listener { transport, addr: addr.parse().unwrap() }
    }

    #[test]
    fn proxy_keys_and_timers_reach_the_engine() {
        let c = load(
            r#"
domains = ["example.com"]
aliases = ["pbx.example.net"]
[[listen]]
address = "127.0.0.1:5070"
[timers]
t1_ms = 250
t2_ms = 2000
t4_ms = 2500
[proxy]
forking = "sequential"
record_route = "never"
stateless = true
"#,
        );
        let bound = [listener(Transport::Udp, "127.0.0.1:5070"), listener(Transport::Tcp, "127.0.0.1:5070")];
        let e = c.engine_config(&bound, Arc::new(NoRoute), Seed::fixed(1));
        assert_eq!(e.identity.domains, vec!["example.com".to_string()]);
        assert_eq!(e.identity.addrs, vec!["127.0.0.1:5070".parse::<SocketAddr>().unwrap()]);
        assert!(e.identity.names.contains(&"pbx.example.net".to_string()), "{:?}", e.identity.names);
        assert_eq!(e.listeners, bound.to_vec());
        assert_eq!((e.timers.t1, e.timers.t2, e.timers.t4), (c.timers.t1(), c.timers.t2(), c.timers.t4()));
        assert_eq!(e.timers.t1, Duration::from_millis(250));
        assert_eq!(e.record_route, engine::RecordRoute::Never);
        assert_eq!(e.forking, engine::Forking::Sequential);
        assert!(e.stateless);
        assert_eq!(e.timer_c, Duration::from_secs(180));
        assert!(e.routes.is_none(), "no wildcard listener: the routing table is not asked");
        assert!(e.seed == Seed::fixed(1));
    }

    #[test]
    fn the_defaults_reach_the_engine() {
        let e = Config::default().engine_config(
            &[listener(Transport::Udp, "127.0.0.1:5060")],
            Arc::new(NoRoute),
            Seed::fixed(0),
        );
        assert_eq!(e.record_route, engine::RecordRoute::Always);
        assert_eq!(e.forking, engine::Forking::Parallel);
        assert!(!e.stateless);
        assert_eq!(e.timers.t1, Duration::from_millis(500));
    }

    #[test]
    fn a_wildcard_listener_is_expanded_and_asks_the_routing_table() {
        let c = Config::default();
        let e = c.engine_config(&[listener(Transport::Udp, "0.0.0.0:5080")], Arc::new(NoRoute), Seed::fixed(0));
        assert!(e.routes.is_some());
        // Every IPv4 interface address, loopback included, on the bound port; never 0.0.0.0.
        assert!(e.identity.addrs.contains(&"127.0.0.1:5080".parse().unwrap()), "{:?}", e.identity.addrs);
        assert!(e.identity.addrs.iter().all(|a| a.is_ipv4() && !a.ip().is_unspecified() && a.port() == 5080));
    }

    #[test]
    fn registrar_keys_reach_the_registrar() {
        let c = load(
            "[registrar]\ndefault_expires = 600\nmin_expires = 30\nmax_expires = 7200\nmax_bindings_per_aor = 4\n",
        );
        let r = c.registrar_config(Seed::fixed(2));
        assert_eq!((r.default_expires, r.min_expires, r.max_expires, r.max_bindings_per_aor), (600, 30, 7200, 4));
        assert!(r.domains.is_empty(), "the engine decides which domains are served");
        assert!(r.seed == Seed::fixed(2));
    }

    #[test]
    fn auth_keys_reach_the_authenticator() {
        let c = load(
            r#"
domains = ["example.com", "example.org"]
[auth]
algorithms = ["SHA-256", "MD5"]
nonce_lifetime_s = 60
register = false
local_callers = true
allow_inbound_to_local = false
allow_relay = true
methods = ["invite", "MESSAGE"]
identity = "any"
trusted_peers = ["10.0.0.0/8"]
[auth.aliases]
alice = ["1001"]
"#,
        );
        let a = c.auth_config();
        assert_eq!(a.realm, "example.com");
        assert_eq!(a.domain_realms, c.domain_realms());
        assert_eq!(a.domain_realms.len(), 2);
        assert_eq!(a.algorithms, vec![Algorithm::Sha256, Algorithm::Md5]);
        assert_eq!(a.nonce_lifetime, Duration::from_secs(60));
        let p = &a.policy;
        assert_eq!((p.register, p.local_callers, p.allow_inbound_to_local, p.allow_relay), (false, true, false, true));
        assert_eq!(p.methods, vec!["INVITE".to_string(), "MESSAGE".to_string()]);
        assert_eq!(p.identity, IdentityRule::Any);
        assert_eq!(p.aliases.get("alice"), Some(&vec!["1001".to_string()]));
        assert_eq!(p.trusted_peers, vec![PeerPrefix::parse("10.0.0.0/8").unwrap()]);
    }

    #[test]
    fn the_nonce_secret_is_the_configured_one_or_the_random_one() {
        let random = [7u8; 32];
        assert_eq!(Config::default().nonce_secret(&random), random.to_vec());
        let c = load("[auth]\nsecret = \"0123456789abcdef-shared\"\n");
        assert_eq!(c.nonce_secret(&random), b"0123456789abcdef-shared".to_vec());
    }
}
