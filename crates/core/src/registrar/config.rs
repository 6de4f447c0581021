//! What the registrar is told (its policy) and what it refuses with: the types both the
//! registrar and its request reading use, in a module of their own so that neither imports the
//! other's file.

use crate::seed::Seed;
use herald_store::StoreConfig;

/// Registrar policy. Intervals are in seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrarConfig {
    /// Interval granted to a contact when neither its `expires` parameter nor an Expires header
    /// gives one (RFC 3261 §10.2.1.1 suggests 3600).
    pub default_expires: u32,
    /// Smallest nonzero interval accepted; shorter ones get 423 Interval Too Brief with this
    /// value in Min-Expires (§10.3 step 7, §20.23). §10.3 allows the 423 only for intervals
    /// under one hour, so a minimum above 3600 lets intervals from 3600 on through unchanged.
    pub min_expires: u32,
    /// Longer intervals are shortened to this (§10.3: "the registrar MAY shorten").
    pub max_expires: u32,
    /// Most bindings one address-of-record may hold; enforced by the store built with
    /// [`RegistrarConfig::store_config`] (the store's own setting is the one that counts).
    pub max_bindings_per_aor: usize,
    /// Domains whose AoRs this registrar holds (case-insensitive); empty accepts any.
    pub domains: Vec<String>,
    /// Whether the domain is part of the address-of-record (`[registrar] use_domain`): `true`,
    /// `user@domain`; `false`, the user part alone, as Kamailio's registrar with `use_domain=0`
    /// (one namespace of users over every served domain: single-domain setups only).
    pub use_domain: bool,
    /// Keys the To tags of its responses and the hash of the store it builds
    /// ([`Registrar::new_store`]). The default is random; tests and the simulator fix it, and the
    /// same seed then gives the same tags.
    pub seed: Seed,
}

impl Default for RegistrarConfig {
    fn default() -> Self {
        RegistrarConfig {
            default_expires: 3600,
            min_expires: 60,
            max_expires: 86_400,
            max_bindings_per_aor: 20,
            domains: Vec::new(),
            use_domain: true,
            seed: Seed::random(),
        }
    }
}

impl RegistrarConfig {
    /// The store configuration matching this policy.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig { max_bindings_per_aor: self.max_bindings_per_aor, ..StoreConfig::default() }
    }
}

/// An error response decided before the store is touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reject {
    pub status: u16,
    pub reason: &'static str,
    pub headers: Vec<(&'static str, String)>,
}

impl Reject {
    pub fn new(status: u16, reason: &'static str) -> Reject {
        Reject { status, reason, headers: Vec::new() }
    }

    pub fn header(mut self, name: &'static str, value: String) -> Reject {
        self.headers.push((name, value));
        self
    }
}
