//! The method layer without HTTP: request JSON in, result or error out, state checked before
//! and after.

use super::*;
use crate::admin::caller::Caller;
use crate::admin::context::{AdminApi, Live};
use crate::admin::reload::Reloader;
use crate::admin::rpc::RpcError;
use crate::admin::rpc::{self, INVALID_PARAMS, NOT_FOUND, REFUSED};
use crate::config::Config;
use crate::protect::FloodGuard;
use crate::stats::Stats;
use herald_core::engine::ConfigUpdates;
use herald_core::{Location, Peer, Seed};
use herald_store::{Aor, ContactUpdate, StoreConfig, Update};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

fn who() -> Caller {
    Caller::Loopback { peer: "127.0.0.1:1".parse().unwrap() }
}

fn register(store: &Location, user: &str, contacts: &[&str]) {
    let updates: Vec<ContactUpdate<'_>> = contacts.iter().map(|c| ContactUpdate::new(c, 600)).collect();
    let source = Peer::udp("192.0.2.1:5060".parse().unwrap());
    let update = Update { call_id: "c", cseq: 1, path: None, source, contacts: &updates };
    store.apply(&Aor::parse(&format!("sip:{user}@example.com")).unwrap(), Instant::now(), &update).unwrap();
}

fn methods_with(store: Arc<Location>, reload: Option<Reloader>) -> Methods {
    let flood = Arc::new(FloodGuard::new(Config::default().flood.settings(), Instant::now()));
    let live = Live {
        stats: Stats::new(1, Some(flood.clone())),
        flood: Some(flood),
        transactions: Box::new(|| 7),
        workers: 1,
        shards: 64,
        measured: false,
    };
    let mut api = AdminApi::new(store, true);
    api.reload = reload;
    Methods::new(api, live, Arc::default())
}

fn call(m: &Methods, method: &str, params: Value) -> Result<Value, RpcError> {
    let params = match params {
        Value::Object(p) => p,
        _ => Default::default(),
    };
    m.call(&who(), &rpc::Call { method: method.into(), params })
}

fn store_with(n: usize) -> Arc<Location> {
    let store = Arc::new(Location::with_config(StoreConfig::default()));
    for i in 0..n {
        register(&store, &format!("u{i:05}"), &[&format!("sip:u{i}@192.0.2.1:5060")]);
    }
    store
}

#[test]
fn a_listing_pages_through_every_binding_once() {
    let m = methods_with(store_with(2500), None);
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c, "limit": 1000 }),
            None => json!({ "limit": 1000 }),
        };
        let page = call(&m, "registrations.list", params).unwrap();
        pages += 1;
        for b in page["registrations"].as_array().unwrap() {
            assert!(seen.insert(b["aor"].as_str().unwrap().to_string()), "listed twice: {b}");
            assert_eq!(b["expires_in"].as_u64().map(|s| s > 590), Some(true));
            assert_eq!(b["source"], "UDP:192.0.2.1:5060".replace("UDP", &herald_core::Transport::Udp.to_string()));
        }
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 50, "the listing ends");
    }
    assert_eq!(seen.len(), 2500);
    assert!(pages >= 3, "{pages} pages of at most 1000");
    let err = call(&m, "registrations.list", json!({ "cursor": "ffff" })).unwrap_err();
    assert_eq!(err.code, INVALID_PARAMS, "an unknown cursor: {err:?}");
}

#[test]
fn listings_filter_by_prefix_and_user() {
    let m = methods_with(store_with(300), None);
    let page = call(&m, "registrations.list", json!({ "prefix": "sip:u001", "limit": 10_000 })).unwrap();
    let aors: Vec<&str> =
        page["registrations"].as_array().unwrap().iter().map(|b| b["aor"].as_str().unwrap()).collect();
    assert_eq!(aors.len(), 100, "u00100..u00199");
    assert!(aors.iter().all(|a| a.starts_with("u001")));
    let page = call(&m, "registrations.list", json!({ "user": "u00042" })).unwrap();
    assert_eq!(page["registrations"].as_array().unwrap().len(), 1);
    assert_eq!(call(&m, "registrations.list", json!({ "limit": 0 })).unwrap_err().code, INVALID_PARAMS);
    assert_eq!(call(&m, "registrations.list", json!({ "bogus": 1 })).unwrap_err().code, INVALID_PARAMS);
}

#[test]
fn show_and_remove_change_only_what_exists() {
    let store = store_with(0);
    register(&store, "alice", &["sip:alice@192.0.2.1:5060", "sip:alice@192.0.2.2:5060"]);
    register(&store, "bob", &["sip:bob@192.0.2.3:5060"]);
    let m = methods_with(store.clone(), None);
    let shown = call(&m, "registrations.show", json!({ "aor": "sip:alice@example.com" })).unwrap();
    assert_eq!(shown["bindings"].as_array().unwrap().len(), 2);

    // Bad input: an error, and the store as it was.
    for (method, params, code) in [
        ("registrations.show", json!({ "aor": "carol@example.com" }), NOT_FOUND),
        ("registrations.show", json!({ "aor": "example.com" }), INVALID_PARAMS),
        ("registrations.show", json!({}), INVALID_PARAMS),
        ("registrations.remove", json!({ "aor": "carol@example.com" }), NOT_FOUND),
        ("registrations.remove", json!({ "aor": "alice@example.com", "contact": "sip:x@192.0.2.9" }), NOT_FOUND),
        ("registrations.remove", json!({ "aor": 5 }), INVALID_PARAMS),
    ] {
        assert_eq!(call(&m, method, params.clone()).unwrap_err().code, code, "{method} {params}");
        assert_eq!(store.len(), 3, "{method} {params} changed nothing");
    }
    assert_eq!(m.counters.changes("registrations.remove", "refused"), 3);

    let r =
        call(&m, "registrations.remove", json!({ "aor": "alice@example.com", "contact": "sip:alice@192.0.2.2:5060" }));
    assert_eq!(r.unwrap()["removed"], 1);
    assert_eq!(store.len(), 2);
    assert_eq!(call(&m, "registrations.remove", json!({ "aor": "sip:bob@example.com" })).unwrap()["removed"], 1);
    assert_eq!(store.len(), 1);
    assert_eq!(m.counters.changes("registrations.remove", "done"), 2);
}

#[test]
fn stats_bans_and_unknown_methods() {
    let m = methods_with(store_with(3), None);
    let s = call(&m, "stats", Value::Null).unwrap();
    assert_eq!((s["transactions"].as_u64(), s["location"]["bindings"].as_u64()), (Some(7), Some(3)));
    assert_eq!(s["flood"]["banned_sources"], 0);
    assert!(s["counters"]["udp_received"].is_u64());
    assert_eq!(call(&m, "flood.list", Value::Null).unwrap()["total"], 0);
    assert_eq!(call(&m, "flood.unban", json!({ "source": "192.0.2.7" })).unwrap_err().code, NOT_FOUND);
    assert_eq!(call(&m, "flood.unban", json!({ "source": "nope" })).unwrap_err().code, INVALID_PARAMS);
    assert_eq!(call(&m, "nope", Value::Null).unwrap_err().code, rpc::METHOD_NOT_FOUND);
    assert_eq!(call(&m, "methods", Value::Null).unwrap().as_array().unwrap().len(), METHODS.len());
    assert_eq!(call(&m, "gateways.list", Value::Null).unwrap_err().code, rpc::UNAVAILABLE, "no reload, no sets");
}

#[test]
fn reload_applies_a_valid_file_and_refuses_the_rest_unchanged() {
    let dir = std::env::temp_dir().join(format!("herald-admin-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("herald.toml");
    let text = "domains = [\"a.example\"]\n[auth]\nrealm = \"r\"\n";
    std::fs::write(&file, text).unwrap();
    let config = Config::load(&file).unwrap();
    let build = |c: &Config, _: &herald_core::engine::EngineConfig| {
        c.engine_config(&[], Arc::new(crate::KernelRoutes::new()), Seed::fixed(0))
    };
    let updates = Arc::new(ConfigUpdates::new(Arc::new(build(
        &config,
        &Config::default().engine_config(&[], Arc::new(crate::KernelRoutes::new()), Seed::fixed(0)),
    ))));
    let reloader = Reloader::new(Some(file.clone()), config, updates.clone(), build);
    let m = methods_with(store_with(0), Some(reloader));

    assert_eq!(call(&m, "config.reload", Value::Null).unwrap()["changed"], json!([]));
    assert_eq!(updates.generation(), 0, "an unchanged file publishes nothing");

    std::fs::write(&file, "domains = [\"a.example\", \"b.example\"]\n[auth]\nrealm = \"r\"\n").unwrap();
    assert_eq!(call(&m, "config.reload", Value::Null).unwrap()["changed"], json!(["domains"]));
    assert_eq!(updates.generation(), 1);
    assert!(updates.latest().identity.domains.contains(&"b.example".to_string()));

    std::fs::write(&file, "domains = [\"a.example\"]\n[auth]\nrealm = \"r\"\n[timers]\nt1_ms = 9000\n").unwrap();
    let e = call(&m, "config.reload", Value::Null).unwrap_err();
    assert_eq!(e.code, REFUSED);
    assert_eq!(e.data.as_ref().unwrap()["key"], "timers.t1_ms", "{e:?}");
    assert_eq!(e.data.as_ref().unwrap()["line"], 5);
    std::fs::write(&file, "domains = [\"a.example\"]\n[auth]\nrealm = \"r\"\n[server]\nworkers = 3\n").unwrap();
    let e = call(&m, "config.reload", Value::Null).unwrap_err();
    assert_eq!((e.code, e.data.as_ref().unwrap()["restart"].clone()), (REFUSED, json!(["server"])));
    assert_eq!(updates.generation(), 1, "refused reloads publish nothing");
    assert!(updates.latest().identity.domains.contains(&"b.example".to_string()));
    assert_eq!(m.counters.changes("config.reload", "refused"), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The listing of a large store, with a REGISTER-like writer running beside it: how long each
/// page takes and how long a writer waits at most. Run by hand (about a minute in a debug
/// build): `cargo test -p herald-server --lib -- --ignored --nocapture a_million`.
#[test]
#[ignore]
fn a_million_bindings_are_listed_without_stalling_writers() {
    const N: usize = 1_000_000;
    let filling = Instant::now();
    let store = store_with(N);
    println!("{N} bindings stored in {:?}", filling.elapsed());
    let m = methods_with(store.clone(), None);
    let writes = |store: Arc<Location>, stop: Arc<std::sync::atomic::AtomicBool>, first: u32| {
        std::thread::spawn(move || {
            let (mut worst, mut n) = (std::time::Duration::ZERO, first);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                register(&store, &format!("w{n}"), &["sip:w@192.0.2.9:5060"]);
                worst = worst.max(t.elapsed());
                n += 1;
                // About 2,000 REGISTERs a second.
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            (worst, n - first)
        })
    };
    // The same writes without a listing, for comparison.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let alone = writes(store.clone(), stop.clone(), 0);
    std::thread::sleep(std::time::Duration::from_secs(5));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (worst_alone, writes_alone) = alone.join().unwrap();
    println!("{writes_alone} writes alone, slowest {worst_alone:?}");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = writes(store.clone(), stop.clone(), 1 << 30);
    let started = Instant::now();
    let (mut cursor, mut seen, mut pages, mut worst_page) = (None::<String>, 0usize, 0usize, std::time::Duration::ZERO);
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c, "limit": 1000 }),
            None => json!({ "limit": 1000 }),
        };
        let t = Instant::now();
        let page = call(&m, "registrations.list", params).unwrap();
        worst_page = worst_page.max(t.elapsed());
        seen += page["registrations"].as_array().unwrap().len();
        pages += 1;
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (worst_write, writes) = writer.join().unwrap();
    println!(
        "{seen} bindings in {pages} pages, {:?} in all; slowest page {worst_page:?}; \
         {writes} writes beside it, slowest {worst_write:?}",
        started.elapsed()
    );
    assert!(seen >= N);
}
