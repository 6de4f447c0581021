//! Which realm challenges name and which realm a domain's users belong to, from `[auth] realm`
//! and `domains` (RFC 7616 §3.3: the realm tells a user which password to use).

use super::schema::Config;

impl Config {
    /// The default realm: `auth.realm`, else the first effective domain (by default the host
    /// name), else `"herald"`. Requests of a domain without a realm of its own
    /// ([`Config::domain_realms`]) are challenged in it.
    pub fn auth_realm(&self) -> String {
        if !self.auth.realm.is_empty() {
            return self.auth.realm.clone();
        }
        self.effective_domains().into_iter().next().unwrap_or_else(|| "herald".into())
    }

    /// One realm per configured domain: with `domains` set and `auth.realm` empty, each domain
    /// is the realm of its own users (as Kamailio's `www_authorize("$td", ...)` per domain), so
    /// `alice@example.com` and `alice@example.org` are two accounts. Empty (one realm for
    /// everything) when `auth.realm` is set or `domains` is not (the host name and addresses
    /// are names of one machine, not separate domains).
    pub fn domain_realms(&self) -> Vec<(String, String)> {
        if !self.auth.realm.is_empty() || self.domains.is_empty() {
            return Vec::new();
        }
        self.domains.iter().map(|d| (d.to_ascii_lowercase(), d.clone())).collect()
    }

    /// The realm of `domain`'s users: its own realm ([`Config::domain_realms`]), else the
    /// default one. `herald users add NAME@DOMAIN` uses it, so the file matches what
    /// `herald serve` challenges with.
    pub fn realm_of_domain(&self, domain: &str) -> String {
        let d = domain.trim_end_matches('.').to_ascii_lowercase();
        self.domain_realms().into_iter().find(|(x, _)| *x == d).map_or_else(|| self.auth_realm(), |(_, r)| r)
    }

    /// Every realm challenges can name: the default and each domain's.
    pub fn challenge_realms(&self) -> Vec<String> {
        let mut out = vec![self.auth_realm()];
        for (_, r) in self.domain_realms() {
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }
}
