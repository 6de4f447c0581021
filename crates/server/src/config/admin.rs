//! `[admin]`: the JSON-RPC 2.0 admin endpoint that `herald ctl` talks to (module `admin` of this
//! crate): where it listens and the bearer tokens it asks for.
//!
//! The rule an operator cannot get wrong: without a token the endpoint may only listen on a
//! loopback address (only processes of this machine reach it); any other address needs at least
//! one `[[admin.token]]`, or the configuration is refused naming `admin.listen`.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The longest token secret read from a `token_file`: a secret is a line, not a file.
const MAX_TOKEN_FILE: u64 = 4096;
/// Secrets shorter than this are refused: a bearer token is the only thing between the network
/// and the operator's controls when the endpoint listens beyond loopback.
pub const MIN_TOKEN_LEN: usize = 16;

/// `[admin]`
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Admin {
    /// `IP:PORT` of the JSON-RPC 2.0 endpoint (`POST /` or `POST /rpc`). Absent or `""`: no
    /// endpoint (a configuration file without `[admin]` has none; `herald serve` without
    /// `--config` listens on [`Admin::BUILTIN_LISTEN`]). A non-loopback address needs at least
    /// one `[[admin.token]]`.
    #[serde(deserialize_with = "super::schema::optional_socket_addr")]
    pub listen: Option<SocketAddr>,
    /// Whether herald refuses to start when `listen` cannot be bound. `false` serves SIP without
    /// the endpoint and logs a warning instead ([`Admin::builtin`] is not required).
    pub required: bool,
    /// Largest request body accepted, in bytes; a larger one is answered 413 unread.
    pub max_body_bytes: usize,
    /// `[[admin.token]]`: the bearer tokens (`Authorization: Bearer SECRET`). When any is
    /// configured, every request needs one of them, on any address; the token's name is logged
    /// with every change made with it.
    pub token: Vec<AdminToken>,
}

impl Default for Admin {
    fn default() -> Self {
        Admin { listen: None, required: true, max_body_bytes: 64 * 1024, token: Vec::new() }
    }
}

/// One `[[admin.token]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminToken {
    /// Who holds it: logged with every change made with the token (`who=token:NAME`).
    pub name: String,
    /// The secret itself (at least 16 characters). Prefer `token_file`, which keeps the secret
    /// out of the configuration.
    #[serde(default)]
    pub token: Option<String>,
    /// A file whose first line is the secret (read at start and at each reload).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}

/// Where an `[admin]` problem is: a key of `[admin]` itself, or of `[[admin.token]]` number
/// `token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminKey {
    pub token: Option<usize>,
    pub key: &'static str,
}

impl Admin {
    /// Where `herald serve` without `--config` serves the admin API, and where `herald ctl`
    /// without `--config` looks for it.
    pub const BUILTIN_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5090);

    /// The admin endpoint of the built-in configuration: loopback, no token, and not required
    /// (several heralds started without `--config` on one machine do not fail on the port; the
    /// first one serves `herald ctl`). A file without `[admin]` has no endpoint.
    pub fn builtin() -> Admin {
        Admin { listen: Some(Admin::BUILTIN_LISTEN), required: false, ..Admin::default() }
    }

    /// The tokens as `(name, secret)`, secrets read from their files. `Err((index, key,
    /// message))` names the token entry that cannot be used.
    pub fn secrets(&self) -> Result<Vec<(String, String)>, (AdminKey, String)> {
        let mut out: Vec<(String, String)> = Vec::with_capacity(self.token.len());
        for (i, t) in self.token.iter().enumerate() {
            let at = |key: &'static str| AdminKey { token: Some(i), key };
            if t.name.trim().is_empty() || t.name.chars().any(|c| c.is_control()) {
                return Err((at("name"), "a token needs a name (it is logged with every change made with it)".into()));
            }
            if out.iter().any(|(n, _)| *n == t.name) {
                return Err((at("name"), format!("'{}' names two tokens", t.name)));
            }
            let secret = match (&t.token, &t.token_file) {
                (Some(s), None) => s.clone(),
                (None, Some(path)) => read_secret(path).map_err(|m| (at("token_file"), m))?,
                (Some(_), Some(_)) => return Err((at("token"), "give token or token_file, not both".into())),
                (None, None) => return Err((at("token"), "give the secret as token or token_file".into())),
            };
            let key = if t.token.is_some() { "token" } else { "token_file" };
            if secret.chars().count() < MIN_TOKEN_LEN {
                return Err((at(key), format!("the secret must be at least {MIN_TOKEN_LEN} characters")));
            }
            if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err((at(key), "the secret must not contain spaces or control characters".into()));
            }
            if out.iter().any(|(_, s)| *s == secret) {
                return Err((at(key), "two tokens share one secret: who made a change could not be told".into()));
            }
            out.push((t.name.clone(), secret));
        }
        Ok(out)
    }

    /// Ranges, forms and the loopback rule. `Some((where, message))` for the first problem.
    pub(crate) fn problems(&self) -> Option<(AdminKey, String)> {
        let top = |key: &'static str| AdminKey { token: None, key };
        if !(1024..=16 << 20).contains(&self.max_body_bytes) {
            return Some((top("max_body_bytes"), format!("{} is outside 1024..=16777216", self.max_body_bytes)));
        }
        if let Err(e) = self.secrets() {
            return Some(e);
        }
        match self.listen {
            Some(addr) if !addr.ip().is_loopback() && self.token.is_empty() => Some((
                top("listen"),
                format!(
                    "{addr} is not a loopback address: the admin endpoint needs a bearer token there \
                     (add [[admin.token]] with name and token_file), or listen on 127.0.0.1"
                ),
            )),
            _ => None,
        }
    }
}

/// The first line of `path`, trimmed.
fn read_secret(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TOKEN_FILE).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(listen: &str, tokens: Vec<AdminToken>) -> Admin {
        Admin { listen: Some(listen.parse().unwrap()), token: tokens, ..Admin::default() }
    }

    fn token(name: &str, secret: &str) -> AdminToken {
        AdminToken { name: name.into(), token: Some(secret.into()), token_file: None }
    }

    #[test]
    fn loopback_needs_no_token_other_addresses_do() {
        assert_eq!(admin("127.0.0.1:5090", vec![]).problems(), None);
        assert_eq!(admin("[::1]:5090", vec![]).problems(), None);
        let (at, msg) = admin("0.0.0.0:5090", vec![]).problems().unwrap();
        assert_eq!(at, AdminKey { token: None, key: "listen" });
        assert!(msg.contains("bearer token"), "{msg}");
        assert_eq!(admin("0.0.0.0:5090", vec![token("ops", "0123456789abcdef")]).problems(), None);
    }

    #[test]
    fn tokens_are_named_long_and_distinct() {
        let short = admin("127.0.0.1:1", vec![token("ops", "short")]).problems().unwrap();
        assert_eq!(short.0, AdminKey { token: Some(0), key: "token" });
        let twice = admin("127.0.0.1:1", vec![token("ops", "0123456789abcdef"), token("ops", "fedcba9876543210")]);
        assert_eq!(twice.problems().unwrap().0, AdminKey { token: Some(1), key: "name" });
        let shared = admin("127.0.0.1:1", vec![token("a", "0123456789abcdef"), token("b", "0123456789abcdef")]);
        assert_eq!(shared.problems().unwrap().0, AdminKey { token: Some(1), key: "token" });
        let none = AdminToken { name: "x".into(), token: None, token_file: None };
        assert_eq!(admin("127.0.0.1:1", vec![none]).problems().unwrap().0.key, "token");
    }

    #[test]
    fn a_token_file_gives_its_first_line() {
        let dir = std::env::temp_dir().join(format!("herald-admin-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ops.token");
        std::fs::write(&file, "  0123456789abcdef \nignored\n").unwrap();
        let a = admin(
            "10.0.0.1:5090",
            vec![AdminToken { name: "ops".into(), token: None, token_file: Some(file.clone()) }],
        );
        assert_eq!(a.secrets().unwrap(), vec![("ops".to_string(), "0123456789abcdef".to_string())]);
        let missing = AdminToken { name: "ops".into(), token: None, token_file: Some(dir.join("nope")) };
        assert_eq!(admin("10.0.0.1:5090", vec![missing]).problems().unwrap().0.key, "token_file");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
