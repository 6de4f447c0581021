//! `herald users add|remove|list`: the users file of digest authentication (`[auth]
//! users_file`). The file holds HA1 hashes per realm (one realm per served domain, or one for
//! all), never a password; `herald serve` reloads it when it changes, so users can be managed
//! while it runs.

use herald_credentials::{file, invalid_realm, invalid_user_name, Credentials, UserHa1};
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
    /// Add a user, or change a user's password. NAME or NAME@DOMAIN: with a domain, the user
    /// is added to that domain's realm (each of `domains` is its own realm unless `[auth]
    /// realm` names one for all). The file keeps the MD5, SHA-256 and SHA-512-256 hashes of
    /// the password; which ones challenges offer is `[auth] algorithms`: the default, MD5,
    /// lets every phone in; SHA-256 first (or alone) protects better against a leaked file but
    /// locks out phones that only know MD5.
    Add {
        name: String,
        /// Read the password from the first line of standard input (no prompt).
        #[arg(long)]
        password_stdin: bool,
        /// The realm. Default: the realm of NAME's @DOMAIN, else the configuration's default
        /// realm (`[auth] realm`, else the first domain: by default the host name).
        #[arg(long)]
        realm: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Remove a user (NAME or NAME@DOMAIN; `--realm` when the name is in several realms).
    Remove {
        name: String,
        #[arg(long)]
        realm: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// List the users of each realm: a `realm NAME` line on stderr, then its users on stdout,
    /// one per line.
    List {
        #[command(flatten)]
        common: Common,
    },
}

/// Exit status: 0 done, 1 failure (I/O, unknown user, ambiguous realm), 2 usage or
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

/// NAME@DOMAIN → (NAME, Some(DOMAIN)); a name without `@` → (NAME, None). The last `@`
/// separates: a domain never contains one.
fn split_name(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('@') {
        Some((user, domain)) if !user.is_empty() && !domain.is_empty() => (user, Some(domain)),
        _ => (name, None),
    }
}

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Add { name, password_stdin, realm, common } => {
            let (user, domain) = split_name(&name);
            if let Some(why) = invalid_user_name(user) {
                return Err((2, format!("'{user}': {why}")));
            }
            let (path, config) = resolve(&common)?;
            let existing = load_if_present(&path)?;
            let realm = match (realm, domain) {
                (Some(r), _) => r,
                (None, Some(d)) => config.realm_of_domain(d),
                (None, None) => config.auth_realm(),
            };
            if let Some(why) = invalid_realm(&realm) {
                return Err((2, format!("realm '{realm}': {why}")));
            }
            let challenged = config.challenge_realms();
            if !challenged.contains(&realm) {
                eprintln!(
                    "note: herald with this configuration challenges in realm(s) {}; '{realm}' is not one of them \
                     (use --config with the configuration herald serve runs, or NAME@DOMAIN)",
                    challenged.join(", ")
                );
            }
            let password = read_password(user, password_stdin)?;
            let mut creds = existing.unwrap_or_else(|| Credentials::new(&realm));
            let replaced = creds.insert_in(&realm, user, UserHa1::from_password(user, &realm, &password));
            file::save(&path, &creds).map_err(|e| (1, e.to_string()))?;
            let what = if replaced { "password changed" } else { "added" };
            eprintln!("{user}: {what} in {} (realm {realm})", path.display());
            Ok(())
        }
        Command::Remove { name, realm, common } => {
            let (user, domain) = split_name(&name);
            let (path, config) = resolve(&common)?;
            let mut creds = load_if_present(&path)?.ok_or_else(|| (1, format!("{}: no such file", path.display())))?;
            let realm = match (realm, domain) {
                (Some(r), _) => r,
                (None, Some(d)) => config.realm_of_domain(d),
                (None, None) => match creds.realms_of(user)[..] {
                    [] => return Err((1, format!("no user '{user}' in {}", path.display()))),
                    [only] => only.to_owned(),
                    ref several => {
                        return Err((
                            1,
                            format!("'{user}' is in realms {}: say which with --realm", several.join(", ")),
                        ))
                    }
                },
            };
            if !creds.remove_in(&realm, user) {
                return Err((1, format!("no user '{user}' in realm '{realm}' of {}", path.display())));
            }
            file::save(&path, &creds).map_err(|e| (1, e.to_string()))?;
            eprintln!("{user}: removed from {} (realm {realm})", path.display());
            Ok(())
        }
        Command::List { common } => {
            let (path, _) = resolve(&common)?;
            let Some(creds) = load_if_present(&path)? else {
                eprintln!("{}: no users file yet", path.display());
                return Ok(());
            };
            let mut out = std::io::stdout().lock();
            for realm in creds.realms() {
                eprintln!("realm {realm}");
                for user in creds.users_in(realm) {
                    writeln!(out, "{user}").map_err(|e| (1, e.to_string()))?;
                }
                out.flush().map_err(|e| (1, e.to_string()))?;
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
pub(crate) fn read_password(name: &str, from_stdin: bool) -> Result<String, Failure> {
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
