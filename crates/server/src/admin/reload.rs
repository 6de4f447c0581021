//! Reloading the configuration while serving (`herald ctl reload`, SIGHUP): the file is loaded
//! and validated exactly as at start (`Config::load`); a file that does not load is refused with
//! its error (file, line, key) and nothing changes. A change to a setting that is fixed while
//! herald runs (sockets, workers, sizes of tables, the registrar's and authenticator's
//! settings, `[nat]`, `[location]`, the shape of `[flood]`) is refused as a whole, naming the sections: herald never applies half a file.
//!
//! What a reload applies, without dropping a call:
//! * `domains`, `aliases`, `[proxy]`, `[[route]]`, `[[gateway_set]]`: a new engine configuration
//!   that every engine takes at its next call (`herald_core::engine::ConfigUpdates`), keeping
//!   its transactions; a gateway destination whose set name and URI stay keeps its health.
//! * `[flood]` thresholds and durations (`max_requests`, `max_auth_failures`,
//!   `max_auth_failures_per_source`, `ban_s`, `account_failures`, `account_lock_max_s`): the
//!   guard's limits from the next request on; bans in force keep their end. Its windows,
//!   `max_sources` and `trusted` are fixed until a restart.
//! * `[[admin.token]]`: the tokens in force (a token can be rotated without a restart).
//!
//! The users of `[auth] users_file` need no reload: the file is watched, and `users.*` of the
//! admin API put a change in use at once.

use super::caller::{Caller, Tokens};
use super::rpc::{RpcError, REFUSED};
use crate::config::{Config, Flood, Listen};
use crate::protect::FloodGuard;
use herald_core::engine::{ConfigUpdates, EngineConfig};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Builds the engine configuration of a reloaded file, given the one in use (gateway health is
/// carried over from it).
pub type BuildEngineConfig = dyn Fn(&Config, &EngineConfig) -> EngineConfig + Send + Sync;

/// Reloads one configuration file into a running herald.
pub struct Reloader {
    /// The `--config` file; `None` when herald runs on the built-in configuration.
    path: Option<PathBuf>,
    /// The configuration in force (as loaded, with the command line's listeners).
    running: Mutex<Config>,
    /// `herald serve --listen ...` replaced the file's listeners: a reload keeps them.
    listen_override: Option<Vec<Listen>>,
    engine: Arc<ConfigUpdates>,
    build: Box<BuildEngineConfig>,
    /// The admin endpoint's tokens, once it serves.
    tokens: OnceLock<Arc<Tokens>>,
}

impl Reloader {
    /// `running` is the configuration herald started with (after command-line overrides);
    /// `engine` is what the engines take new configurations from; `build` makes one.
    pub fn new(
        path: Option<PathBuf>,
        running: Config,
        engine: Arc<ConfigUpdates>,
        build: impl Fn(&Config, &EngineConfig) -> EngineConfig + Send + Sync + 'static,
    ) -> Reloader {
        Reloader {
            path,
            running: Mutex::new(running),
            listen_override: None,
            engine,
            build: Box::new(build),
            tokens: OnceLock::new(),
        }
    }

    /// The listeners given on the command line, which replace the file's at every reload too.
    pub fn with_listen_override(mut self, listen: Vec<Listen>) -> Reloader {
        self.listen_override = Some(listen);
        self
    }

    /// The engine configuration in force (gateway sets included).
    pub fn engine(&self) -> Arc<EngineConfig> {
        self.engine.latest()
    }

    pub(crate) fn set_tokens(&self, tokens: Arc<Tokens>) {
        let _ = self.tokens.set(tokens);
    }

    /// Loads, checks and applies the file; `{changed: [...]}` on success. On any error nothing
    /// has changed. Logged with `who`.
    pub fn reload(&self, who: &Caller, flood: Option<&FloodGuard>) -> Result<Value, RpcError> {
        let outcome = self.try_reload(flood);
        match &outcome {
            Ok(v) => tracing::info!(%who, changed = %v["changed"], "configuration reloaded"),
            Err(e) => tracing::warn!(%who, error = %e.message, "configuration not reloaded; nothing changed"),
        }
        outcome
    }

    fn try_reload(&self, flood: Option<&FloodGuard>) -> Result<Value, RpcError> {
        let Some(path) = &self.path else {
            return Err(RpcError::new(
                REFUSED,
                "herald runs on its built-in configuration (no --config): nothing to reload",
            ));
        };
        let mut new = Config::load(path).map_err(|e| {
            RpcError::new(REFUSED, format!("not reloaded, nothing changed: {e}")).with_data(json!({
                "file": e.file, "line": e.line, "key": e.key, "message": e.message,
            }))
        })?;
        if let Some(listen) = &self.listen_override {
            new.listen = listen.clone();
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let fixed = needs_restart(&running, &new);
        if !fixed.is_empty() {
            return Err(RpcError::new(
                REFUSED,
                format!(
                    "not reloaded, nothing changed: {} cannot change while herald runs; restart herald to apply",
                    fixed.join(", ")
                ),
            )
            .with_data(json!({ "restart": fixed })));
        }
        let mut changed = changes(&running, &new);
        // Token files are read again: a secret rotated in its file is a change too. Checked by
        // Config::load; a file unreadable since then refuses the reload.
        let secrets = new.admin.secrets().map_err(|(_, m)| RpcError::new(REFUSED, format!("not reloaded: {m}")))?;
        let tokens = self.tokens.get();
        if !changed.contains(&"admin.token") && tokens.is_some_and(|t| t.named() != secrets) {
            changed.push("admin.token");
        }
        // The one step that could refuse goes first, so that a refusal leaves everything as it was.
        if let (true, Some(guard)) = (changed.contains(&"flood"), flood) {
            // needs_restart left only the limits to differ, which retune takes.
            guard.retune(&new.flood.settings()).map_err(|key| {
                RpcError::new(REFUSED, format!("not reloaded: flood.{key} cannot change while herald runs"))
            })?;
        }
        if let (true, Some(t)) = (changed.contains(&"admin.token"), tokens) {
            t.replace(secrets);
        }
        if changed.iter().any(|c| !matches!(*c, "admin.token" | "flood")) {
            let next = (self.build)(&new, &self.engine.latest());
            self.engine.publish(Arc::new(next));
        }
        *running = new;
        Ok(json!({ "changed": changed, "generation": self.engine.generation() }))
    }
}

/// The reloadable sections that differ.
fn changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |differs: bool, name: &'static str| {
        if differs {
            out.push(name);
        }
    };
    check(old.domains != new.domains, "domains");
    check(old.aliases != new.aliases, "aliases");
    check(old.proxy != new.proxy, "proxy");
    check(old.route != new.route, "route");
    check(old.gateway_set != new.gateway_set, "gateway_set");
    check(old.admin.token != new.admin.token, "admin.token");
    check(old.flood != new.flood, "flood");
    out
}

/// `fixed` with the limits of `tuned` that a reload applies (`FloodGuard::retune`).
fn tunable_flood(tuned: &Flood, fixed: &Flood) -> Flood {
    Flood {
        max_requests: tuned.max_requests,
        max_auth_failures: tuned.max_auth_failures,
        max_auth_failures_per_source: tuned.max_auth_failures_per_source,
        ban_s: tuned.ban_s,
        account_failures: tuned.account_failures,
        account_lock_max_s: tuned.account_lock_max_s,
        ..fixed.clone()
    }
}

/// The sections that differ and cannot change while herald runs.
fn needs_restart(old: &Config, new: &Config) -> Vec<&'static str> {
    // `new` with every reloadable section put back as it was: whatever still differs is fixed.
    let mut probe = new.clone();
    probe.domains = old.domains.clone();
    probe.aliases = old.aliases.clone();
    probe.proxy = old.proxy.clone();
    probe.route = old.route.clone();
    probe.gateway_set = old.gateway_set.clone();
    probe.admin.token = old.admin.token.clone();
    probe.flood = tunable_flood(&old.flood, &new.flood);
    let mut out = Vec::new();
    // The realms challenges name follow the domains when `[auth] realm` is empty; the
    // authenticator's realms are fixed while it runs.
    if old.challenge_realms() != new.challenge_realms() {
        out.push("auth (the realms, which follow domains)");
    }
    if probe == *old {
        return out;
    }
    macro_rules! fixed {
        ($($field:ident $(. $sub:ident)?),* $(,)?) => {
            $(if probe.$field$(.$sub)? != old.$field$(.$sub)? {
                out.push(concat!(stringify!($field) $(, ".", stringify!($sub))?));
            })*
        };
    }
    fixed!(
        server,
        listen,
        timers,
        registrar,
        limits,
        log,
        auth,
        metrics,
        flood,
        overload,
        tls,
        websocket,
        nat,
        location,
        admin.listen,
        admin.required,
        admin.max_body_bytes,
    );
    if out.is_empty() {
        out.push("a section that is read only at start");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        Config::from_toml(text, "t.toml").unwrap()
    }

    #[test]
    fn reloadable_sections_are_told_apart_from_fixed_ones() {
        let old = cfg("domains = [\"a.example\"]\n[auth]\nrealm = \"r\"\n");
        let new =
            cfg("domains = [\"a.example\", \"b.example\"]\n[auth]\nrealm = \"r\"\n[proxy]\nforking = \"sequential\"\n");
        assert_eq!(needs_restart(&old, &new), Vec::<&str>::new());
        assert_eq!(changes(&old, &new), vec!["domains", "proxy"]);
        let fixed =
            cfg("domains = [\"a.example\"]\n[auth]\nrealm = \"r\"\n[server]\nworkers = 3\n[timers]\nt1_ms = 400\n");
        assert_eq!(needs_restart(&old, &fixed), vec!["server", "timers"]);
        assert_eq!(needs_restart(&old, &old.clone()), Vec::<&str>::new());
    }

    #[test]
    fn flood_limits_reload_and_its_shape_does_not() {
        let old = cfg("[flood]\nmax_requests = 100\n");
        let new = cfg("[flood]\nmax_requests = 5\nban_s = 30\n");
        assert_eq!((needs_restart(&old, &new), changes(&old, &new)), (vec![], vec!["flood"]));
        let shape = cfg("[flood]\nmax_requests = 5\nwindow_s = 9\n");
        assert_eq!(needs_restart(&old, &shape), vec!["flood"]);
        let trusted = cfg("[flood]\ntrusted = [\"10.0.0.0/8\"]\n");
        assert_eq!(needs_restart(&old, &trusted), vec!["flood"]);
    }

    #[test]
    fn a_secret_rotated_in_its_token_file_is_taken_by_a_reload() {
        let dir = std::env::temp_dir().join(format!("herald-reload-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (file, secret) = (dir.join("herald.toml"), dir.join("ops.token"));
        std::fs::write(&secret, "first-secret-0123456789\n").unwrap();
        let text = format!("[[admin.token]]\nname = \"ops\"\ntoken_file = \"{}\"\n", secret.display());
        std::fs::write(&file, &text).unwrap();
        let config = Config::load(&file).unwrap();
        let routes: Arc<dyn herald_core::engine::SourceRoute> = Arc::new(crate::KernelRoutes::new());
        let seed = herald_core::Seed::fixed(0);
        let initial = Arc::new(config.engine_config(&[], routes.clone(), seed));
        let build = move |c: &Config, _: &EngineConfig| c.engine_config(&[], routes.clone(), seed);
        let reloader = Reloader::new(Some(file.clone()), config.clone(), Arc::new(ConfigUpdates::new(initial)), build);
        let tokens = Arc::new(Tokens::new(config.admin.secrets().unwrap()));
        reloader.set_tokens(tokens.clone());
        let who = Caller::Signal("test");
        assert_eq!(reloader.reload(&who, None).unwrap()["changed"], json!([]));
        std::fs::write(&secret, "second-secret-0123456789\n").unwrap();
        assert_eq!(reloader.reload(&who, None).unwrap()["changed"], json!(["admin.token"]));
        assert_eq!(tokens.named(), vec![("ops".to_string(), "second-secret-0123456789".to_string())]);
        assert_eq!(reloader.engine.generation(), 0, "tokens alone publish no engine configuration");
        std::fs::write(&secret, "short\n").unwrap();
        assert_eq!(reloader.reload(&who, None).unwrap_err().code, REFUSED);
        assert_eq!(tokens.named()[0].1, "second-secret-0123456789", "a refused reload keeps the tokens");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn domains_that_move_the_realms_need_a_restart() {
        let old = cfg("domains = [\"a.example\"]\n");
        let new = cfg("domains = [\"b.example\"]\n");
        assert_eq!(needs_restart(&old, &new), vec!["auth (the realms, which follow domains)"]);
    }
}
