//! `herald route check`: which `[[route]]` rule a request would match and where it would go,
//! from the configuration `herald serve` would load, without sending anything. The decision is
//! the engine's own (`herald_core::routing::decide`), with the same table, served domains and
//! gateway sets.

use herald_core::engine::{EngineConfig, Listener, SourceRoute};
use herald_core::gateways::{order, CallKeys};
use herald_core::routing::{decide, host_port, rewrite, rule_request_uri, Action, Decision, Request, Rule};
use herald_core::Seed;
use herald_server::config::Config;
use herald_sip::uri::Uri;
use herald_sip::Method;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Print the rule a request matches, its Request-URI after the rule's number handling, and
    /// where it would go (location service, gateway set with its destinations in the order its
    /// algorithm tries them, next hop, rejection, or the Request-URI). Nothing is sent.
    ///
    /// Exit status: 0 done, 2 usage or configuration error.
    Check(CheckArgs),
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The request: METHOD and Request-URI, e.g. 'INVITE sip:+441234@example.com' or
    /// 'MESSAGE tel:+441234'.
    request: String,
    /// The source address the request comes from (for `source` matchers).
    #[arg(long, default_value = "127.0.0.1")]
    from: IpAddr,
    /// The caller answered the digest challenge (for `authenticated` matchers).
    #[arg(long)]
    authenticated: bool,
    /// The Call-ID (for a gateway set hashing Call-IDs).
    #[arg(long, default_value = "")]
    call_id: String,
    /// The From user (for a gateway set hashing From users).
    #[arg(long, default_value = "")]
    from_user: String,
    /// Configuration file, as `herald serve --config` (default: the built-in one).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(command: Command) -> ExitCode {
    let Command::Check(args) = command;
    match check(&args) {
        Ok(report) => {
            if args.json {
                println!("{report:#}");
            } else {
                print!("{}", text(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("herald route check: {e}");
            ExitCode::from(2)
        }
    }
}

/// The engine's configuration from `config`: its listeners as configured (`herald serve` binds
/// them; a wildcard address stands for every interface address, as there).
fn engine_config(config: &Config) -> EngineConfig {
    #[derive(Debug)]
    struct NoRoute;
    impl SourceRoute for NoRoute {
        fn source_for(&self, _: IpAddr) -> Option<IpAddr> {
            None
        }
    }
    let listeners: Vec<Listener> = config
        .listen
        .iter()
        .flat_map(|l| l.transports.iter().map(|t| Listener { transport: t.to_transport(), addr: l.address }))
        .collect();
    config.engine_config(&listeners, Arc::new(NoRoute), Seed::fixed(0))
}

/// The report, as JSON (the text form is written from it).
fn check(args: &CheckArgs) -> Result<Value, String> {
    let config = Config::load_or_default(args.config.as_deref()).map_err(|e| e.to_string())?;
    let cfg = engine_config(&config);
    let (method, uri) = args
        .request
        .trim()
        .split_once(char::is_whitespace)
        .ok_or("give the request as 'METHOD URI', e.g. 'INVITE sip:alice@example.com'")?;
    let (method, uri) = (method.trim(), uri.trim());
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!("'{method}' is not a method"));
    }
    let ruri = Uri::parse(uri.as_bytes()).map_err(|e| format!("'{uri}' is not a URI: {e}"))?;
    if matches!(ruri, Uri::Other(_)) || (ruri.as_tel().is_some() && cfg.routing.is_empty()) {
        return Ok(json!({"request_uri": uri, "action": "reject", "status": 416, "reason": "Unsupported URI Scheme"}));
    }
    // Methods are case-sensitive (RFC 3261 §7.1); on the command line `invite` means INVITE.
    let method = method.to_ascii_uppercase();
    let method = Method::from_token(&method);
    let req = Request { method: Some(method), in_dialog: false, source: args.from, authenticated: args.authenticated };
    let mut report = match decide(&cfg.routing, &cfg.identity, &ruri, req) {
        Decision::Registrar => json!({"request_uri": uri, "action": "registrar"}),
        Decision::Herald if method == Method::Options => json!({"request_uri": uri, "action": "herald", "status": 200}),
        Decision::Herald => json!({"request_uri": uri, "action": "herald", "status": 404, "reason": "Not Found"}),
        Decision::Location => json!({"request_uri": uri, "action": "location"}),
        Decision::Unsupported => {
            json!({"request_uri": uri, "action": "reject", "status": 416, "reason": "Unsupported URI Scheme"})
        }
        Decision::RequestUri => json!({"request_uri": uri, "action": "request_uri"}),
        Decision::Rule(i, rule) => {
            let mut r = rule_action(&cfg, &ruri, rule, args);
            r["rule"] = json!({"index": i, "name": rule.name});
            r
        }
    };
    if report.get("rule").is_none() {
        report["rule"] = Value::Null;
    }
    // What the auth gate makes of it: the table asked as for a caller who did not
    // authenticate; a request that leaves herald then is a relay (engine/auth_gate.rs).
    let anonymous = decide(&cfg.routing, &cfg.identity, &ruri, Request { authenticated: false, ..req });
    let allowed = matches!(anonymous, Decision::Rule(_, rule) if rule.allow_unauthenticated);
    report["relay"] = json!(!anonymous.stays() && !allowed);
    report["auth_enabled"] = json!(config.auth.enabled);
    Ok(report)
}

/// What `rule` does with `ruri`: as `herald serve`'s engine (`engine/route_rules.rs`).
fn rule_action(cfg: &EngineConfig, ruri: &Uri<'_>, rule: &Rule, args: &CheckArgs) -> Value {
    let or_same = |uri: Option<String>| uri.unwrap_or_else(|| ruri.to_string());
    let request_uri = or_same(rule_request_uri(ruri, rule, &cfg.identity));
    match &rule.action {
        Action::Location => json!({"request_uri": request_uri, "action": "location"}),
        Action::NextHop(hop) => json!({"request_uri": request_uri, "action": "next_hop", "next_hop": hop}),
        Action::Reject(status, reason) => {
            json!({"request_uri": request_uri, "action": "reject", "status": status, "reason": &**reason})
        }
        Action::RequestUri => json!({"request_uri": request_uri, "action": "request_uri"}),
        Action::GatewaySet(name) => {
            let Some(set) = cfg.gateways.get(name) else {
                return json!({"request_uri": request_uri, "action": "gateway_set", "gateway_set": name, "destinations": []});
            };
            let keys = CallKeys { call_id: args.call_id.as_bytes(), from_user: args.from_user.as_bytes() };
            let mut tries = order(set, keys);
            tries.truncate(set.failover.max_attempts.max(1));
            let destinations: Vec<Value> = tries
                .iter()
                .map(|&d| {
                    let dest = &set.destinations[d].uri;
                    // A tel: number becomes a sip: URI of each destination's host, as the engine sends it.
                    json!({"uri": dest, "request_uri": or_same(rewrite(ruri, &rule.number, host_port(dest).as_deref()))})
                })
                .collect();
            json!({
                "request_uri": request_uri,
                "action": "gateway_set",
                "gateway_set": name,
                "algorithm": format!("{:?}", set.algorithm),
                "destinations": destinations,
            })
        }
    }
}

/// The report as text, one fact a line.
fn text(r: &Value) -> String {
    let mut out = String::new();
    match r.get("rule").filter(|v| !v.is_null()) {
        Some(rule) => {
            let name = rule["name"].as_str().map(|n| format!(" \"{n}\"")).unwrap_or_default();
            out.push_str(&format!("rule: route[{}]{name}\n", rule["index"]));
        }
        None => out.push_str("rule: none (herald's default routing)\n"),
    }
    out.push_str(&format!("request-uri: {}\n", r["request_uri"].as_str().unwrap_or_default()));
    let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
    let goes = match s("action").as_str() {
        "registrar" => "the registrar (REGISTER for a served domain)".to_owned(),
        "herald" => format!("herald answers {}", r["status"]),
        "location" => "the location service (registered contacts)".to_owned(),
        "next_hop" => format!("next hop {}", s("next_hop")),
        "reject" => format!("rejected: {} {}", r["status"], s("reason")),
        "request_uri" => "forwarded by its Request-URI (RFC 3263)".to_owned(),
        "gateway_set" => {
            let dests = r["destinations"].as_array().cloned().unwrap_or_default();
            let mut g = format!("gateway set \"{}\"", s("gateway_set"));
            if dests.is_empty() {
                g.push_str(": no destination up (503)");
            }
            for (i, d) in dests.iter().enumerate() {
                g.push_str(&format!(
                    "\n  {}. {} (request-uri {})",
                    i + 1,
                    d["uri"].as_str().unwrap_or_default(),
                    d["request_uri"].as_str().unwrap_or_default()
                ));
            }
            g
        }
        other => other.to_owned(),
    };
    out.push_str(&format!("goes to: {goes}\n"));
    let relay = match (r["relay"].as_bool(), r["auth_enabled"].as_bool()) {
        (Some(true), Some(true)) => {
            "challenged (a relay: it leaves herald), unless from [auth] trusted_peers or with allow_relay"
        }
        (Some(true), _) => "pass ([auth] enabled = false)",
        _ => "no challenge for where it goes (it stays with herald, or its rule has allow_unauthenticated)",
    };
    out.push_str(&format!("unauthenticated callers: {relay}\n"));
    out
}
