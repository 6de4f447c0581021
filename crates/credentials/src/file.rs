//! The credentials file: text, one user per line, HA1 hashes only (never a password).
//!
//! ```text
//! # herald users file
//! realm example.com
//! alice 8f0e...(32 hex) 5b1c...(64 hex) 0a9d...(64 hex)
//! ```
//!
//! The `realm` line comes before any user: an HA1 is H(user:realm:password), so it is only
//! valid for that realm. A file may hold several realms, each a `realm` line followed by its
//! users (one realm per served domain: `alice` of example.com and of example.org are two
//! accounts). Each user line holds the MD5, SHA-256 and SHA-512/256 HA1 in hex. Blank lines
//! and lines starting with `#` are ignored. Errors name the file and the line.

use crate::algorithm::UserHa1;
use crate::hex::{from_hex, to_hex};
use crate::table::{invalid_realm, invalid_user_name, Credentials};
use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

/// Largest file read (bytes): about a million users. Guards the reload against a runaway file.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Why a credentials file could not be read, parsed or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsError {
    pub file: String,
    /// 1-based line, 0 when the problem is the file as a whole.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for CredentialsError {}

/// Parses the text of a credentials file; `file` is used in error messages only.
pub fn parse(text: &str, file: &str) -> Result<Credentials, CredentialsError> {
    let err = |line: usize, message: String| CredentialsError { file: file.to_owned(), line, message };
    let mut creds: Option<Credentials> = None;
    let mut current = String::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        if fields[0] == "realm" {
            let [_, realm] = fields[..] else {
                return Err(err(n, "expected 'realm NAME'".into()));
            };
            if let Some(why) = invalid_realm(realm) {
                return Err(err(n, why.into()));
            }
            match creds.as_mut() {
                None => creds = Some(Credentials::new(realm)),
                Some(c) if c.realms().any(|r| r == realm) => {
                    return Err(err(n, format!("realm '{realm}' appears twice")));
                }
                Some(c) => {
                    c.add_realm(realm);
                }
            }
            current = realm.to_owned();
            continue;
        }
        let Some(table) = creds.as_mut() else {
            return Err(err(n, "a user line before the 'realm NAME' line".into()));
        };
        let [user, md5, sha256, sha512_256] = fields[..] else {
            return Err(err(
                n,
                format!("expected 'USER MD5-HA1 SHA-256-HA1 SHA-512-256-HA1', found {} fields", fields.len()),
            ));
        };
        if let Some(why) = invalid_user_name(user) {
            return Err(err(n, why.into()));
        }
        let mut ha1 = UserHa1 { md5: [0; 16], sha256: [0; 32], sha512_256: [0; 32] };
        from_hex(md5, &mut ha1.md5).ok_or_else(|| err(n, "the MD5 HA1 must be 32 hex digits".into()))?;
        from_hex(sha256, &mut ha1.sha256).ok_or_else(|| err(n, "the SHA-256 HA1 must be 64 hex digits".into()))?;
        from_hex(sha512_256, &mut ha1.sha512_256)
            .ok_or_else(|| err(n, "the SHA-512-256 HA1 must be 64 hex digits".into()))?;
        if table.insert_in(&current, user, ha1) {
            return Err(err(n, format!("user '{user}' appears twice in realm '{current}'")));
        }
    }
    creds.ok_or_else(|| err(0, "no 'realm NAME' line".into()))
}

/// The file text for `creds`, users sorted by name.
pub fn format(creds: &Credentials) -> String {
    let mut s = String::from(
        "# herald users file: managed by `herald users add|remove|list`; reloaded by `herald serve` when it\n\
         # changes. One line per user: NAME MD5-HA1 SHA-256-HA1 SHA-512-256-HA1, where\n\
         # HA1 = H(NAME:REALM:PASSWORD) in hex (RFC 7616 §3.4.2). No password is stored.\n",
    );
    for realm in creds.realms() {
        s.push_str(&std::format!("realm {realm}\n"));
        for user in creds.users_in(realm) {
            if let Some(h) = creds.get_in(realm, user) {
                s.push_str(&std::format!(
                    "{user} {} {} {}\n",
                    to_hex(&h.md5),
                    to_hex(&h.sha256),
                    to_hex(&h.sha512_256)
                ));
            }
        }
    }
    s
}

/// Reads and parses a credentials file (at most [`MAX_FILE_BYTES`]).
pub fn load(path: &Path) -> Result<Credentials, CredentialsError> {
    let file = path.display().to_string();
    let io =
        |e: std::io::Error| CredentialsError { file: file.clone(), line: 0, message: std::format!("cannot read: {e}") };
    let mut text = String::new();
    let f = fs::File::open(path).map_err(io)?;
    f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(CredentialsError { file, line: 0, message: std::format!("larger than {MAX_FILE_BYTES} bytes") });
    }
    parse(&text, &file)
}

/// Writes `creds` to `path` atomically: a temporary file in the same directory, mode 0600
/// (it holds password equivalents: an HA1 is enough to answer challenges of its realm), synced,
/// then renamed over `path`. A reader sees the old file or the new one, never half of it.
pub fn save(path: &Path, creds: &Credentials) -> Result<(), CredentialsError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = path.display().to_string();
    let fail = |what: &str, e: std::io::Error| CredentialsError {
        file: file.clone(),
        line: 0,
        message: std::format!("cannot {what}: {e}"),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "users".into());
    let tmp = path.with_file_name(std::format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(format(creds).as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(fail("write", e));
    }
    Ok(())
}
