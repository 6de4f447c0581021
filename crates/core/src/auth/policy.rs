//! Which requests must authenticate, and which identities an authenticated user may claim.

use crate::proxy::Identity;
use herald_sip::{Message, Method};
use std::collections::HashMap;
use std::net::IpAddr;

/// Who must answer a challenge, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// As the registrar: 401 with WWW-Authenticate, answered in Authorization (RFC 3261 §22.2).
    Registrar,
    /// As a proxy: 407 with Proxy-Authenticate, answered in Proxy-Authorization (§22.3).
    Proxy,
}

impl Challenge {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Challenge::Registrar => (401, "Unauthorized"),
            Challenge::Proxy => (407, "Proxy Authentication Required"),
        }
    }

    /// The header a challenge goes in.
    pub fn challenge_header(self) -> &'static str {
        match self {
            Challenge::Registrar => "WWW-Authenticate",
            Challenge::Proxy => "Proxy-Authenticate",
        }
    }

    /// The header the answer comes in.
    pub fn answer_header(self) -> herald_sip::HeaderName {
        match self {
            Challenge::Registrar => herald_sip::HeaderName::Authorization,
            Challenge::Proxy => herald_sip::HeaderName::ProxyAuthorization,
        }
    }
}

/// How the authenticated user name must relate to the identity the request claims (the To URI
/// of a REGISTER, the From URI of anything else).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum IdentityRule {
    /// The URI's user part equals the user name, or is one of the user's `aliases`.
    #[default]
    Exact,
    /// No check: any authenticated user may claim any identity (trusted PBX-style setups).
    Any,
}

/// Which requests need authentication (`[auth]` in the configuration). The whole policy, per
/// method and situation, is the table under `[auth]` in docs/config.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPolicy {
    /// REGISTER for a domain herald serves.
    pub register: bool,
    /// Out-of-dialog requests of `methods` whose From is in a domain herald serves.
    pub local_callers: bool,
    /// Requests from other domains to a user of a served domain pass without authentication.
    pub allow_inbound_to_local: bool,
    /// Requests neither from nor to a served domain pass without authentication (herald as an
    /// open relay). Off: they are challenged like local callers.
    pub allow_relay: bool,
    /// Methods (uppercase) that local callers must authenticate for when out of dialog
    /// (REGISTER is governed by `register`). Relaying is policed for every method.
    pub methods: Vec<String>,
    pub identity: IdentityRule,
    /// Extra URI user parts an authenticated user may claim (user → aliases).
    pub aliases: HashMap<String, Vec<String>>,
    /// Sources whose requests may leave for foreign targets without credentials (a trunk, an
    /// upstream SBC): `[auth] trusted_peers`.
    pub trusted_peers: Vec<PeerPrefix>,
    /// Other herald nodes sharing this one's location store (`[location.redis] nodes`): a
    /// request from one of them was policed where it entered the cluster (it reaches this node
    /// because the phone it is for is held here), so it needs nothing more. A REGISTER from one
    /// is still challenged: nodes never forward registrations to each other.
    pub nodes: Vec<PeerPrefix>,
}

impl Default for AuthPolicy {
    fn default() -> Self {
        AuthPolicy {
            register: true,
            local_callers: true,
            allow_inbound_to_local: true,
            allow_relay: false,
            methods: ["INVITE", "MESSAGE", "SUBSCRIBE", "REFER", "PUBLISH"].map(String::from).to_vec(),
            identity: IdentityRule::Exact,
            aliases: HashMap::new(),
            trusted_peers: Vec::new(),
            nodes: Vec::new(),
        }
    }
}

/// An address prefix such as `10.0.0.0/8` or `2001:db8::/32` (`[auth] trusted_peers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPrefix {
    addr: IpAddr,
    len: u8,
}

impl PeerPrefix {
    /// Parses `ADDR` (one address) or `ADDR/LEN`.
    pub fn parse(text: &str) -> Result<PeerPrefix, String> {
        let (addr, len) = text.split_once('/').map_or((text, None), |(a, l)| (a, Some(l)));
        let addr: IpAddr = addr.trim().parse().map_err(|_| format!("'{text}' is not an IP address or prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("'{text}': the prefix length must be 0 to {max}"))?,
        };
        Ok(PeerPrefix { addr, len })
    }

    /// Whether `ip` is in the prefix (an IPv4-mapped IPv6 source counts as its IPv4 address:
    /// dual-stack sockets report IPv4 peers that way).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let canonical = |ip: IpAddr| match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let bits = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, true),
            IpAddr::V6(v6) => (u128::from(v6), false),
        };
        let ((p, p4), (a, a4)) = (bits(canonical(self.addr)), bits(canonical(ip)));
        // IPv4 sits in the top 32 bits, so a prefix length counts from the top for both families.
        let mask = if self.len == 0 { 0 } else { u128::MAX << (128 - u32::from(self.len)) };
        p4 == a4 && (p & mask) == (a & mask)
    }
}

/// What routing will do with a request, as the policy needs it (computed by the engine only
/// when the answer depends on it: it costs a Route preprocessing pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RouteFacts {
    /// Herald routes it through its location service: the Request-URI is a served domain and
    /// no Route but herald's own sends it elsewhere (RFC 3261 §16.4, §16.5). Anything else
    /// leaves for a foreign target: a relay.
    pub to_location_service: bool,
    /// One of herald's own Route values (or a Request-URI of herald's, after a strict router)
    /// carries a valid signature for this request's Call-ID and tags: the request follows a
    /// Record-Route herald inserted ([`super::route_sig`]).
    pub signed_dialog: bool,
    /// The routing rule that sends it to a foreign target says `allow_unauthenticated`: the
    /// operator lets it leave without credentials, as from a trusted peer.
    pub relay_allowed: bool,
}

/// What a request needs before herald handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Nothing: handle it as it is.
    Nothing,
    /// Valid credentials, asked for with this challenge.
    Credentials(Challenge),
    /// It may not be relayed and cannot be challenged (RFC 3261 §22.1: ACK and CANCEL cannot
    /// be resubmitted): an ACK is dropped, a CANCEL answered 481.
    Refuse,
}

impl AuthPolicy {
    /// Whether `source` is a trusted peer (`trusted_peers`).
    pub fn trusts(&self, source: IpAddr) -> bool {
        self.trusted_peers.iter().any(|p| p.contains(source))
    }

    /// What `msg`, received from `source`, needs. `facts` is asked at most once, and only when
    /// the answer depends on it.
    ///
    /// The rule (issue 16): a request may leave for a foreign target (one not served by the
    /// location service) only if it authenticated, comes from a trusted peer, or follows a
    /// Record-Route herald signed. So:
    ///
    /// * REGISTER for a served domain: `register` decides (401), whatever its To tag.
    /// * ACK: to the location service it passes (the ACK for a non-2xx never gets here: its
    ///   transaction or the stateless-answer filter takes it); elsewhere only with a signed
    ///   route or from a trusted peer, else it is dropped (it cannot be challenged).
    /// * CANCEL (one herald holds no INVITE for): to the location service it passes (§16.10
    ///   forwards it statelessly); elsewhere only from a trusted peer, else 481: forwarding it
    ///   would relay for an unknown transaction.
    /// * In dialog (To tag): a signed route passes, and so does a target of the location
    ///   service with `allow_inbound_to_local`. Anything else is challenged (407): a To tag and
    ///   a Route the sender wrote prove nothing, but a user with credentials may relay.
    /// * Out of dialog: local callers (From in a served domain) authenticate for `methods`;
    ///   then the location service's targets pass (from other domains with
    ///   `allow_inbound_to_local`); any other target is a relay and is challenged, for every
    ///   method.
    ///
    /// Trusted peers, `allow_relay` and a routing rule's `allow_unauthenticated`
    /// ([`RouteFacts::relay_allowed`]) lift the relay rule only: a trusted peer's REGISTER, or
    /// its INVITE claiming to be from a local user, is still challenged.
    pub fn requirement(
        &self,
        msg: &Message,
        identity: &Identity,
        source: IpAddr,
        facts: impl FnOnce() -> RouteFacts,
    ) -> Requirement {
        let Some(method) = msg.method() else { return Requirement::Nothing };
        let challenge = Requirement::Credentials(Challenge::Proxy);
        // Run first: a To tag must not turn a REGISTER into an in-dialog request that passes.
        if method == Method::Register && msg.request_uri().is_ok_and(|u| identity.serves_domain(&u)) {
            return if self.register { Requirement::Credentials(Challenge::Registrar) } else { Requirement::Nothing };
        }
        if self.nodes.iter().any(|p| p.contains(source)) {
            return Requirement::Nothing;
        }
        let may_relay = |f: &RouteFacts| self.allow_relay || self.trusts(source) || f.relay_allowed;
        let in_dialog = msg.to_tag().ok().flatten().is_some();
        match method {
            Method::Ack => {
                let f = facts();
                if f.to_location_service || f.signed_dialog || may_relay(&f) {
                    Requirement::Nothing
                } else {
                    Requirement::Refuse
                }
            }
            Method::Cancel => {
                let f = facts();
                if f.to_location_service || may_relay(&f) {
                    Requirement::Nothing
                } else {
                    Requirement::Refuse
                }
            }
            _ if in_dialog => {
                let f = facts();
                let passes =
                    f.signed_dialog || if f.to_location_service { self.allow_inbound_to_local } else { may_relay(&f) };
                if passes {
                    Requirement::Nothing
                } else {
                    challenge
                }
            }
            _ => {
                let from_local = msg.from_header().is_ok_and(|f| identity.serves_domain(&f.uri));
                let listed = self.methods.iter().any(|m| m.eq_ignore_ascii_case(method.as_str()));
                if from_local && self.local_callers && listed {
                    return challenge;
                }
                let f = facts();
                let passes =
                    if f.to_location_service { from_local || self.allow_inbound_to_local } else { may_relay(&f) };
                if passes {
                    Requirement::Nothing
                } else {
                    challenge
                }
            }
        }
    }

    /// Whether `user` may claim the identity of `msg` (RFC 3261 §22.1 leaves the binding of
    /// credentials to identities to local policy; without it one account could register or call
    /// as another).
    pub fn identity_ok(&self, user: &str, msg: &Message, kind: Challenge) -> bool {
        if self.identity == IdentityRule::Any {
            return true;
        }
        let claimed = match kind {
            Challenge::Registrar => msg.to_header(),
            Challenge::Proxy => msg.from_header(),
        };
        let Ok(addr) = claimed else { return false };
        let Some(claimed_user) = addr.uri.as_sip().and_then(|u| u.user) else { return false };
        claimed_user == user || self.aliases.get(user).is_some_and(|a| a.iter().any(|x| x == claimed_user))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use herald_sip::Limits;

    fn msg(start: &str, from: &str, to_tag: &str) -> Message {
        let method = start.split(' ').next().unwrap();
        Message::parse(
            Bytes::from(format!(
                "{start} SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKp\r\nFrom: <{from}>;tag=f\r\nTo: <sip:x@example.com>{to_tag}\r\nCall-ID: p\r\nCSeq: 1 {method}\r\nContent-Length: 0\r\n\r\n"
            )),
            &Limits::default(),
        )
        .unwrap()
    }

    const LOCAL: &str = "sip:alice@example.com";
    const FOREIGN: &str = "sip:carol@other.org";
    const STRANGER: &str = "198.51.100.66";
    const TRUNK: &str = "203.0.113.7";
    const PROXY: Requirement = Requirement::Credentials(Challenge::Proxy);
    const REGISTRAR: Requirement = Requirement::Credentials(Challenge::Registrar);

    fn identity() -> Identity {
        Identity::new(vec!["192.0.2.10:5060".parse().unwrap()], ["example.com".to_owned()])
    }

    /// `facts`: (to_location_service, signed_dialog).
    fn req(p: &AuthPolicy, start: &str, from: &str, to_tag: &str, source: &str, facts: (bool, bool)) -> Requirement {
        let f = RouteFacts { to_location_service: facts.0, signed_dialog: facts.1, relay_allowed: false };
        p.requirement(&msg(start, from, to_tag), &identity(), source.parse().unwrap(), || f)
    }

    #[test]
    fn policy_decides_who_is_challenged() {
        let p = AuthPolicy::default();
        let r =
            |start: &str, from: &str, to_tag: &str, facts: (bool, bool)| req(&p, start, from, to_tag, STRANGER, facts);
        assert_eq!(r("REGISTER sip:example.com", LOCAL, "", (true, false)), REGISTRAR);
        assert_eq!(r("REGISTER sip:example.com", LOCAL, ";tag=t", (true, true)), REGISTRAR, "a To tag changes nothing");
        assert_eq!(r("REGISTER sip:other.org", LOCAL, "", (false, false)), PROXY, "a REGISTER relayed elsewhere");
        assert_eq!(r("INVITE sip:bob@example.com", LOCAL, "", (true, false)), PROXY);
        assert_eq!(r("INVITE sip:bob@other.org", LOCAL, "", (false, false)), PROXY);
        assert_eq!(r("INVITE sip:bob@example.com", FOREIGN, "", (true, false)), Requirement::Nothing, "inbound");
        assert_eq!(r("INVITE sip:bob@elsewhere.net", FOREIGN, "", (false, false)), PROXY, "relay");
        assert_eq!(r("BYE sip:bob@192.0.2.2", LOCAL, ";tag=t", (false, true)), Requirement::Nothing, "signed");
        // A To tag and herald's Route without a signature are no dialog of herald's.
        assert_eq!(r("BYE sip:bob@192.0.2.2", LOCAL, ";tag=t", (false, false)), PROXY, "forged dialog");
        assert_eq!(r("INVITE sip:x@elsewhere.net", FOREIGN, ";tag=t", (false, false)), PROXY, "forged re-INVITE");
        assert_eq!(r("INVITE sip:bob@example.com", LOCAL, ";tag=t", (true, false)), Requirement::Nothing);
        // Methods outside `methods`: local callers need no credentials, relays still do.
        assert_eq!(r("OPTIONS sip:bob@example.com", LOCAL, "", (true, false)), Requirement::Nothing);
        for m in ["OPTIONS", "NOTIFY", "INFO", "BYE", "UPDATE", "PRACK", "MESSAGE", "PUBLISH"] {
            assert_eq!(r(&format!("{m} sip:x@198.51.100.9"), FOREIGN, "", (false, false)), PROXY, "{m}");
            assert_eq!(r(&format!("{m} sip:x@198.51.100.9"), LOCAL, "", (false, false)), PROXY, "{m} from local");
        }
        // ACK and CANCEL cannot be challenged: refused when they would relay.
        assert_eq!(r("ACK sip:bob@example.com", LOCAL, ";tag=t", (true, false)), Requirement::Nothing);
        assert_eq!(r("ACK sip:bob@192.0.2.2", LOCAL, ";tag=t", (false, true)), Requirement::Nothing);
        assert_eq!(r("ACK sip:bob@192.0.2.2", LOCAL, ";tag=t", (false, false)), Requirement::Refuse);
        assert_eq!(r("CANCEL sip:bob@example.com", LOCAL, "", (true, false)), Requirement::Nothing);
        assert_eq!(r("CANCEL sip:bob@192.0.2.2", LOCAL, "", (false, false)), Requirement::Refuse);
        assert_eq!(r("CANCEL sip:bob@192.0.2.2", LOCAL, "", (false, true)), Requirement::Refuse);
    }

    #[test]
    fn trusted_peers_may_relay_but_not_register_or_claim_local_users() {
        let p = AuthPolicy { trusted_peers: vec![PeerPrefix::parse("203.0.113.0/24").unwrap()], ..Default::default() };
        let t = |start: &str, from: &str, to_tag: &str| req(&p, start, from, to_tag, TRUNK, (false, false));
        for m in ["INVITE", "OPTIONS", "BYE", "MESSAGE"] {
            assert_eq!(t(&format!("{m} sip:x@198.51.100.9"), FOREIGN, ""), Requirement::Nothing, "{m}");
            assert_eq!(t(&format!("{m} sip:x@198.51.100.9"), FOREIGN, ";tag=t"), Requirement::Nothing, "{m}");
        }
        assert_eq!(t("ACK sip:x@198.51.100.9", FOREIGN, ";tag=t"), Requirement::Nothing);
        assert_eq!(t("CANCEL sip:x@198.51.100.9", FOREIGN, ""), Requirement::Nothing);
        assert_eq!(t("INVITE sip:x@198.51.100.9", LOCAL, ""), PROXY, "claims a local caller");
        assert_eq!(req(&p, "REGISTER sip:example.com", LOCAL, "", TRUNK, (true, false)), REGISTRAR);
        assert_eq!(req(&p, "INVITE sip:x@198.51.100.9", FOREIGN, "", STRANGER, (false, false)), PROXY);
    }

    #[test]
    fn nodes_of_the_cluster_pass_but_do_not_register() {
        let p = AuthPolicy { nodes: vec![PeerPrefix::parse("203.0.113.0/24").unwrap()], ..Default::default() };
        let n = |start: &str, from: &str, to_tag: &str| req(&p, start, from, to_tag, TRUNK, (false, false));
        // A local caller, authenticated at the node it called through, to a phone held here.
        assert_eq!(n("INVITE sip:x@198.51.100.9", LOCAL, ""), Requirement::Nothing);
        assert_eq!(n("BYE sip:x@198.51.100.9", LOCAL, ";tag=t"), Requirement::Nothing);
        assert_eq!(n("ACK sip:x@198.51.100.9", LOCAL, ";tag=t"), Requirement::Nothing);
        assert_eq!(req(&p, "REGISTER sip:example.com", LOCAL, "", TRUNK, (true, false)), REGISTRAR);
        assert_eq!(req(&p, "INVITE sip:x@198.51.100.9", LOCAL, "", STRANGER, (false, false)), PROXY);
    }

    #[test]
    fn an_open_policy() {
        let p = AuthPolicy {
            register: false,
            local_callers: false,
            allow_inbound_to_local: false,
            allow_relay: true,
            ..AuthPolicy::default()
        };
        let r = |start: &str, from: &str, facts: (bool, bool)| req(&p, start, from, "", STRANGER, facts);
        assert_eq!(r("REGISTER sip:example.com", LOCAL, (true, false)), Requirement::Nothing);
        assert_eq!(r("INVITE sip:bob@example.com", LOCAL, (true, false)), Requirement::Nothing);
        assert_eq!(r("INVITE sip:bob@example.com", FOREIGN, (true, false)), PROXY);
        assert_eq!(r("OPTIONS sip:bob@example.com", FOREIGN, (true, false)), PROXY, "every method");
        assert_eq!(r("INVITE sip:bob@elsewhere.net", FOREIGN, (false, false)), Requirement::Nothing);
    }

    #[test]
    fn prefixes() {
        let p = |s: &str| PeerPrefix::parse(s).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(p("10.0.0.0/8").contains(ip("10.200.1.2")));
        assert!(!p("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(p("192.0.2.7").contains(ip("192.0.2.7")) && !p("192.0.2.7").contains(ip("192.0.2.8")));
        assert!(p("192.0.2.0/24").contains(ip("::ffff:192.0.2.9")), "IPv4-mapped");
        assert!(p("2001:db8::/32").contains(ip("2001:db8:1::5")) && !p("2001:db8::/32").contains(ip("2001:db9::1")));
        assert!(!p("0.0.0.0/0").contains(ip("2001:db8::1")), "families do not mix");
        assert!(p("0.0.0.0/0").contains(ip("8.8.8.8")) && p("::/0").contains(ip("2001:db8::1")));
        assert!(PeerPrefix::parse("10.0.0.0/33").is_err() && PeerPrefix::parse("host").is_err());
    }
}
