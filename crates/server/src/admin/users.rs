//! The users file of digest authentication as the admin API changes it: read from disk (the
//! file is the truth: `herald users` may have changed it meanwhile), changed, written atomically
//! (`herald_credentials::file::save`: a temporary file renamed over it), then put in use at once
//! in the table the authenticator reads. The file watcher of `herald serve` sees the new file
//! too and loads the same table again.

use crate::config::Config;
use herald_credentials::{file, invalid_realm, invalid_user_name, Credentials, SharedCredentials, UserHa1};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Longest password accepted (a password is a line, not a file).
const MAX_PASSWORD: usize = 1024;

/// The users file and the table in use.
pub struct UsersFile {
    path: PathBuf,
    shared: Arc<SharedCredentials>,
    /// `[auth]`'s realms when herald started: the default one, and one per domain when each
    /// domain is its own realm.
    default_realm: String,
    domain_realms: Vec<(String, String)>,
}

/// What went wrong, as the API reports it.
#[derive(Debug, PartialEq, Eq)]
pub enum UsersError {
    /// The request is wrong (bad name, realm, password): nothing changed.
    Invalid(String),
    /// No such user: nothing changed.
    NotFound(String),
    /// The file could not be read or written: nothing changed in use.
    Io(String),
}

impl UsersFile {
    /// `path` as `[auth] users_file`, `shared` the table the authenticator reads, realms from
    /// `config`.
    pub fn new(path: PathBuf, shared: Arc<SharedCredentials>, config: &Config) -> UsersFile {
        UsersFile { path, shared, default_realm: config.auth_realm(), domain_realms: config.domain_realms() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The realm for `name` (NAME or NAME@DOMAIN) when none is given: its domain's, else the
    /// default (as `herald users add`).
    fn realm_for(&self, domain: Option<&str>) -> String {
        let d = domain.map(|d| d.trim_end_matches('.').to_ascii_lowercase());
        d.and_then(|d| self.domain_realms.iter().find(|(x, _)| *x == d).map(|(_, r)| r.clone()))
            .unwrap_or_else(|| self.default_realm.clone())
    }

    /// Users by realm, from the table in use.
    pub fn list(&self, realm: Option<&str>) -> Vec<(String, Vec<String>)> {
        let creds = self.shared.current();
        let mut out: Vec<(String, Vec<String>)> = creds
            .realms()
            .filter(|r| realm.is_none_or(|want| want == *r))
            .map(|r| {
                let mut users: Vec<String> = creds.users_in(r).into_iter().map(str::to_string).collect();
                users.sort();
                (r.to_string(), users)
            })
            .collect();
        out.sort();
        out
    }

    /// Adds `name` or changes its password. Returns (user, realm, whether it replaced one).
    pub fn add(&self, name: &str, password: &str, realm: Option<&str>) -> Result<(String, String, bool), UsersError> {
        let (user, domain) = split_name(name);
        if let Some(why) = invalid_user_name(user) {
            return Err(UsersError::Invalid(format!("'{user}': {why}")));
        }
        if password.is_empty() || password.len() > MAX_PASSWORD || password.chars().any(char::is_control) {
            return Err(UsersError::Invalid(format!(
                "a password is 1 to {MAX_PASSWORD} bytes without control characters"
            )));
        }
        let realm = realm.map_or_else(|| self.realm_for(domain), str::to_string);
        if let Some(why) = invalid_realm(&realm) {
            return Err(UsersError::Invalid(format!("realm '{realm}': {why}")));
        }
        let mut creds = self.load()?.unwrap_or_else(|| Credentials::new(&realm));
        let replaced = creds.insert_in(&realm, user, UserHa1::from_password(user, &realm, password));
        self.save(creds)?;
        Ok((user.to_string(), realm, replaced))
    }

    /// Removes `name` (from `realm`, or from the one realm that holds it). Returns (user, realm).
    pub fn remove(&self, name: &str, realm: Option<&str>) -> Result<(String, String), UsersError> {
        let (user, domain) = split_name(name);
        let mut creds =
            self.load()?.ok_or_else(|| UsersError::NotFound(format!("no users file {}", self.path.display())))?;
        let realm = match (realm, domain) {
            (Some(r), _) => r.to_string(),
            (None, Some(d)) => self.realm_for(Some(d)),
            (None, None) => match creds.realms_of(user)[..] {
                [] => return Err(UsersError::NotFound(format!("no user '{user}'"))),
                [only] => only.to_string(),
                ref several => {
                    return Err(UsersError::Invalid(format!(
                        "'{user}' is in realms {}: say which with realm",
                        several.join(", ")
                    )))
                }
            },
        };
        if !creds.remove_in(&realm, user) {
            return Err(UsersError::NotFound(format!("no user '{user}' in realm '{realm}'")));
        }
        self.save(creds)?;
        Ok((user.to_string(), realm))
    }

    fn load(&self) -> Result<Option<Credentials>, UsersError> {
        if !self.path.exists() {
            return Ok(None);
        }
        file::load(&self.path).map(Some).map_err(|e| UsersError::Io(e.to_string()))
    }

    fn save(&self, creds: Credentials) -> Result<(), UsersError> {
        file::save(&self.path, &creds).map_err(|e| UsersError::Io(e.to_string()))?;
        self.shared.replace(creds);
        Ok(())
    }
}

/// NAME@DOMAIN → (NAME, Some(DOMAIN)); the last `@` separates (a domain never holds one).
fn split_name(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once('@') {
        Some((user, domain)) if !user.is_empty() && !domain.is_empty() => (user, Some(domain)),
        _ => (name, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(name: &str) -> (PathBuf, UsersFile, Arc<SharedCredentials>) {
        let dir = std::env::temp_dir().join(format!("herald-admin-users-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let shared = Arc::new(SharedCredentials::default());
        let config = Config::from_toml("domains = [\"a.example\", \"b.example\"]\n", "t.toml").unwrap();
        let users = UsersFile::new(dir.join("users.txt"), shared.clone(), &config);
        (dir, users, shared)
    }

    #[test]
    fn added_users_are_in_the_file_and_in_use_at_once() {
        let (dir, users, shared) = setup("add");
        assert_eq!(users.add("alice@b.example", "secret", None).unwrap(), ("alice".into(), "b.example".into(), false));
        assert!(shared.current().get_in("b.example", "alice").is_some(), "in use without waiting for the watcher");
        assert!(file::load(users.path()).unwrap().get_in("b.example", "alice").is_some(), "and on disk");
        assert!(users.add("alice@b.example", "other", None).unwrap().2, "a second add changes the password");
        users.add("bob", "pw", None).unwrap();
        assert_eq!(
            users.list(None),
            vec![("a.example".into(), vec!["bob".to_string()]), ("b.example".into(), vec!["alice".to_string()])]
        );
        assert_eq!(users.list(Some("a.example")).len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_requests_change_nothing() {
        let (dir, users, shared) = setup("bad");
        users.add("carol", "pw", None).unwrap();
        let before = std::fs::read(users.path()).unwrap();
        assert!(matches!(users.add("bad name", "pw", None), Err(UsersError::Invalid(_))));
        assert!(matches!(users.add("dave", "", None), Err(UsersError::Invalid(_))));
        assert!(matches!(users.add("dave", "a\nb", None), Err(UsersError::Invalid(_))));
        assert!(matches!(users.remove("nobody", None), Err(UsersError::NotFound(_))));
        assert!(matches!(users.remove("carol", Some("b.example")), Err(UsersError::NotFound(_))));
        assert_eq!(std::fs::read(users.path()).unwrap(), before);
        assert_eq!(users.remove("carol", None).unwrap(), ("carol".into(), "a.example".into()));
        assert!(shared.current().get_in("a.example", "carol").is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
