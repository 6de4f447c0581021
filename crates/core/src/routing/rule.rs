//! One rule of the routing table: what it matches, how it rewrites the number, where it sends.

use super::number::NumberRules;
use crate::auth::PeerPrefix;
use regex::{Regex, RegexBuilder};
use std::net::IpAddr;
use std::sync::Arc;

/// How the Request-URI user (a tel: URI's number) is matched.
#[derive(Debug, Clone)]
pub enum UserMatch {
    /// The whole user equals this (RFC 3261 §19.1.4: user parts compare case-sensitively).
    Exact(String),
    /// The user starts with one of these.
    Prefix(Vec<String>),
    /// The user matches this expression somewhere (anchor it for a whole match).
    Regex(Regex),
}

impl UserMatch {
    /// Compiles a `user_regex` (the `regex` crate: linear-time matching, so a user part
    /// chosen by an attacker cannot make it backtrack); the error is one line.
    pub fn regex(pattern: &str) -> Result<UserMatch, String> {
        let re = RegexBuilder::new(pattern).size_limit(1 << 20).build().map_err(|e| {
            let text = e.to_string();
            let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            format!("not a regular expression: {}", lines.join(" "))
        })?;
        Ok(UserMatch::Regex(re))
    }
}

/// How the Request-URI host is matched (host names compare case-insensitively, RFC 3261
/// §19.1.4); stored lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainMatch {
    /// Exactly this host.
    Exact(String),
    /// A subdomain of this (`*.example.com` holds for `a.example.com`, not `example.com`);
    /// stored with its leading dot: `.example.com`.
    Suffix(String),
}

impl DomainMatch {
    /// `example.com` or `*.example.com`, case-insensitive.
    pub fn parse(text: &str) -> Result<DomainMatch, String> {
        let lower = text.trim().to_ascii_lowercase();
        let (name, wildcard) = match lower.strip_prefix("*.") {
            Some(rest) => (rest.to_string(), true),
            None => (lower, false),
        };
        let valid = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'[' | b']'));
        if !valid {
            return Err(format!("'{text}' is not a domain (write example.com or *.example.com)"));
        }
        Ok(if wildcard { DomainMatch::Suffix(format!(".{name}")) } else { DomainMatch::Exact(name) })
    }

    /// `host` is lowercase already.
    pub fn holds(&self, host: &str) -> bool {
        match self {
            DomainMatch::Exact(d) => host == d,
            DomainMatch::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
        }
    }
}

/// What a rule does with a request it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The location service: the registered contacts of the (rewritten) Request-URI's AoR.
    Location,
    /// The gateway set of this name (`[[gateway_set]]`).
    GatewaySet(String),
    /// This SIP URI, resolved by RFC 3263 as any URI; the Request-URI is kept (rewritten).
    NextHop(String),
    /// Herald answers with this status and reason.
    Reject(u16, Arc<str>),
    /// Forward by the Request-URI (herald's routing for a foreign domain).
    RequestUri,
}

impl Action {
    /// Whether a request routed this way leaves for a host that is neither herald's location
    /// service nor herald itself: a relay in the sense of the authentication policy.
    pub fn leaves(&self) -> bool {
        matches!(self, Action::GatewaySet(_) | Action::NextHop(_) | Action::RequestUri)
    }
}

/// A rule: matchers (all given must hold), number handling, action.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: Option<String>,
    pub user: Option<UserMatch>,
    /// Any of these (empty: any host, tel: URIs included).
    pub domains: Vec<DomainMatch>,
    /// Any of these method names (empty: any method).
    pub methods: Vec<String>,
    /// Any of these source prefixes (empty: any source).
    pub sources: Vec<PeerPrefix>,
    pub authenticated: Option<bool>,
    pub number: NumberRules,
    pub action: Action,
    /// What it sends away may leave without credentials (see `RouteFacts::relay_allowed`).
    pub allow_unauthenticated: bool,
}

impl Rule {
    /// A rule that matches everything and does `action`.
    pub fn new(action: Action) -> Rule {
        Rule {
            name: None,
            user: None,
            domains: Vec::new(),
            methods: Vec::new(),
            sources: Vec::new(),
            authenticated: None,
            number: NumberRules::default(),
            action,
            allow_unauthenticated: false,
        }
    }

    /// Whether every matcher but the user's holds for `q`.
    pub(super) fn holds_besides_user(&self, q: &Query<'_>) -> bool {
        self.authenticated.is_none_or(|a| a == q.authenticated)
            && (self.methods.is_empty() || self.methods.iter().any(|m| m == q.method))
            && (self.domains.is_empty() || q.domain.is_some_and(|h| self.domains.iter().any(|d| d.holds(h))))
            && (self.sources.is_empty() || self.sources.iter().any(|p| p.contains(q.source)))
    }

    /// Whether the user matcher holds for `q` (no matcher: it holds).
    pub(super) fn user_holds(&self, q: &Query<'_>) -> bool {
        match (&self.user, q.user) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(UserMatch::Exact(e)), Some(u)) => u == e,
            (Some(UserMatch::Prefix(ps)), Some(u)) => ps.iter().any(|p| u.starts_with(p.as_str())),
            (Some(UserMatch::Regex(r)), Some(u)) => r.is_match(u),
        }
    }
}

/// The facts about a request the table matches on.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The Request-URI user (unescaped), or a tel: URI's number, without visual separators
    /// for telephone numbers (RFC 3966 §5.1.1); `None` without a user part.
    pub user: Option<&'a str>,
    /// The Request-URI host, lowercase; `None` for a tel: URI.
    pub domain: Option<&'a str>,
    pub method: &'a str,
    pub source: IpAddr,
    pub authenticated: bool,
}
