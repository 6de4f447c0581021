//! `[auth]`: digest authentication (RFC 3261 §22, RFC 7616, RFC 8760). See docs/config.md.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `[auth]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Auth {
    /// Challenge requests as the keys below say. Off: nobody is challenged.
    pub enabled: bool,
    /// The realm of every challenge (and of the users file's HA1s). Empty: the first of the
    /// effective `domains` (by default the host name).
    pub realm: String,
    /// The users file (`herald users add|remove|list` manage it), reloaded when it changes.
    /// A relative path is relative to the working directory.
    pub users_file: PathBuf,
    /// Key of the nonce MAC. Empty: random per process (nonces do not survive a restart).
    /// Nodes sharing a secret and realm accept each other's nonces.
    pub secret: String,
    /// Offered digest algorithms, in challenge order (RFC 8760 §2.4: strongest first).
    /// Default `["MD5"]`: what every phone in the field answers (baresip, linphone, SIPp and
    /// PJSIP phones fail on a first challenge they do not support, RFC 8760 §2.4 notwithstanding),
    /// as Kamailio's and OpenSIPS's auth modules default to. The users file keeps every
    /// algorithm's HA1, so the stronger ones are one setting away.
    pub algorithms: Vec<DigestAlgorithm>,
    /// Seconds a nonce may be used; later answers get a `stale=true` challenge.
    pub nonce_lifetime_s: u64,
    /// REGISTER for a served domain needs authentication (401).
    pub register: bool,
    /// Out-of-dialog requests of `methods` whose From is a served domain need authentication
    /// (407).
    pub local_callers: bool,
    /// Requests from other domains to users of a served domain pass without authentication.
    pub allow_inbound_to_local: bool,
    /// Requests neither from nor to a served domain pass without authentication (open relay).
    pub allow_relay: bool,
    /// Out-of-dialog methods that local callers must authenticate for (REGISTER is governed
    /// by `register`). Relaying to a foreign target is policed for every method.
    pub methods: Vec<String>,
    /// How the user name must match the identity claimed: `"exact"` (the To user of a REGISTER,
    /// the From user of anything else, or one of the user's `aliases`) or `"any"`.
    pub identity: IdentityMode,
    /// `[auth.aliases]`: extra URI user parts a user may claim, e.g. `alice = ["1001"]`.
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Addresses or prefixes (`"203.0.113.7"`, `"10.0.0.0/8"`) whose requests may leave for
    /// foreign targets without credentials: a trunk, an upstream SBC. `register` and
    /// `local_callers` still apply to them.
    pub trusted_peers: Vec<String>,
}

impl Default for Auth {
    fn default() -> Self {
        Auth {
            enabled: true,
            realm: String::new(),
            users_file: PathBuf::from("herald-users.txt"),
            secret: String::new(),
            algorithms: vec![DigestAlgorithm::Md5],
            nonce_lifetime_s: 300,
            register: true,
            local_callers: true,
            allow_inbound_to_local: true,
            allow_relay: false,
            methods: ["INVITE", "MESSAGE", "SUBSCRIBE", "REFER", "PUBLISH"].map(String::from).to_vec(),
            identity: IdentityMode::Exact,
            aliases: BTreeMap::new(),
            trusted_peers: Vec::new(),
        }
    }
}

/// `auth.algorithms` entries (RFC 7616 §6.1 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum DigestAlgorithm {
    #[serde(rename = "SHA-512-256")]
    Sha512_256,
    #[serde(rename = "SHA-256")]
    Sha256,
    #[serde(rename = "MD5")]
    Md5,
}

/// `auth.identity`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdentityMode {
    Exact,
    Any,
}

impl Auth {
    /// What is wrong with the keys serde cannot check, as (key, message).
    pub fn problems(&self) -> Option<(&'static str, String)> {
        if !(10..=86_400).contains(&self.nonce_lifetime_s) {
            return Some(("auth.nonce_lifetime_s", "must be between 10 and 86400 seconds".into()));
        }
        if self.algorithms.is_empty() {
            return Some(("auth.algorithms", "list at least one of \"SHA-512-256\", \"SHA-256\", \"MD5\"".into()));
        }
        if !self.secret.is_empty() && self.secret.len() < 16 {
            return Some(("auth.secret", "must be at least 16 characters (or empty: random per process)".into()));
        }
        if self.realm.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
            return Some(("auth.realm", "must not contain whitespace, control characters, '\"' or '\\'".into()));
        }
        if let Some(m) = self.methods.iter().find(|m| m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic())) {
            return Some(("auth.methods", format!("'{m}' is not a method name")));
        }
        if let Some(e) = self.trusted_peers.iter().find_map(|p| herald_core::auth::PeerPrefix::parse(p).err()) {
            return Some(("auth.trusted_peers", e));
        }
        None
    }
}
