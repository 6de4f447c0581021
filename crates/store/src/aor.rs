//! Address-of-record keys (RFC 3261 §10.3 step 5).
//!
//! "The URI MUST then be converted to a canonical form. To do that, all URI parameters MUST be
//! removed (including the user-param), and any escaped characters MUST be converted to their
//! unescaped form. The result serves as an index into the list of bindings."
//!
//! The key herald uses is `user@host[:port]`:
//!
//! * **user**: %-unescaped, case kept (user parts are case-sensitive, RFC 3261 §19.1.4). The
//!   result is bytes, not text: `%00` is legal (RFC 4475 §3.1.1.4 escnull). A `@` produced by
//!   unescaping cannot be confused with the separator because a host never contains `@`: the
//!   separator is always the last one.
//! * **password**: dropped. It is not part of the identity of a resource (and is deprecated,
//!   RFC 3261 §19.1.1).
//! * **host**: names lowercased (§19.1.4: hosts compare case-insensitively), IP addresses in
//!   their canonical text form (IPv6 bracketed and compressed, so `[2001:DB8::0:1]` and
//!   `[2001:db8::1]` are one key).
//! * **port**: kept when present, and an explicit 5060 is *not* the same key as no port, as in
//!   §19.1.4 URI comparison — for URIs of other domains. For a domain herald serves
//!   ([`Aor::of_served_domain`]) the key is `user@host` without the port: the domain is the
//!   host (§10.3 step 1), and phones write the registrar's port or leave it out as they
//!   please, so `REGISTER To: sip:bob@10.0.0.1` and `INVITE sip:bob@10.0.0.1:5060` must reach
//!   the same user (Kamailio's registrar keys `user@domain` the same way).
//! * **scheme**: dropped, so `sips:alice@example.com` and `sip:alice@example.com` are one AoR.
//!   Step 5 removes parameters and escapes but says nothing about the scheme; §19.1 says "any
//!   resource described by a SIP URI can be 'upgraded' to a SIPS URI by just changing the
//!   scheme", i.e. both name the same resource, and registrars in the field (Kamailio's usrloc
//!   `user@domain`) key them together. Each binding keeps its contact URI exactly as
//!   registered, scheme included, so a proxy routing a request for a `sips:` AoR can still skip
//!   contacts that are not reachable securely (RFC 5630).

use herald_sip::uri::{Host, SipUri, Uri, UriError};
use smallvec::SmallVec;
use std::fmt;
use std::io::Write as _;

/// A canonical address-of-record: the index of the location service.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aor(Box<[u8]>);

impl Aor {
    /// The canonical key of a sip or sips URI (see the module documentation).
    pub fn from_sip_uri(uri: &SipUri<'_>) -> Aor {
        Aor::key(uri, true)
    }

    /// The key of a URI in a domain herald serves: `user@host`, the port left out (see the
    /// module documentation). `None` for schemes other than sip and sips.
    pub fn of_served_domain(uri: &Uri<'_>) -> Option<Aor> {
        uri.as_sip().map(|u| Aor::of_served_sip_uri(u))
    }

    /// [`Aor::of_served_domain`] of a sip or sips URI.
    pub fn of_served_sip_uri(uri: &SipUri<'_>) -> Aor {
        Aor::key(uri, false)
    }

    /// The key of a URI in a served domain as `[registrar] use_domain` asks: with the domain,
    /// [`Aor::of_served_sip_uri`]; without it, the unescaped user part alone (Kamailio's
    /// registrar with `use_domain=0`: `bob@a.example` and `bob@b.example` are one user, so only
    /// single-domain setups may turn it off). A URI without a user part keeps its host.
    pub fn of_served_user(uri: &SipUri<'_>, use_domain: bool) -> Aor {
        AorKey::of_served_user(uri, use_domain).to_aor()
    }

    fn key(uri: &SipUri<'_>, with_port: bool) -> Aor {
        AorKey::key(uri, with_port).to_aor()
    }

    /// The key of any URI that can be an address-of-record: sip and sips only (RFC 3261 §10.2:
    /// the To header field of a REGISTER holds a SIP or SIPS URI). `None` for other schemes.
    pub fn from_uri(uri: &Uri<'_>) -> Option<Aor> {
        uri.as_sip().map(Aor::from_sip_uri)
    }

    /// Parses a sip or sips URI and returns its key.
    pub fn parse(uri: &str) -> Result<Aor, UriError> {
        SipUri::parse(uri.as_bytes()).map(|u| Aor::from_sip_uri(&u))
    }

    /// Wraps bytes that are already a canonical key (e.g. "alice@example.com"), for tools and
    /// benchmarks that build keys in bulk. No canonicalization is done.
    pub fn from_canonical(key: impl Into<Box<[u8]>>) -> Aor {
        Aor(key.into())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A canonical key built where it is used: on the stack for the usual length, so that a
/// location lookup ([`crate::LocationStore::lookup_key_with`]) allocates nothing for it (issue
/// 21: the boxed key's allocation, shrink and free cost ~230 instructions per INVITE).
/// [`AorKey::to_aor`] boxes it at its exact length where a key is kept.
pub struct AorKey(SmallVec<[u8; 96]>);

impl AorKey {
    /// [`Aor::of_served_user`]'s key.
    pub fn of_served_user(uri: &SipUri<'_>, use_domain: bool) -> AorKey {
        match (use_domain, uri.user) {
            (false, Some(user)) => match uri.user_unescaped() {
                Some(u) => AorKey(SmallVec::from_slice(&u)),
                None => AorKey(SmallVec::from_slice(user.as_bytes())),
            },
            _ => AorKey::key(uri, false),
        }
    }

    fn key(uri: &SipUri<'_>, with_port: bool) -> AorKey {
        let mut key = SmallVec::new();
        if let Some(user) = uri.user {
            // The parser validated every escape; on the impossible failure keep the raw text.
            match uri.user_unescaped() {
                Some(u) => key.extend_from_slice(&u),
                None => key.extend_from_slice(user.as_bytes()),
            }
            key.push(b'@');
        }
        match uri.host {
            Host::Name(name) => key.extend(name.bytes().map(|b| b.to_ascii_lowercase())),
            // Without `core::fmt`, which cost about 1,000 instructions per location lookup.
            Host::Ipv4(v4) => key.extend_from_slice(herald_sip::text::ipv4_text(v4, &mut [0u8; 15]).as_bytes()),
            ip => {
                let _ = write!(key, "{ip}");
            }
        }
        if let Some(port) = uri.port.filter(|_| with_port) {
            let _ = write!(key, ":{port}");
        }
        AorKey(key)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The key as an [`Aor`], boxed at its length.
    pub fn to_aor(&self) -> Aor {
        Aor(Box::from(&self.0[..]))
    }
}

/// Printable form: bytes outside visible ASCII (and `%` itself) are shown as `%HH`, so the
/// output is unambiguous and safe for logs.
impl fmt::Display for Aor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0.iter() {
            if b.is_ascii_graphic() && b != b'%' {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "%{b:02X}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Aor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Aor({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> String {
        Aor::parse(s).unwrap().to_string()
    }

    #[test]
    fn canonical_form() {
        assert_eq!(key("sip:alice@Example.COM"), "alice@example.com");
        assert_eq!(key("sips:alice@example.com"), "alice@example.com");
        assert_eq!(key("SIP:alice:secret@example.com;transport=tcp;user=phone?Subject=x"), "alice@example.com");
        assert_eq!(key("sip:%61lice@example.com:5070"), "alice@example.com:5070");
        assert_eq!(key("sip:example.com"), "example.com");
        assert_eq!(key("sip:bob@[2001:DB8::0:1]:5060"), "bob@[2001:db8::1]:5060");
        assert_eq!(key("sip:bob@192.0.2.1"), "bob@192.0.2.1");
        // Case of the user part is significant.
        assert_ne!(Aor::parse("sip:Alice@h").unwrap(), Aor::parse("sip:alice@h").unwrap());
        // An explicit port is a different key.
        assert_ne!(Aor::parse("sip:a@h:5060").unwrap(), Aor::parse("sip:a@h").unwrap());
    }

    #[test]
    fn served_domains_are_keyed_without_the_port() {
        let served = |s: &str| Aor::of_served_domain(&Uri::parse(s.as_bytes()).unwrap()).unwrap().to_string();
        assert_eq!(served("sip:bob@127.0.0.1:5060"), "bob@127.0.0.1");
        assert_eq!(served("sip:bob@127.0.0.1"), "bob@127.0.0.1");
        assert_eq!(served("sips:bob@Example.COM:5061;transport=tls"), "bob@example.com");
        assert_eq!(served("sip:bob@[2001:DB8::1]:5080"), "bob@[2001:db8::1]");
        // The user part stays case-sensitive and unescaped as in the strict form.
        assert_eq!(served("sip:B%6Fb@h:5060"), "Bob@h");
        assert!(Aor::of_served_domain(&Uri::parse(b"tel:+1555").unwrap()).is_none());
    }

    #[test]
    fn without_the_domain_the_user_alone_is_the_key() {
        let key = |s: &str, d: bool| Aor::of_served_user(&SipUri::parse(s.as_bytes()).unwrap(), d).to_string();
        assert_eq!(key("sip:bob@a.example:5060;transport=tcp", false), "bob");
        assert_eq!(key("sips:b%6Fb@B.example", false), "bob");
        assert_eq!(key("sip:Bob@a.example", false), "Bob", "user parts stay case-sensitive (RFC 3261 §19.1.4)");
        assert_eq!(key("sip:a.example:5070", false), "a.example");
        assert_eq!(key("sip:bob@A.Example:5060", true), "bob@a.example");
    }

    #[test]
    fn a_key_longer_than_its_stack_room_is_whole() {
        let user = "u".repeat(200);
        let uri = format!("sip:{user}@Example.COM:5060");
        let key = AorKey::of_served_user(&SipUri::parse(uri.as_bytes()).unwrap(), true);
        assert_eq!(key.as_bytes(), format!("{user}@example.com").as_bytes());
        assert_eq!(key.to_aor().as_bytes(), key.as_bytes());
    }

    #[test]
    fn escapes_become_octets() {
        let a = Aor::parse("sip:null-%00-null@example.com").unwrap();
        assert_eq!(a.as_bytes(), b"null-\0-null@example.com");
        assert_eq!(a.to_string(), "null-%00-null@example.com");
        assert_eq!(Aor::parse("sip:a%40b@h").unwrap().as_bytes(), b"a@b@h");
        assert!(Aor::parse("tel:+1555").is_err());
        assert!(Aor::from_uri(&Uri::parse(b"tel:+1555").unwrap()).is_none());
    }
}
