//! Digest authentication, client side (RFC 3261 §22, RFC 2617 §3.2.2, RFC 7616 §3.4; RFC 8760
//! adds SHA-256 to SIP): answers a 401 WWW-Authenticate or 407 Proxy-Authenticate challenge with
//! an Authorization or Proxy-Authorization value. The answer is herald-credentials' [`Answer`],
//! hashed by the same code herald's authenticator checks answers with; this module only reads
//! challenges and picks one.

use herald_credentials::{Algorithm as Hash, Answer};
use herald_sip::headers::AuthValue;

/// The algorithm a challenge asks for (RFC 7616 §3.3 `algorithm`, absent = MD5): a hash, plain
/// or `-sess`. SHA-512-256 is not answered: SIP phones rarely implement it, and against herald,
/// which offers it first, the generator then answers SHA-256 as it always has, so CPU-per-call
/// results stay comparable with earlier runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Md5Sess,
    Sha256,
    Sha256Sess,
}

impl Algorithm {
    fn parse(name: Option<&str>) -> Option<Algorithm> {
        let Some(name) = name else { return Some(Algorithm::Md5) };
        let (hash, sess) = match name.len().checked_sub(5).filter(|&i| name.is_char_boundary(i)) {
            Some(i) if name[i..].eq_ignore_ascii_case("-sess") => (&name[..i], true),
            _ => (name, false),
        };
        match (Hash::from_name(hash)?, sess) {
            (Hash::Md5, false) => Some(Algorithm::Md5),
            (Hash::Md5, true) => Some(Algorithm::Md5Sess),
            (Hash::Sha256, false) => Some(Algorithm::Sha256),
            (Hash::Sha256, true) => Some(Algorithm::Sha256Sess),
            (Hash::Sha512_256, _) => None,
        }
    }

    fn hash(self) -> Hash {
        match self {
            Algorithm::Md5 | Algorithm::Md5Sess => Hash::Md5,
            Algorithm::Sha256 | Algorithm::Sha256Sess => Hash::Sha256,
        }
    }

    /// Lowercase hex of the hash of `data`.
    #[cfg(test)]
    fn hex(self, data: &str) -> String {
        self.hash().hex_hash(&[data.as_bytes()])
    }

    fn is_sess(self) -> bool {
        matches!(self, Algorithm::Md5Sess | Algorithm::Sha256Sess)
    }

    /// Preference when a server offers several challenges (RFC 7616 §3.7: the client uses the
    /// strongest algorithm it supports).
    fn strength(self) -> u8 {
        match self {
            Algorithm::Md5 | Algorithm::Md5Sess => 1,
            Algorithm::Sha256 | Algorithm::Sha256Sess => 2,
        }
    }
}

/// One Digest challenge taken out of a WWW-Authenticate or Proxy-Authenticate value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub realm: String,
    pub nonce: String,
    pub opaque: Option<String>,
    pub algorithm: Algorithm,
    /// The server offered qop=auth (we never use auth-int: bodies are not protected here).
    pub qop_auth: bool,
}

impl Challenge {
    /// Parses one header value; None for another scheme, an unknown algorithm, a missing realm
    /// or nonce, or a qop list without "auth" (RFC 7616 §3.3: the client must not guess).
    pub fn parse(value: &[u8]) -> Option<Challenge> {
        let v = AuthValue::parse(value).ok()?;
        if !v.is_digest() {
            return None;
        }
        let algorithm = Algorithm::parse(v.param("algorithm").as_deref())?;
        let qop_auth = match v.param("qop") {
            None => false,
            Some(list) => {
                if !list.split(',').any(|q| q.trim().eq_ignore_ascii_case("auth")) {
                    return None;
                }
                true
            }
        };
        Some(Challenge {
            realm: v.param("realm")?.into_owned(),
            nonce: v.param("nonce")?.into_owned(),
            opaque: v.param("opaque").map(|o| o.into_owned()),
            algorithm,
            qop_auth,
        })
    }

    /// The strongest usable challenge among header values.
    pub fn best<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<Challenge> {
        values.filter_map(Challenge::parse).max_by_key(|c| c.algorithm.strength())
    }

    /// The credentials value (RFC 7616 §3.4) for `method` on `uri`. `nc` counts the requests sent
    /// with this nonce; `cnonce` must be fresh per request.
    pub fn answer(&self, user: &str, password: &str, method: &str, uri: &str, nc: u32, cnonce: &str) -> String {
        Answer {
            algorithm: self.algorithm.hash(),
            sess: self.algorithm.is_sess(),
            user,
            realm: &self.realm,
            nonce: &self.nonce,
            uri,
            nc: self.qop_auth.then_some(nc),
            cnonce,
            opaque: self.opaque.as_deref(),
        }
        .header_value(method, password)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param<'a>(header: &'a str, name: &str) -> &'a str {
        let start = header.find(&format!("{name}=")).unwrap() + name.len() + 1;
        let rest = &header[start..];
        let rest = rest.strip_prefix('"').unwrap_or(rest);
        &rest[..rest.find(['"', ',']).unwrap_or(rest.len())]
    }

    /// RFC 2617 §3.5: Mufasa / "Circle Of Life", qop=auth, MD5.
    #[test]
    fn rfc2617_worked_example() {
        let c = Challenge::parse(
            b"Digest realm=\"testrealm@host.com\", qop=\"auth,auth-int\", \
              nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"",
        )
        .unwrap();
        assert_eq!(c.algorithm, Algorithm::Md5);
        assert!(c.qop_auth);
        let a = c.answer("Mufasa", "Circle Of Life", "GET", "/dir/index.html", 1, "0a4f113b");
        assert_eq!(param(&a, "response"), "6629fae49393a05397450978507c4ef1");
        assert_eq!(param(&a, "nc"), "00000001");
        assert_eq!(param(&a, "opaque"), "5ccc069c403ebaf9f0171e9517f40e41");
    }

    /// RFC 7616 §3.9.1: the same exchange with SHA-256 and MD5 (password "Circle of Life").
    #[test]
    fn rfc7616_worked_examples() {
        let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
        let opaque = "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS";
        let text = |alg: &str| {
            format!("Digest realm=\"http-auth@example.org\", qop=\"auth, auth-int\", algorithm={alg}, nonce=\"{nonce}\", opaque=\"{opaque}\"")
        };
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        let sha = Challenge::best([text("SHA-256"), text("MD5")].iter().map(|s| s.as_bytes())).unwrap();
        assert_eq!(sha.algorithm, Algorithm::Sha256);
        let a = sha.answer("Mufasa", "Circle of Life", "GET", "/dir/index.html", 1, cnonce);
        assert_eq!(param(&a, "response"), "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1");
        assert!(a.contains("algorithm=SHA-256"));
        let md5 = Challenge::parse(text("MD5").as_bytes()).unwrap();
        let a = md5.answer("Mufasa", "Circle of Life", "GET", "/dir/index.html", 1, cnonce);
        assert_eq!(param(&a, "response"), "8ca523f5e9506fed4657c9700eebdbec");
    }

    #[test]
    fn without_qop_uses_rfc2069_form_and_rejects_unusable_challenges() {
        let c = Challenge::parse(b"Digest realm=\"r\", nonce=\"n\"").unwrap();
        assert!(!c.qop_auth);
        let a = c.answer("u", "p", "REGISTER", "sip:r", 1, "x");
        let ha1 = Algorithm::Md5.hex("u:r:p");
        let ha2 = Algorithm::Md5.hex("REGISTER:sip:r");
        assert_eq!(param(&a, "response"), Algorithm::Md5.hex(&format!("{ha1}:n:{ha2}")));
        assert!(!a.contains("qop"));
        assert!(Challenge::parse(b"Basic realm=\"r\"").is_none());
        assert!(Challenge::parse(b"Digest realm=\"r\", nonce=\"n\", algorithm=SHA-512-256").is_none());
        assert!(Challenge::parse(b"Digest realm=\"r\", nonce=\"n\", qop=\"auth-int\"").is_none());
        assert!(Challenge::parse(b"Digest realm=\"r\"").is_none());
        assert!(Challenge::parse(b"\xff\x00garbage").is_none());
    }
}
