//! Who the generator plays: the user list, from a credentials file or generated names.

/// One SIP user: the user part of its address-of-record and, when authentication is in use, its
/// password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub password: Option<String>,
}

/// Reads a credentials file: one `USER PASSWORD` per line, `#` starts a comment, blank lines are
/// skipped. Names must be valid SIP URI user parts without escaping (RFC 3261 §25.1 `unreserved`
/// plus a few marks) so that they can go into URIs verbatim.
pub fn parse_credentials(path: &str, text: &str) -> Result<Vec<User>, String> {
    let mut users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(password), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("{path}:{}: expected 'USER PASSWORD'", n + 1));
        };
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.!~*'+".contains(&b)) {
            return Err(format!("{path}:{}: user '{name}' needs characters a SIP URI would escape", n + 1));
        }
        if password.contains('"') || password.contains('\\') {
            return Err(format!("{path}:{}: password with '\"' or '\\' is not supported", n + 1));
        }
        users.push(User { name: name.to_string(), password: Some(password.to_string()) });
    }
    if users.is_empty() {
        return Err(format!("{path}: no users"));
    }
    Ok(users)
}

/// `count` users named `{prefix}0 .. {prefix}{count-1}` without passwords.
pub fn generated(prefix: &str, count: usize) -> Vec<User> {
    (0..count).map(|i| User { name: format!("{prefix}{i}"), password: None }).collect()
}

/// The users of a run: the credentials file's users (the first `count` of them when `count` is
/// given, an error when the file has fewer), else `count` generated ones (default `default`).
pub fn load(credentials: Option<&str>, count: Option<usize>, default: usize) -> Result<Vec<User>, String> {
    match credentials {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let mut users = parse_credentials(path, &text)?;
            if let Some(n) = count {
                if n > users.len() {
                    return Err(format!("{path}: {n} users asked for, the file has {}", users.len()));
                }
                users.truncate(n);
            }
            Ok(users)
        }
        None => {
            let n = count.unwrap_or(default);
            if n == 0 {
                return Err("--users must be at least 1".into());
            }
            Ok(generated("user", n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_file_lines_comments_and_errors() {
        let users = parse_credentials("f", "# users\nalice secret\n\n  bob  pw2  # trailing\n").unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[1], User { name: "bob".into(), password: Some("pw2".into()) });
        assert_eq!(parse_credentials("f", "alice\n").unwrap_err(), "f:1: expected 'USER PASSWORD'");
        assert!(parse_credentials("f", "a b c\n").is_err());
        assert!(parse_credentials("f", "al@ice pw\n").unwrap_err().contains("escape"));
        assert!(parse_credentials("f", "# nothing\n").is_err());
    }

    #[test]
    fn generated_names() {
        let users = generated("user", 3);
        assert_eq!(users.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(), ["user0", "user1", "user2"]);
        assert!(load(None, Some(0), 5).is_err());
        assert_eq!(load(None, None, 5).unwrap().len(), 5);
    }
}
