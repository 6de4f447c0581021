//! `herald serve`: the proxy-registrar. Loads the configuration (or the embedded default),
//! binds the listeners, and runs the engine shards (shared by the workers) over the shared location
//! store.

use herald_core::engine::{Engine, EngineConfig, Forking, Listener, RecordRoute};
use herald_core::proxy::Identity;
use herald_core::registrar::{Registrar, RegistrarConfig};
use herald_core::transaction::Timers;
use herald_server::config::{self, Config, Listen, ListenTransport};
use herald_server::{shutdown_signal, BoundAddr, Server};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// TOML configuration file (see herald.example.toml). Without it, the embedded default:
    /// UDP and TCP on port 5060 of every address, one worker per core.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Listen on ADDR:PORT over UDP and TCP; repeatable; replaces the config's listeners.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Vec<SocketAddr>,
}

pub fn run(args: Args) -> ExitCode {
    let mut config = match Config::load_or_default(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(2);
        }
    };
    if !args.listen.is_empty() {
        config.listen = args
            .listen
            .iter()
            .map(|a| Listen { address: *a, transports: vec![ListenTransport::Udp, ListenTransport::Tcp] })
            .collect();
    }
    herald_server::init_logging(&config.log.level);
    let server = match Server::bind(config.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herald serve: {e}");
            return ExitCode::from(1);
        }
    };
    let engine_cfg = Arc::new(engine_config(&config, server.local_addrs()));
    tracing::info!(
        listeners = ?server.local_addrs().iter().map(|b| format!("{}/{}", b.transport, b.addr)).collect::<Vec<_>>(),
        domains = ?engine_cfg.identity.domains,
        workers = server.workers(),
        "herald serving"
    );
    let registrar_cfg = RegistrarConfig {
        default_expires: config.registrar.default_expires,
        min_expires: config.registrar.min_expires,
        max_expires: config.registrar.max_expires,
        max_bindings_per_aor: config.registrar.max_bindings_per_aor as usize,
        domains: Vec::new(), // the engine already decided the request is for a served domain
    };
    let store = Arc::new(Registrar::new(registrar_cfg.clone()).new_store());
    // One engine per shard; the shard index keeps the engines' DNS tokens and tag seeds apart.
    let result = server.run(
        move |shard| Engine::new(engine_cfg.clone(), store.clone(), Registrar::new(registrar_cfg.clone()), shard),
        shutdown_signal(),
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald serve: {e}");
            ExitCode::from(1)
        }
    }
}

/// Maps the configuration and the sockets actually bound onto what the engine needs.
fn engine_config(config: &Config, bound: &[BoundAddr]) -> EngineConfig {
    let interfaces = config::interface_addresses();
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for b in bound {
        if b.addr.ip().is_unspecified() {
            for ip in interfaces.iter().filter(|ip| ip.is_ipv4() == b.addr.is_ipv4()) {
                addrs.push(SocketAddr::new(*ip, b.addr.port()));
            }
        } else {
            addrs.push(b.addr);
        }
    }
    addrs.sort();
    addrs.dedup();
    let listeners = bound.iter().map(|b| Listener { transport: b.transport, addr: b.addr }).collect();
    EngineConfig {
        identity: Identity::new(addrs, config.effective_domains()),
        listeners,
        timers: Timers { t1: config.timers.t1(), t2: config.timers.t2(), t4: config.timers.t4(), ..Timers::default() },
        record_route: match config.proxy.record_route {
            config::RecordRoute::Always => RecordRoute::Always,
            config::RecordRoute::CrossTransport => RecordRoute::CrossTransport,
            config::RecordRoute::Never => RecordRoute::Never,
        },
        forking: match config.proxy.forking {
            config::Forking::Parallel => Forking::Parallel,
            config::Forking::Sequential => Forking::Sequential,
        },
        stateless: config.proxy.stateless,
        timer_c: Duration::from_secs(180),
    }
}
