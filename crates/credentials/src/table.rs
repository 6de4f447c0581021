//! The in-memory table: realm → user → [`UserHa1`], and which names may be stored.

use crate::algorithm::UserHa1;
use std::collections::HashMap;

/// Longest user name accepted (bytes): names go into quoted strings of every challenge answer.
pub const MAX_USER_LEN: usize = 128;
/// Longest realm accepted (bytes).
pub const MAX_REALM_LEN: usize = 255;

/// The users of each realm and their HA1s. A realm per served domain lets one herald serve
/// several domains with users of the same name (`alice` of example.com and of example.org are
/// two accounts); the first realm is the default one, used when a request names no realm of
/// its own. Realms are few, so they are a small list; users are a hash map per realm.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    realms: Vec<(String, HashMap<String, UserHa1>)>,
}

impl Credentials {
    /// An empty table with `realm` as its first (default) realm.
    pub fn new(realm: &str) -> Credentials {
        Credentials { realms: vec![(realm.to_owned(), HashMap::new())] }
    }

    /// The first realm (the default one), or "" for a table without realms.
    pub fn realm(&self) -> &str {
        self.realms.first().map_or("", |(r, _)| r.as_str())
    }

    /// Every realm, in file order.
    pub fn realms(&self) -> impl Iterator<Item = &str> {
        self.realms.iter().map(|(r, _)| r.as_str())
    }

    fn table(&self, realm: &str) -> Option<&HashMap<String, UserHa1>> {
        self.realms.iter().find(|(r, _)| r == realm).map(|(_, t)| t)
    }

    /// Adds an empty realm if it is not there yet.
    pub fn add_realm(&mut self, realm: &str) -> &mut HashMap<String, UserHa1> {
        let i = match self.realms.iter().position(|(r, _)| r == realm) {
            Some(i) => i,
            None => {
                self.realms.push((realm.to_owned(), HashMap::new()));
                self.realms.len() - 1
            }
        };
        &mut self.realms[i].1
    }

    /// The HA1s of `user` in `realm` (names are case-sensitive, RFC 7616 §3.4.1 compares them
    /// as given; realms too: the client echoes the challenge's realm).
    pub fn get_in(&self, realm: &str, user: &str) -> Option<&UserHa1> {
        self.table(realm)?.get(user)
    }

    /// The HA1s of `user` in the default realm.
    pub fn get(&self, user: &str) -> Option<&UserHa1> {
        self.get_in(self.realm(), user)
    }

    /// Adds or replaces a user of `realm` (added if new). Returns whether the user existed.
    pub fn insert_in(&mut self, realm: &str, user: &str, ha1: UserHa1) -> bool {
        self.add_realm(realm).insert(user.to_owned(), ha1).is_some()
    }

    /// [`Credentials::insert_in`] the default realm.
    pub fn insert(&mut self, user: &str, ha1: UserHa1) -> bool {
        let realm = self.realm().to_owned();
        self.insert_in(&realm, user, ha1)
    }

    /// Removes a user of `realm`. Returns whether the user existed. A realm left without
    /// users stays (it may be the default one).
    pub fn remove_in(&mut self, realm: &str, user: &str) -> bool {
        self.realms.iter_mut().find(|(r, _)| r == realm).is_some_and(|(_, t)| t.remove(user).is_some())
    }

    /// Removes a user of the default realm.
    pub fn remove(&mut self, user: &str) -> bool {
        let realm = self.realm().to_owned();
        self.remove_in(&realm, user)
    }

    /// The realms that have a user of this name.
    pub fn realms_of(&self, user: &str) -> Vec<&str> {
        self.realms.iter().filter(|(_, t)| t.contains_key(user)).map(|(r, _)| r.as_str()).collect()
    }

    /// User names of `realm`, sorted.
    pub fn users_in(&self, realm: &str) -> Vec<&str> {
        let mut v: Vec<&str> = self.table(realm).map(|t| t.keys().map(String::as_str).collect()).unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// User names of the default realm, sorted.
    pub fn users(&self) -> Vec<&str> {
        self.users_in(self.realm())
    }

    /// Users of every realm.
    pub fn len(&self) -> usize {
        self.realms.iter().map(|(_, t)| t.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a user name cannot be stored, or `None` when it can. Names go verbatim into the quoted
/// `username` of a client's answer (RFC 7616 §3.4), so quotes, backslashes, whitespace and
/// control characters are refused rather than escaped.
pub fn invalid_user_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("a user name must not be empty");
    }
    if name.len() > MAX_USER_LEN {
        return Some("a user name must be at most 128 bytes");
    }
    if name.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
        return Some("a user name must not contain whitespace, control characters, '\"' or '\\'");
    }
    if name.starts_with('#') {
        return Some("a user name must not start with '#'");
    }
    None
}

/// Why a realm cannot be used, or `None` (same rules as user names: it is quoted on the wire).
pub fn invalid_realm(realm: &str) -> Option<&'static str> {
    if realm.is_empty() {
        return Some("the realm must not be empty");
    }
    if realm.len() > MAX_REALM_LEN {
        return Some("the realm must be at most 255 bytes");
    }
    if realm.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\') {
        return Some("the realm must not contain whitespace, control characters, '\"' or '\\'");
    }
    None
}
