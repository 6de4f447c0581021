//! Which requests must authenticate, and which identities an authenticated user may claim.

use crate::proxy::Identity;
use herald_sip::{Message, Method};
use std::collections::HashMap;

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

/// Which requests need authentication (`[auth]` in the configuration).
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
    /// Methods (uppercase) that need authentication when out of dialog (REGISTER is governed by
    /// `register`).
    pub methods: Vec<String>,
    pub identity: IdentityRule,
    /// Extra URI user parts an authenticated user may claim (user → aliases).
    pub aliases: HashMap<String, Vec<String>>,
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
        }
    }
}

impl AuthPolicy {
    /// Whether `msg` needs authentication, and which kind. The route facts (see the end) are
    /// `to_location_service`: herald will route the request through its location service (its
    /// Request-URI is a served domain and no Route sends it elsewhere); and `routed_by_us`: the
    /// request carried a Route with herald's own URI (it follows a Record-Route herald
    /// inserted, or a route set preloaded with herald as outbound proxy).
    ///
    /// Never challenged: ACK (it cannot be answered, RFC 3261 §22.1), CANCEL (it must reach
    /// the same proxies as its INVITE and cannot be resubmitted, §22.1), and requests inside
    /// a dialog (To tag) that follow herald's route: their dialog was set up by an
    /// authenticated request, and challenging a BYE would leave calls hanging with clients that
    /// do not answer challenges to it. A To tag alone proves nothing (anyone can write one), so
    /// a "dialog" request that did not come along herald's route and would be relayed to a
    /// foreign target is treated as a relay attempt whatever its method.
    ///
    /// `route_facts` gives (to_location_service, routed_by_us): whether herald will route the
    /// request through its location service, and whether it carried herald's own Route. They
    /// cost a Route preprocessing pass, so they are asked for only when the answer depends on
    /// them (never for ACK, CANCEL, REGISTER, uncovered methods or local callers).
    pub fn requirement(
        &self,
        msg: &Message,
        identity: &Identity,
        route_facts: impl FnOnce() -> (bool, bool),
    ) -> Option<Challenge> {
        let method = msg.method()?;
        if matches!(method, Method::Ack | Method::Cancel) {
            return None;
        }
        if msg.to_tag().ok().flatten().is_some() {
            let (to_location_service, routed_by_us) = route_facts();
            if routed_by_us || (to_location_service && self.allow_inbound_to_local) {
                return None;
            }
            return (!self.allow_relay).then_some(Challenge::Proxy);
        }
        let ruri = msg.request_uri().ok();
        if method == Method::Register && ruri.as_ref().is_some_and(|u| identity.serves_domain(u)) {
            return self.register.then_some(Challenge::Registrar);
        }
        if !self.methods.iter().any(|m| m.eq_ignore_ascii_case(method.as_str())) {
            return None;
        }
        let from_local = msg.from_header().is_ok_and(|f| identity.serves_domain(&f.uri));
        let pass = if from_local {
            !self.local_callers
        } else if route_facts().0 {
            self.allow_inbound_to_local
        } else {
            self.allow_relay
        };
        (!pass).then_some(Challenge::Proxy)
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
