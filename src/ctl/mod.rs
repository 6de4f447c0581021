//! `herald ctl`: the admin API of a running herald (JSON-RPC 2.0 over HTTP, `[admin]`), with
//! human-readable output, or the raw results with `--json`.
//!
//! Where herald is: `--url`, else `HERALD_ADMIN_URL`, else `[admin] listen` of `--config` (or
//! `HERALD_CONFIG`), else where `herald serve` without `--config` listens (`127.0.0.1:5090`). The token: `--token`,
//! else `HERALD_ADMIN_TOKEN`, else the first `[[admin.token]]` of that configuration.

mod client;
mod show;

use client::{Client, Failure};
use herald_server::config::{Admin, Config};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The admin endpoint, e.g. http://127.0.0.1:5090/ (default: from the configuration).
    #[arg(long, global = true, value_name = "URL")]
    url: Option<String>,
    /// The bearer token (default: HERALD_ADMIN_TOKEN, else the configuration's first token).
    #[arg(long, global = true, value_name = "TOKEN")]
    token: Option<String>,
    /// The configuration herald serve runs with, to find the endpoint and token in `[admin]`.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the raw JSON-RPC results (one JSON value per line; a listing prints one per page).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Registrations in the location store.
    #[command(subcommand)]
    Registrations(Registrations),
    /// Transactions, message counts, drops, bans, overload state.
    Stats,
    /// Flood bans and user locks (`[flood]`).
    #[command(subcommand)]
    Bans(Bans),
    /// Gateway sets and their destinations' health.
    #[command(subcommand)]
    Gateways(Gateways),
    /// Reload the configuration file herald runs with (as SIGHUP does).
    Reload,
    /// Users of digest authentication (the running herald's users file).
    #[command(subcommand)]
    Users(Users),
    /// Call any method with JSON params (`herald ctl call methods` lists them).
    Call {
        method: String,
        /// Named parameters as a JSON object.
        #[arg(default_value = "{}")]
        params: String,
    },
}

#[derive(clap::Subcommand)]
enum Registrations {
    /// Every binding, page by page as herald sends them.
    List {
        /// Only AoRs (user@domain) starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only this user's AoRs.
        #[arg(long)]
        user: Option<String>,
        /// Bindings per page (1..=10000).
        #[arg(long, default_value_t = 1000)]
        page: usize,
    },
    /// The bindings of one AoR.
    Show { aor: String },
    /// Remove one binding (--contact) or every binding of an AoR.
    Remove {
        aor: String,
        #[arg(long)]
        contact: Option<String>,
    },
}

#[derive(clap::Subcommand)]
enum Bans {
    /// Bans and user locks in force.
    List {
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
    /// Lift the bans and user locks of one source (IP address; IPv6: its /64).
    Unban { source: String },
}

#[derive(clap::Subcommand)]
enum Gateways {
    /// Every set and the health of its destinations.
    List,
    /// Force a destination up or down, or give it back to probes and calls (auto).
    Set {
        set: String,
        destination: String,
        #[arg(value_parser = ["up", "down", "auto"])]
        state: String,
    },
}

#[derive(clap::Subcommand)]
enum Users {
    /// Users by realm.
    List {
        #[arg(long)]
        realm: Option<String>,
    },
    /// Add a user or change a password (NAME or NAME@DOMAIN).
    Add {
        name: String,
        #[arg(long)]
        realm: Option<String>,
        /// Read the password from the first line of standard input (no prompt).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Remove a user.
    Remove {
        name: String,
        #[arg(long)]
        realm: Option<String>,
    },
}

/// Exit status: 0 done, 1 herald refused (the JSON-RPC error is printed), 2 usage or
/// configuration error, 3 herald could not be reached or refused the token.
pub fn run(args: Args) -> ExitCode {
    let (url, token) = match endpoint(&args) {
        Ok(e) => e,
        Err(message) => {
            eprintln!("herald ctl: {message}");
            return ExitCode::from(2);
        }
    };
    let mut client = Client::new(url, token);
    match execute(&mut client, args.command, args.json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Rpc { code, message, data }) => {
            eprintln!("herald ctl: {message} (error {code})");
            if let Some(d) = data {
                eprintln!("  {d}");
            }
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("herald ctl: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Transport(message)) => {
            eprintln!("herald ctl: {message}");
            ExitCode::from(3)
        }
        // The reader of the output went away (`herald ctl ... | head`): nothing more to say.
        Err(Failure::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("herald ctl: cannot write the output: {e}");
            ExitCode::from(1)
        }
    }
}

/// Writes `text` to standard output.
fn emit(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(Failure::Output)
}

fn execute(client: &mut Client, command: Command, json: bool) -> Result<(), Failure> {
    let out = |v: &Value, human: fn(&Value) -> String| {
        if json {
            emit(&format!("{v}\n"))
        } else {
            emit(&human(v))
        }
    };
    match command {
        Command::Registrations(Registrations::List { prefix, user, page }) => {
            let mut params = json!({ "limit": page });
            if let Some(p) = prefix {
                params["prefix"] = json!(p);
            }
            if let Some(u) = user {
                params["user"] = json!(u);
            }
            let mut total = 0;
            loop {
                let result = client.call("registrations.list", params)?;
                total += result["registrations"].as_array().map_or(0, Vec::len);
                out(&result, show::bindings)?;
                match result["cursor"].as_str() {
                    Some(c) => params = json!({ "cursor": c, "limit": page }),
                    None => break,
                }
            }
            if !json {
                eprintln!("{total} binding(s)");
            }
        }
        Command::Registrations(Registrations::Show { aor }) => {
            out(&client.call("registrations.show", json!({ "aor": aor }))?, show::aor)?
        }
        Command::Registrations(Registrations::Remove { aor, contact }) => {
            let mut params = json!({ "aor": aor });
            if let Some(c) = contact {
                params["contact"] = json!(c);
            }
            out(&client.call("registrations.remove", params)?, show::removed)?
        }
        Command::Stats => out(&client.call("stats", json!({}))?, show::stats)?,
        Command::Bans(Bans::List { limit }) => {
            out(&client.call("flood.list", json!({ "limit": limit }))?, show::holds)?
        }
        Command::Bans(Bans::Unban { source }) => {
            out(&client.call("flood.unban", json!({ "source": source }))?, show::unbanned)?
        }
        Command::Gateways(Gateways::List) => out(&client.call("gateways.list", json!({}))?, show::gateways)?,
        Command::Gateways(Gateways::Set { set, destination, state }) => {
            let params = json!({ "set": set, "destination": destination, "state": state });
            out(&client.call("gateways.set_state", params)?, show::gateway_state)?
        }
        Command::Reload => out(&client.call("config.reload", json!({}))?, show::reloaded)?,
        Command::Users(Users::List { realm }) => {
            out(&client.call("users.list", json!({ "realm": realm }))?, show::users)?
        }
        Command::Users(Users::Add { name, realm, password_stdin }) => {
            let password = crate::users::read_password(&name, password_stdin).map_err(|(_, m)| Failure::Usage(m))?;
            let params = json!({ "name": name, "password": password, "realm": realm });
            out(&client.call("users.add", params)?, show::user_added)?
        }
        Command::Users(Users::Remove { name, realm }) => {
            out(&client.call("users.remove", json!({ "name": name, "realm": realm }))?, show::user_removed)?
        }
        Command::Call { method, params } => {
            let params: Value =
                serde_json::from_str(&params).map_err(|e| Failure::Usage(format!("params are not JSON: {e}")))?;
            let result = client.call(&method, params)?;
            let text =
                if json { result.to_string() } else { serde_json::to_string_pretty(&result).unwrap_or_default() };
            emit(&format!("{text}\n"))?;
        }
    }
    Ok(())
}

/// The endpoint's URL and token (see the module documentation).
fn endpoint(args: &Args) -> Result<(String, Option<String>), String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let config_path = args.config.clone().or_else(|| env("HERALD_CONFIG").map(PathBuf::from));
    // The configuration is read only when something is still to be found in it.
    let need_config = (args.url.is_none() && env("HERALD_ADMIN_URL").is_none())
        || (args.token.is_none() && env("HERALD_ADMIN_TOKEN").is_none());
    // Without a file, herald serve runs the built-in configuration and its endpoint.
    let admin = match (&config_path, need_config) {
        (Some(path), true) => Some(Config::load(path).map_err(|e| e.to_string())?.admin),
        (None, true) => Some(Admin::builtin()),
        (_, false) => None,
    };
    let url = match args.url.clone().or_else(|| env("HERALD_ADMIN_URL")) {
        Some(u) => u,
        None => {
            let Some(addr) = admin.as_ref().and_then(|a| a.listen) else {
                let file = config_path.map_or_else(String::new, |p| p.display().to_string());
                return Err(format!("{file} has no [admin] listen: herald serves no admin API (give --url)"));
            };
            url_of(addr)
        }
    };
    let token = match args.token.clone().or_else(|| env("HERALD_ADMIN_TOKEN")) {
        Some(t) => Some(t),
        None => match &admin {
            Some(a) => a.secrets().map_err(|(_, m)| m)?.into_iter().next().map(|(_, secret)| secret),
            None => None,
        },
    };
    Ok((url, token))
}

/// `http://IP:PORT/` for a listen address; a wildcard is reached on loopback.
fn url_of(addr: std::net::SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(a) if a.is_unspecified() => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        std::net::IpAddr::V6(a) if a.is_unspecified() => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/", std::net::SocketAddr::new(ip, addr.port()))
}
