//! `herald serve`: the proxy-registrar. Loads the configuration (or the embedded default),
//! binds the listeners, and runs the engine shards (shared by the workers) over the shared location
//! store.

use herald_core::auth::SharedCredentials;
use herald_core::auth::{Authenticator, FileWatcher, Reload};
use herald_core::engine::{ConfigUpdates, Engine, EngineConfig, Listener, ResponseStats, SourceRoute};
use herald_core::registrar::Registrar;
use herald_core::transaction::AbsorbGrid;
use herald_core::Location;
use herald_core::Seed;
use herald_server::admin::{AdminApi, Reloader, UsersFile};
use herald_server::config::{Admin, Config, Listen, ListenTransport};
use herald_server::gateways::ProbingSettings;
use herald_server::{shutdown_signal, KernelRoutes, Server};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The grid of the transaction timers that only absorb retransmissions
/// (`herald_core::transaction::AbsorbGrid`): they fire at most this late, four times a second
/// for all shards together, instead of one wake-up each.
const ABSORB_STEP: Duration = Duration::from_millis(250);

#[derive(clap::Args)]
pub struct Args {
    /// TOML configuration file (see herald.example.toml). Without it, the embedded default:
    /// UDP and TCP on port 5060 of every address, one worker per core.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Listen on ADDR:PORT over UDP and TCP; repeatable; replaces the config's listeners.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
    /// Listen on ADDR:PORT over TLS (certificate from `[tls]`); repeatable; with --listen, adds
    /// to those, else replaces the config's listeners too.
    #[arg(long, value_name = "ADDR:PORT")]
    listen_tls: Vec<SocketAddr>,
    /// Listen on ADDR:PORT for SIP over WebSocket (RFC 7118, `[websocket]`); repeatable; as
    /// --listen-tls.
    #[arg(long, value_name = "ADDR:PORT")]
    listen_ws: Vec<SocketAddr>,
    /// Listen on ADDR:PORT for SIP over secure WebSocket (certificate from `[tls]`);
    /// repeatable; as --listen-tls.
    #[arg(long, value_name = "ADDR:PORT")]
    listen_wss: Vec<SocketAddr>,
}

pub fn run(args: Args) -> ExitCode {
    let mut config = match Config::load_or_default(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(2);
        }
    };
    let only = |addrs: &[SocketAddr], t: ListenTransport| addrs.iter().map(move |a| (*a, vec![t])).collect::<Vec<_>>();
    let streams = [
        only(&args.listen_tls, ListenTransport::Tls),
        only(&args.listen_ws, ListenTransport::Ws),
        only(&args.listen_wss, ListenTransport::Wss),
    ];
    if !args.listen.is_empty() || streams.iter().any(|s| !s.is_empty()) {
        let plain = args.listen.iter().map(|a| (*a, vec![ListenTransport::Udp, ListenTransport::Tcp]));
        let all = plain.chain(streams.into_iter().flatten());
        config.listen = all.map(|(address, transports)| Listen { address, transports }).collect();
    }
    if args.config.is_none() {
        // The built-in configuration answers `herald ctl` on loopback (if the port is free).
        config.admin = Admin::builtin();
    }
    herald_server::init_logging(&config.log.level);
    // Before the heap grows: herald_sys::set_thp_disabled says why huge pages are off by default.
    if let Err(e) = herald_sys::set_thp_disabled(!config.server.transparent_huge_pages) {
        tracing::warn!("[server] transparent_huge_pages: prctl(PR_SET_THP_DISABLE) failed: {e}");
    }
    let (auth, users) = match authenticator(&config) {
        Ok(a) => a.unzip(),
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(2);
        }
    };
    let mut server = match Server::bind(config.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(1);
        }
    };
    // Failed authentications count against their (source, user) pair, their source and their
    // account ([flood] max_auth_failures, max_auth_failures_per_source, account_failures); the
    // guard also tells the authenticator which answers to refuse unchecked while locked.
    let auth = auth.map(|a| {
        Arc::new(match server.flood_guard() {
            Some(guard) => a.with_failure_sink(guard),
            None => a,
        })
    });
    // Unpredictable branches and tags; one seed per process (tests and the simulator fix it).
    let seed = Seed::random();
    let listeners: Vec<Listener> =
        server.local_addrs().iter().map(|b| Listener { transport: b.transport, addr: b.addr }).collect();
    let mut engine_cfg = config.engine_config(&listeners, Arc::new(KernelRoutes::new()), seed);
    // State-absorbing transaction timers of all shards fire together on one grid (issue 21).
    engine_cfg.timers.absorb_grid = Some(AbsorbGrid { epoch: Instant::now(), step: ABSORB_STEP });
    let engine_cfg = Arc::new(engine_cfg);
    tracing::info!(
        listeners = ?server.local_addrs().iter().map(|b| format!("{}/{}", b.transport, b.addr)).collect::<Vec<_>>(),
        domains = ?engine_cfg.identity.domains,
        workers = server.workers(),
        "herald serving"
    );
    // One registrar, cloned into every shard: the clones share its counters. They and the
    // authenticator's and the engines' own responses are exported with the server's (metrics
    // endpoint: herald_registrar_*, herald_auth_*, herald_local_responses_total; Stats::snapshot).
    let registrar = Registrar::new(config.registrar_config(seed.derive("registrar", 0)));
    let store = Arc::new(registrar.new_store());
    // [location]: the registrations of the last run come back (loaded in the background) and
    // every change is kept in the location database.
    match herald_server::location::open(&config, args.config.as_deref(), &store) {
        Ok(Some(location)) => server.with_durable_location(location),
        Ok(None) => {}
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(2);
        }
    }
    // [location] mode = "redis": registrations shared with the other nodes through Redis.
    let redis = match herald_server::location_redis::start(&config, &server, &store, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(2);
        }
    };
    // [nat] keep-alives to its UDP bindings behind NAT, sent while serving.
    server.with_nat_keepalives(store.clone(), registrar.edge_flows());
    let stats = server.stats();
    stats.export_registrar(registrar.shared_stats());
    let responses = Arc::new(ResponseStats::default());
    stats.export_responses(responses.clone());
    if let Some(a) = &auth {
        stats.export_auth(a.shared_stats());
    }
    // The admin API (herald ctl) and SIGHUP's reload; the engines take a reloaded
    // configuration from `updates` at their next message.
    let updates = Arc::new(ConfigUpdates::new(engine_cfg.clone()));
    // The gateway sets in force (reloads included), probed and exported while serving.
    let probing = ProbingSettings::new(&config.gateway_set);
    server.with_gateways(updates.clone(), probing.clone());
    server.with_admin(admin_api(&args, &config, listeners, store.clone(), users, updates.clone(), seed, probing));
    // One engine per shard; the shard index keeps the engines' DNS tokens and tag seeds apart.
    let result = server.run(
        move |shard| {
            let engine = Engine::new(engine_cfg.clone(), store.clone(), registrar.clone(), shard)
                .with_response_stats(responses.clone())
                .with_config_updates(updates.clone());
            match &auth {
                Some(a) => engine.with_auth(a.clone()),
                None => engine,
            }
        },
        shutdown_signal(),
    );
    // [location] mode = "redis": the changes still queued reach Redis before the process ends.
    herald_server::location_redis::finish(redis);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald serve: {e}");
            ExitCode::from(1)
        }
    }
}

/// The authenticator `[auth]` asks for, with its users file loaded and watched (a thread waits
/// for it to change - inotify, or every second where that cannot be used - and swaps the table
/// in; a broken file keeps the old table and is logged as FILE:LINE). `None` when
/// authentication is off.
fn authenticator(config: &Config) -> Result<Option<(Authenticator, Arc<SharedCredentials>)>, String> {
    let a = &config.auth;
    if !a.enabled {
        tracing::warn!("[auth] enabled = false: no request is authenticated");
        return Ok(None);
    }
    if let Some((key, message)) = a.problems() {
        return Err(format!("key '{key}': {message}"));
    }
    let realm = config.auth_realm();
    let (mut watcher, credentials) = FileWatcher::open(&a.users_file, &realm).map_err(|e| e.to_string())?;
    let realms = config.challenge_realms();
    report_realms(&a.users_file, &credentials.current(), &realms);
    tracing::info!(file = %a.users_file.display(), realms = ?realms, users = credentials.current().len(), "digest authentication on");
    let random = random_bytes().map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let secret = config.nonce_secret(&random[..32]);
    let salt_seed = u64::from_le_bytes(random[32..40].try_into().expect("8 bytes"));
    let unix_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let shared = credentials.clone();
    let in_use = credentials.clone();
    let auth =
        Authenticator::new(config.auth_config(), credentials, &secret, salt_seed, std::time::Instant::now(), unix_now);
    std::thread::Builder::new()
        .name("herald-users".into())
        .spawn(move || loop {
            watcher.wait(Duration::from_secs(1));
            match watcher.poll() {
                Reload::Unchanged => {}
                Reload::Loaded(users) => {
                    tracing::info!(file = %watcher.path().display(), users, "users file reloaded");
                    report_realms(watcher.path(), &shared.current(), &realms);
                }
                Reload::Failed(e) => tracing::error!("users file not reloaded, previous users stay in use: {e}"),
                Reload::Missing => {
                    tracing::warn!(file = %watcher.path().display(), "users file is gone; previous users stay in use")
                }
            }
        })
        .map_err(|e| format!("cannot start the users file watcher: {e}"))?;
    Ok(Some((auth, in_use)))
}

/// What the admin API works on: the location store, the users file and the table the
/// authenticator reads (when `[auth]` is on), and the reload of `--config` (the listeners given
/// on the command line stay at every reload).
// One argument per thing the API serves or reloads (the gateway probing settings included).
#[allow(clippy::too_many_arguments)]
fn admin_api(
    args: &Args,
    config: &Config,
    listeners: Vec<Listener>,
    store: Arc<Location>,
    users: Option<Arc<SharedCredentials>>,
    updates: Arc<ConfigUpdates>,
    seed: Seed,
    probing: ProbingSettings,
) -> AdminApi {
    let routes: Arc<dyn SourceRoute> = Arc::new(KernelRoutes::new());
    // A reloaded file's probing settings are in place before the engines see its gateway sets.
    let build = move |c: &Config, previous: &EngineConfig| {
        probing.replace(&c.gateway_set);
        c.reloaded_engine_config(&listeners, routes.clone(), seed, previous)
    };
    let mut reload = Reloader::new(args.config.clone(), config.clone(), updates, build);
    let cli = [&args.listen, &args.listen_tls, &args.listen_ws, &args.listen_wss];
    if cli.iter().any(|l| !l.is_empty()) {
        reload = reload.with_listen_override(config.listen.clone());
    }
    let api = AdminApi::new(store, config.registrar.use_domain).with_reload(reload);
    match users {
        Some(shared) => api.with_users(UsersFile::new(config.auth.users_file.clone(), shared, config)),
        None => api,
    }
}

/// Warns about realms herald challenges in that have no users in the file (nobody of that
/// domain can authenticate), and realms of the file that no challenge names (their users are
/// never consulted): a users file made for another host name or domain is not refused, but the
/// operator is told what to do.
fn report_realms(file: &std::path::Path, creds: &herald_core::auth::Credentials, realms: &[String]) {
    if creds.is_empty() {
        tracing::warn!(file = %file.display(), realms = ?realms, "no users yet: add one with `herald users add NAME`");
        return;
    }
    for r in realms.iter().filter(|r| creds.users_in(r).is_empty()) {
        tracing::warn!(file = %file.display(), realm = %r, "no users in this realm: requests challenged in it cannot authenticate; add them with `herald users add NAME --realm {r}`");
    }
    for r in creds.realms().filter(|r| !realms.iter().any(|x| x == r)) {
        tracing::warn!(file = %file.display(), realm = %r, challenged = ?realms, "the users of this realm are never asked for: herald challenges in other realms (set [auth] realm or domains, or re-add the users with --realm)");
    }
}

/// 40 random bytes: a per-process nonce secret and salt seed.
fn random_bytes() -> std::io::Result<[u8; 40]> {
    use std::io::Read;
    let mut b = [0u8; 40];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}
