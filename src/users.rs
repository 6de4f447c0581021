//! `herald users add|remove|list`: the users file of digest authentication (`[auth]
//! users_file`). The file holds HA1 hashes for one realm, never a password; `herald serve`
//! reloads it when it changes, so users can be managed while it runs.

use herald_core::auth::credentials::{file, invalid_realm, invalid_user_name};
use herald_core::auth::{Credentials, UserHa1};
use herald_server::config::Config;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Common {
    /// The users file. Default: `[auth] users_file` of the configuration (herald-users.txt).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Configuration to take the users file and realm from (default: the built-in one, as
    /// `herald serve` without --config).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add a user, or change a user's password.
    Add {
        name: String,
        /// Read the password from the first line of standard input (no prompt).
        #[arg(long)]
        password_stdin: bool,
        /// The realm. Default: the existing file's realm, else the configuration's (`[auth]
        /// realm`, else the first domain: the host name).
        #[arg(long)]
        realm: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Remove a user.
    Remove {
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// List the users (one per line) and, on stderr, the realm.
    List {
        #[command(flatten)]
        common: Common,
    },
}

/// Exit status: 0 done, 1 failure (I/O, unknown user, realm mismatch), 2 usage or
/// configuration error.
pub fn run(command: Command) -> ExitCode {
    match execute(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("herald users: {message}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Add { name, password_stdin, realm, common } => {
            if let Some(why) = invalid_user_name(&name) {
                return Err((2, format!("'{name}': {why}")));
            }
            let (path, config) = resolve(&common)?;
            let existing = load_if_present(&path)?;
            let realm = match (realm, &existing) {
                (Some(r), Some(e)) if r != e.realm() => {
                    return Err((1, format!("{} is for realm '{}', not '{r}'", path.display(), e.realm())));
                }
                (Some(r), _) => r,
                (None, Some(e)) => e.realm().to_owned(),
                (None, None) => config.auth_realm(),
            };
            if let Some(why) = invalid_realm(&realm) {
                return Err((2, format!("realm '{realm}': {why}")));
            }
            let password = read_password(&name, password_stdin)?;
            let mut creds = existing.unwrap_or_else(|| Credentials::new(&realm));
            let replaced = creds.insert(&name, UserHa1::from_password(&name, &realm, &password));
            file::save(&path, &creds).map_err(|e| (1, e.to_string()))?;
            let what = if replaced { "password changed" } else { "added" };
            eprintln!("{name}: {what} in {} (realm {realm})", path.display());
            Ok(())
        }
        Command::Remove { name, common } => {
            let (path, _) = resolve(&common)?;
            let mut creds = load_if_present(&path)?.ok_or_else(|| (1, format!("{}: no such file", path.display())))?;
            if !creds.remove(&name) {
                return Err((1, format!("no user '{name}' in {}", path.display())));
            }
            file::save(&path, &creds).map_err(|e| (1, e.to_string()))?;
            eprintln!("{name}: removed from {}", path.display());
            Ok(())
        }
        Command::List { common } => {
            let (path, _) = resolve(&common)?;
            let Some(creds) = load_if_present(&path)? else {
                eprintln!("{}: no users file yet", path.display());
                return Ok(());
            };
            eprintln!("realm {}", creds.realm());
            let mut out = std::io::stdout().lock();
            for user in creds.users() {
                writeln!(out, "{user}").map_err(|e| (1, e.to_string()))?;
            }
            Ok(())
        }
    }
}

/// The users file and the configuration it belongs to.
fn resolve(common: &Common) -> Result<(PathBuf, Config), Failure> {
    let config = Config::load_or_default(common.config.as_deref()).map_err(|e| (2, e.to_string()))?;
    let path = common.file.clone().unwrap_or_else(|| config.auth.users_file.clone());
    Ok((path, config))
}

fn load_if_present(path: &Path) -> Result<Option<Credentials>, Failure> {
    if !path.exists() {
        return Ok(None);
    }
    file::load(path).map(Some).map_err(|e| (1, e.to_string()))
}

/// The password: one line of stdin with `--password-stdin`, else a prompt on the terminal
/// (twice, without echo).
fn read_password(name: &str, from_stdin: bool) -> Result<String, Failure> {
    let stdin = std::io::stdin();
    let password = if from_stdin {
        read_line(&mut stdin.lock())?
    } else {
        if !stdin.is_terminal() {
            return Err((2, "standard input is not a terminal: use --password-stdin".into()));
        }
        let first = prompt(&format!("Password for {name}: "))?;
        let again = prompt("Again: ")?;
        if first != again {
            return Err((1, "the passwords differ".into()));
        }
        first
    };
    if password.is_empty() {
        return Err((2, "empty password".into()));
    }
    Ok(password)
}

fn read_line(input: &mut impl BufRead) -> Result<String, Failure> {
    let mut line = String::new();
    // Bounded: a password is a line, not a file.
    input.by_ref().take(4096).read_line(&mut line).map_err(|e| (1, format!("cannot read the password: {e}")))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// Reads a line from the terminal with echo off (`stty -echo`, restored afterwards).
fn prompt(text: &str) -> Result<String, Failure> {
    let stty = |arg: &str| std::process::Command::new("stty").arg(arg).stdin(std::process::Stdio::inherit()).status();
    eprint!("{text}");
    let _ = std::io::stderr().flush();
    let echo_off = stty("-echo").is_ok_and(|s| s.success());
    let line = read_line(&mut std::io::stdin().lock());
    if echo_off {
        let _ = stty("echo");
    }
    eprintln!();
    line
}
