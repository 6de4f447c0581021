//! `[[route]]`: the routing table (issue 18), an ordered list of rules, first match wins. Each
//! rule has optional matchers (all must hold), optional number handling for the Request-URI, and
//! exactly one action. Requests no rule matches keep herald's default routing: a served domain
//! goes to the location service, anything else is forwarded by its Request-URI. See the
//! `[[route]]` section of docs/config.md.

use super::gateways::GatewaySet;
use herald_core::auth::PeerPrefix;
use herald_core::routing::{Action, DomainMatch, NumberRules, Plus, RoutingTable, Rule, UserMatch};
use herald_sip::uri::Uri;
use serde::{Deserialize, Deserializer};

/// One `[[route]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Route {
    /// A name for `herald route check`, logs and errors; unique when given.
    pub name: Option<String>,

    // Matchers: all that are given must hold.
    /// The Request-URI user (a tel: URI's number) equals this.
    pub user: Option<String>,
    /// The Request-URI user starts with this (or with one of these): `"+44"`, `["00", "+"]`.
    #[serde(deserialize_with = "one_or_many")]
    pub user_prefix: Vec<String>,
    /// The Request-URI user matches this regular expression (the `regex` crate's syntax;
    /// anchor it with `^…$` to match the whole user).
    pub user_regex: Option<String>,
    /// The Request-URI host is this domain (case-insensitive), or a subdomain of it when
    /// written `*.example.com`; one name or a list.
    #[serde(deserialize_with = "one_or_many")]
    pub domain: Vec<String>,
    /// The request's method is one of these (`["INVITE", "MESSAGE"]`).
    pub methods: Vec<String>,
    /// The request came from one of these addresses or prefixes (`"10.0.0.0/8"`,
    /// `"2001:db8::/32"`).
    #[serde(deserialize_with = "one_or_many")]
    pub source: Vec<String>,
    /// The caller answered herald's digest challenge (`true`) or did not (`false`).
    pub authenticated: Option<bool>,

    // Number handling, applied to the user part of the Request-URI sent on, in this order.
    /// A leading `+` becomes this: `"00"` turns `+441234` into `00441234`.
    pub replace_plus_with: Option<String>,
    /// A leading occurrence of this becomes `+`: `"00"` turns `00441234` into `+441234`.
    pub replace_with_plus: Option<String>,
    /// Leading characters removed from the user (after the `+` handling above).
    pub strip: usize,
    /// Prepended to the user (after `strip`).
    pub prepend: String,

    // The action: exactly one of these.
    /// Route through the location service (registered users of a served domain).
    pub location: bool,
    /// Send to the `[[gateway_set]]` of this name.
    pub gateway_set: Option<String>,
    /// Send to this SIP URI (resolved by RFC 3263 like any URI); the Request-URI stays.
    pub next_hop: Option<String>,
    /// Answer with this status (400-699).
    pub reject: Option<u16>,
    /// The reason phrase of `reject` (default: the status's usual phrase).
    pub reason: Option<String>,
    /// Forward by the Request-URI (herald's routing for foreign domains).
    pub request_uri: bool,

    /// Requests this rule sends to a gateway set, next hop or foreign Request-URI may leave
    /// without credentials (an operator's explicit decision: e.g. a carrier's inbound trunk
    /// to a media server). Otherwise they are a relay as for any foreign target: the caller must
    /// authenticate, come from `[auth] trusted_peers`, or `[auth] allow_relay` be on.
    pub allow_unauthenticated: bool,
}

/// A string or a list of strings.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => Ok(vec![s]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom("expected a string or a list of strings")),
    }
}

/// The `[[route]]` entries as the core's table. Call it on a configuration [`check`] accepted
/// (a rule that does not compile is left out rather than reported here).
pub fn table(routes: &[Route], gateway_sets: &[GatewaySet]) -> RoutingTable {
    let names = names(gateway_sets);
    RoutingTable::new(routes.iter().filter_map(|r| r.rule(&names).ok()).collect())
}

/// What is wrong with the rules, as (rule index, key, message): a bad regex, prefix, domain,
/// CIDR or URI, conflicting matchers or actions, a duplicate name, an unknown gateway set.
pub fn check(routes: &[Route], gateway_sets: &[GatewaySet]) -> Result<(), (usize, &'static str, String)> {
    let names = names(gateway_sets);
    for (i, r) in routes.iter().enumerate() {
        r.rule(&names).map_err(|(key, message)| (i, key, message))?;
        if let Some(name) = &r.name {
            if let Some(j) = routes[..i].iter().position(|o| o.name.as_ref() == Some(name)) {
                return Err((i, "name", format!("duplicate rule name '{name}' (route[{j}] has it too)")));
            }
        }
    }
    Ok(())
}

impl Route {
    /// The core's rule, or the key at fault and why. `gateway_sets`: the names of the
    /// configured `[[gateway_set]]`s.
    pub fn rule(&self, gateway_sets: &[&str]) -> Result<Rule, (&'static str, String)> {
        if self.name.as_ref().is_some_and(|n| n.trim().is_empty()) {
            return Err(("name", "must not be empty".into()));
        }
        let given: Vec<&'static str> = [
            ("user", self.user.is_some()),
            ("user_prefix", !self.user_prefix.is_empty()),
            ("user_regex", self.user_regex.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        if let [first, second, ..] = given[..] {
            return Err((second, format!("conflicting matchers: {first} and {second} both match the user; give one")));
        }
        let user = if let Some(u) = &self.user {
            check_user_text("user", u)?;
            Some(UserMatch::Exact(u.clone()))
        } else if let Some(re) = &self.user_regex {
            Some(UserMatch::regex(re).map_err(|e| ("user_regex", e))?)
        } else if !self.user_prefix.is_empty() {
            for p in &self.user_prefix {
                check_user_text("user_prefix", p)?;
            }
            Some(UserMatch::Prefix(self.user_prefix.clone()))
        } else {
            None
        };
        let domains =
            self.domain.iter().map(|d| DomainMatch::parse(d)).collect::<Result<_, _>>().map_err(|e| ("domain", e))?;
        if let Some(m) = self.methods.iter().find(|m| m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic())) {
            return Err(("methods", format!("'{m}' is not a method name")));
        }
        let sources =
            self.source.iter().map(|s| PeerPrefix::parse(s)).collect::<Result<_, _>>().map_err(|e| ("source", e))?;
        let plus = match (&self.replace_plus_with, &self.replace_with_plus) {
            (Some(_), Some(_)) => {
                return Err(("replace_with_plus", "conflicts with replace_plus_with: give one".into()));
            }
            (Some(p), None) => Plus::ToPrefix(digits("replace_plus_with", p)?),
            (None, Some(p)) => Plus::FromPrefix(digits("replace_with_plus", p)?),
            (None, None) => Plus::Keep,
        };
        if self.strip > 64 {
            return Err(("strip", "must be at most 64".into()));
        }
        if !self.prepend.bytes().all(|b| b.is_ascii_alphanumeric() || b"+*#".contains(&b)) {
            return Err(("prepend", format!("'{}' may hold only digits, letters, '+', '*' and '#'", self.prepend)));
        }
        let number = NumberRules { plus, strip: self.strip, prepend: self.prepend.clone() };
        Ok(Rule {
            name: self.name.clone(),
            user,
            domains,
            methods: self.methods.iter().map(|m| m.to_ascii_uppercase()).collect(),
            sources,
            authenticated: self.authenticated,
            number,
            action: self.action(gateway_sets)?,
            allow_unauthenticated: self.allow_unauthenticated,
        })
    }

    fn action(&self, gateway_sets: &[&str]) -> Result<Action, (&'static str, String)> {
        let given: Vec<&'static str> = [
            ("location", self.location),
            ("gateway_set", self.gateway_set.is_some()),
            ("next_hop", self.next_hop.is_some()),
            ("reject", self.reject.is_some()),
            ("request_uri", self.request_uri),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        if self.reason.is_some() && self.reject.is_none() {
            return Err(("reason", "is the reason phrase of reject: give reject a status too".into()));
        }
        match given[..] {
            [] => Err((
                "location",
                "the rule has no action: give one of location, gateway_set, next_hop, reject, request_uri".into(),
            )),
            [first, second, ..] => Err((second, format!("conflicting actions: {first} and {second}; give one"))),
            ["location"] => Ok(Action::Location),
            ["request_uri"] => Ok(Action::RequestUri),
            ["gateway_set"] => {
                let name = self.gateway_set.clone().unwrap_or_default();
                if gateway_sets.contains(&name.as_str()) {
                    return Ok(Action::GatewaySet(name));
                }
                let known = if gateway_sets.is_empty() {
                    "no [[gateway_set]] is configured".to_string()
                } else {
                    format!("the sets are: {}", gateway_sets.join(", "))
                };
                Err(("gateway_set", format!("unknown gateway set '{name}' ({known})")))
            }
            ["next_hop"] => {
                let hop = self.next_hop.clone().unwrap_or_default();
                match Uri::parse(hop.as_bytes()) {
                    Ok(u) if u.as_sip().is_some() => Ok(Action::NextHop(hop)),
                    _ => Err(("next_hop", format!("'{hop}' is not a sip: or sips: URI"))),
                }
            }
            _ => {
                let status = self.reject.unwrap_or_default();
                if !(400..=699).contains(&status) {
                    return Err(("reject", format!("{status} is not a final error status (400-699)")));
                }
                let reason = self.reason.clone().unwrap_or_else(|| default_reason(status).to_string());
                if reason.is_empty() || reason.chars().any(|c| c.is_control()) {
                    return Err(("reason", "must be a non-empty phrase without control characters".into()));
                }
                Ok(Action::Reject(status, reason.into()))
            }
        }
    }
}

/// The names `gateway_set` actions may use.
fn names(sets: &[GatewaySet]) -> Vec<&str> {
    sets.iter().map(|g| g.name.as_str()).collect()
}

/// A user or prefix to match: what a Request-URI user (unescaped) could hold.
fn check_user_text(key: &'static str, text: &str) -> Result<(), (&'static str, String)> {
    if text.is_empty() {
        return Err((key, "must not be empty (leave the matcher out to match every user)".into()));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control() || c == '@') {
        return Err((key, format!("'{text}' is not a user part (no spaces, control characters or '@')")));
    }
    Ok(())
}

/// An international prefix such as `00` or `011`.
fn digits(key: &'static str, text: &str) -> Result<String, (&'static str, String)> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err((key, format!("'{text}' is not an international prefix (digits, such as \"00\")")));
    }
    Ok(text.to_string())
}

/// The usual reason phrase of a rejection status (RFC 3261 §21).
fn default_reason(status: u16) -> &'static str {
    match status {
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        480 => "Temporarily Unavailable",
        484 => "Address Incomplete",
        486 => "Busy Here",
        488 => "Not Acceptable Here",
        500 => "Server Internal Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        603 => "Decline",
        604 => "Does Not Exist Anywhere",
        _ => "Rejected",
    }
}

#[cfg(test)]
#[path = "routing_tests.rs"]
mod tests;
