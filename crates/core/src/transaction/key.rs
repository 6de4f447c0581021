//! Transaction keys (RFC 3261 §17.1.3, §17.2.3, §9.2) and branch generation (§8.1.1.7; a
//! stateless proxy's branches, §16.11, are `super::stateless_branch`'s).
//!
//! Keys are owned and hashable: the table keeps one per transaction, in its entry, and matches a
//! message with one hash lookup (a response from the borrowed [`ClientKey::parts`], an ACK from
//! the borrowed [`ServerKeyParts`], without an owned key). They are built from a parsed message and return `None` when a header they need
//! is missing or malformed; such a message matches no transaction.

use crate::seed::Seed;
use herald_sip::headers::{is_rfc3261_branch, MAGIC_COOKIE};
use herald_sip::text;
use herald_sip::uri::Host;
use herald_sip::{HeaderName, Message, Method};
use smallvec::SmallVec;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

/// A method as a key component, without allocating for the methods herald knows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MethodKey {
    Known(&'static str),
    /// Methods are case-sensitive (RFC 3261 §7.1), so the token is kept as written.
    Extension(Box<str>),
}

impl MethodKey {
    pub const INVITE: MethodKey = MethodKey::Known("INVITE");
    pub const ACK: MethodKey = MethodKey::Known("ACK");

    pub fn of(m: Method<'_>) -> MethodKey {
        match m.known_name() {
            Some(name) => MethodKey::Known(name),
            None => MethodKey::Extension(m.as_str().into()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            MethodKey::Known(s) => s,
            MethodKey::Extension(s) => s,
        }
    }
}

/// Client transaction key (§17.1.3): the branch of the top Via (which this element generated)
/// and the CSeq method, so the CANCEL for an INVITE (same branch, §9.1) is a separate
/// transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientKey {
    pub branch: Box<str>,
    pub method: MethodKey,
}

impl ClientKey {
    /// The key of a request this element sends, or of a response to one (same rule for both).
    pub fn from_message(msg: &Message) -> Option<ClientKey> {
        let (branch, method) = Self::parts(msg)?;
        Some(ClientKey { branch: branch.into(), method: MethodKey::of(method) })
    }

    /// The key's fields borrowed from `msg`, for a lookup that builds no owned key (the branch
    /// would be an allocation per response).
    pub(crate) fn parts<'a>(msg: &'a Message) -> Option<(&'a str, Method<'a>)> {
        let branch = msg.top_via_branch().filter(|b| !b.is_empty())?;
        Some((branch, msg.cseq().ok()?.method))
    }
}

/// Octets of an RFC 3261 server key held without an allocation: a branch of 36 (SIPp's,
/// Kamailio's, a phone's are 16 to 30) and an IPv6 sent-by (20), or a longer branch and an
/// IPv4 one (8). A longer key goes to the heap, as every key did.
const INLINE_KEY: usize = 56;

/// Server transaction key (§17.2.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerKey {
    /// The top Via carries an RFC 3261 branch: branch (compared as written), sent-by (host
    /// lower-cased, IP addresses normalised) and method, with ACK counted as INVITE. The branch
    /// and the sent-by share one buffer, split at `branch_len` (a key is built per request;
    /// [`ServerKey::branch`], [`ServerKey::sent_by`]), held inline up to `INLINE_KEY` (56) octets:
    /// a key built per request allocated and freed its box (the ACK's only for a lookup that
    /// finds nothing). The sent-by is kept in a binary form that compares the same
    /// ([`write_sent_by_key`]): writing IPv4 addresses and ports in decimal cost ~1.3k
    /// instructions per proxied call (issue 21).
    Rfc3261 { branch_sent_by: SmallVec<[u8; INLINE_KEY]>, branch_len: usize, method: MethodKey },
    /// An RFC 2543 client (no magic cookie): the fields of §17.2.3's fallback rule.
    Rfc2543(Box<LegacyKey>),
}

/// The RFC 2543 fallback fields (§17.2.3). The Request-URI and the top Via are compared as
/// written (retransmissions are byte copies). For INVITE and ACK `to_tag` is `None`: the INVITE's
/// To tag and the ACK's (which must equal the tag of the response sent) are checked by the
/// table after the lookup, since they differ between the two.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LegacyKey {
    pub request_uri: Box<[u8]>,
    pub to_tag: Option<Box<str>>,
    pub from_tag: Option<Box<str>>,
    pub call_id: Box<str>,
    pub cseq: u32,
    pub method: MethodKey,
    pub top_via: Box<[u8]>,
}

impl ServerKey {
    /// The key a request matches (for INVITE, ACK and every other method; an ACK maps to the
    /// INVITE transaction it acknowledges, a CANCEL to a transaction of its own).
    pub fn from_request(msg: &Message) -> Option<ServerKey> {
        let method = msg.method()?;
        let class = if method == Method::Ack { MethodKey::INVITE } else { MethodKey::of(method) };
        Self::build(msg, class)
    }

    /// For a CANCEL: the key of the INVITE server transaction it cancels (§9.2: the same
    /// matching as §17.2.3 with the method taken as INVITE).
    pub fn cancel_target(msg: &Message) -> Option<ServerKey> {
        if msg.method()? != Method::Cancel {
            return None;
        }
        Self::build(msg, MethodKey::INVITE)
    }

    fn build(msg: &Message, method: MethodKey) -> Option<ServerKey> {
        // The branch and sent-by from the receipt check's memo, not the whole Via made again.
        let sent_by = msg.top_via_sent_by()?;
        if let Some(branch) = msg.top_via_branch().filter(|b| is_rfc3261_branch(b)) {
            let len = branch.len() + sent_by_key_len(sent_by);
            // Written in place at its exact length: SmallVec's extend and extend_from_slice
            // cost more than the allocation they spared.
            let write = |key: &mut [u8]| {
                let (b, rest) = key.split_at_mut(branch.len());
                b.copy_from_slice(branch.as_bytes());
                write_sent_by_key(rest, sent_by);
            };
            let branch_sent_by = if len <= INLINE_KEY {
                let mut buf = [0; INLINE_KEY];
                write(&mut buf[..len]);
                SmallVec::from_buf_and_len(buf, len)
            } else {
                let mut key = vec![0; len];
                write(&mut key);
                SmallVec::from_vec(key)
            };
            return Some(ServerKey::Rfc3261 { branch_sent_by, branch_len: branch.len(), method });
        }
        let invite_class = method == MethodKey::INVITE;
        Some(ServerKey::Rfc2543(Box::new(LegacyKey {
            request_uri: msg.request_uri_bytes()?.into(),
            to_tag: if invite_class { None } else { to_tag(msg) },
            from_tag: msg.from_tag().ok()?.map(Into::into),
            call_id: msg.call_id().ok()?.into(),
            cseq: msg.cseq().ok()?.seq,
            method,
            top_via: msg.list_values(HeaderName::Via).next()?.ok()?.bytes.into(),
        })))
    }

    pub fn is_rfc3261(&self) -> bool {
        matches!(self, ServerKey::Rfc3261 { .. })
    }

    /// The hash a transaction table indexes this key under, with `state`'s keys: of its parts
    /// (branch, sent-by form, method) one by one, so that [`ServerKeyParts`] hashes the same
    /// without the key being built. An RFC 2543 key hashes as a whole.
    pub(crate) fn table_hash(&self, state: &impl BuildHasher) -> u64 {
        match self {
            ServerKey::Rfc3261 { branch_sent_by, branch_len, method } => {
                let (branch, sent_by) = branch_sent_by.split_at((*branch_len).min(branch_sent_by.len()));
                parts_hash(state, branch, sent_by, method)
            }
            ServerKey::Rfc2543(_) => state.hash_one(self),
        }
    }

    /// Whether this is the RFC 3261 key of `parts`.
    pub(crate) fn is(&self, parts: &ServerKeyParts<'_>) -> bool {
        match self {
            ServerKey::Rfc3261 { branch_sent_by, branch_len, method } => {
                *method == parts.method
                    && branch_sent_by.get(..*branch_len) == Some(parts.branch.as_bytes())
                    && branch_sent_by.get(*branch_len..) == Some(parts.sent_by())
            }
            ServerKey::Rfc2543(_) => false,
        }
    }
}

/// The hash of an RFC 3261 server key's parts ([`ServerKey::table_hash`]).
fn parts_hash(state: &impl BuildHasher, branch: &[u8], sent_by: &[u8], method: &MethodKey) -> u64 {
    let mut h = state.build_hasher();
    h.write(branch);
    h.write(sent_by);
    h.write(method.as_str().as_bytes());
    h.finish()
}

/// An RFC 3261 server key borrowed from a request, for a lookup that builds no key (an ACK's:
/// nearly every one is for a 2xx, a transaction of its own that matches nothing here, and
/// building the key it is looked up by, then hashing it, cost about 350 instructions per call,
/// issue 21). The sent-by's compared form is on the stack: an IP address's, not a name's.
#[derive(Debug)]
pub(crate) struct ServerKeyParts<'a> {
    branch: &'a str,
    sent_by: [u8; 20],
    sent_by_len: usize,
    method: MethodKey,
}

impl<'a> ServerKeyParts<'a> {
    /// The parts of [`ServerKey::from_request`]'s key for `msg`, when it would be an RFC 3261
    /// key with an IP address as sent-by; `None` otherwise (build the key then).
    pub(crate) fn of_request(msg: &'a Message) -> Option<ServerKeyParts<'a>> {
        let method = msg.method()?;
        let method = if method == Method::Ack { MethodKey::INVITE } else { MethodKey::of(method) };
        let sent_by = msg.top_via_sent_by()?;
        let branch = msg.top_via_branch().filter(|b| is_rfc3261_branch(b))?;
        if matches!(sent_by.0, Host::Name(_)) {
            return None;
        }
        let sent_by_len = sent_by_key_len(sent_by);
        let mut form = [0; 20];
        write_sent_by_key(form.get_mut(..sent_by_len)?, sent_by);
        Some(ServerKeyParts { branch, sent_by: form, sent_by_len, method })
    }

    fn sent_by(&self) -> &[u8] {
        &self.sent_by[..self.sent_by_len]
    }

    /// [`ServerKey::table_hash`] of the key these are the parts of.
    pub(crate) fn table_hash(&self, state: &impl BuildHasher) -> u64 {
        parts_hash(state, self.branch.as_bytes(), self.sent_by(), &self.method)
    }
}

impl ServerKey {
    /// The branch of an RFC 3261 key.
    pub fn branch(&self) -> Option<&str> {
        match self {
            ServerKey::Rfc3261 { branch_sent_by, branch_len, .. } => {
                std::str::from_utf8(branch_sent_by.get(..*branch_len)?).ok()
            }
            ServerKey::Rfc2543(_) => None,
        }
    }

    /// The sent-by of an RFC 3261 key, as compared (host lower-cased), written `host[:port]`.
    pub fn sent_by(&self) -> Option<String> {
        let ServerKey::Rfc3261 { branch_sent_by, branch_len, .. } = self else { return None };
        let (&[kind, has_port, hi, lo], host) = branch_sent_by.get(*branch_len..)?.split_first_chunk::<4>()?;
        let mut s = match kind {
            b'4' => Ipv4Addr::from(<[u8; 4]>::try_from(host).ok()?).to_string(),
            b'6' => format!("[{}]", Ipv6Addr::from(<[u8; 16]>::try_from(host).ok()?)),
            _ => String::from_utf8_lossy(host).into_owned(),
        };
        if has_port == 1 {
            s.push(':');
            text::push_dec(&mut s, u64::from(u16::from_be_bytes([hi, lo])));
        }
        Some(s)
    }
}

/// Writes the sent-by of a Via into `key` (exactly [`sent_by_key_len`] octets) as a server key
/// compares it (§17.2.3; hosts compare case-insensitively, §19.1.4): the host's kind, the port
/// (whether there is one, then its two bytes), then the host: a name lower-cased, an address's
/// octets. Fixed fields first, so the one variable field ends the key and two sent-bys are
/// equal exactly when their texts are.
fn write_sent_by_key(key: &mut [u8], (host, port): (Host<'_>, Option<u16>)) {
    let kind = match host {
        Host::Name(_) => b'n',
        Host::Ipv4(_) => b'4',
        Host::Ipv6(_) => b'6',
    };
    let [hi, lo] = port.unwrap_or(0).to_be_bytes();
    let (fixed, rest) = key.split_at_mut(4);
    fixed.copy_from_slice(&[kind, u8::from(port.is_some()), hi, lo]);
    match host {
        Host::Name(n) => rest.iter_mut().zip(n.bytes()).for_each(|(k, b)| *k = b.to_ascii_lowercase()),
        Host::Ipv4(ip) => rest.copy_from_slice(&ip.octets()),
        Host::Ipv6(ip) => rest.copy_from_slice(&ip.octets()),
    }
}

/// The length of [`write_sent_by_key`]'s form.
fn sent_by_key_len((host, _): (Host<'_>, Option<u16>)) -> usize {
    4 + match host {
        Host::Name(n) => n.len(),
        Host::Ipv4(_) => 4,
        Host::Ipv6(_) => 16,
    }
}

/// The To tag of a message, owned.
pub(crate) fn to_tag(msg: &Message) -> Option<Box<str>> {
    msg.to_tag().ok()?.map(Into::into)
}

/// Fresh branches for the requests one engine sends (§8.1.1.7, §16.6 step 8): unique within
/// the process (a counter whose top 16 bits are the engine's index, as for its DNS tokens) and
/// unpredictable to peers (a keyed hash of the counter, keyed from the engine's [`Seed`], so a
/// peer that sees one branch cannot guess the next and forge responses). Each carries the magic
/// cookie. The same seed gives the same sequence of branches: a run replays exactly.
#[derive(Debug, Clone)]
pub struct BranchGen {
    seed: Seed,
    next: u64,
}

impl BranchGen {
    /// Branches for engine `index` of a process, from the engine's seed.
    pub fn new(seed: Seed, index: u16) -> BranchGen {
        BranchGen { seed: seed.derive("branch", index.into()), next: u64::from(index) << 48 }
    }

    /// The next branch: `z9hG4bK`, 16 hex digits of keyed hash, then the counter in hex.
    pub fn next_branch(&mut self) -> String {
        let n = self.next;
        self.next += 1;
        // 7 + 16 + up to 13 counter digits, and room for the proxy's loop-hash suffix of 17
        // (`engine::forward_edits::loop_branch`) without growing.
        let mut b = String::with_capacity(64);
        b.push_str(MAGIC_COOKIE);
        text::push_hex(&mut b, self.seed.hash_one(n), 16);
        text::push_hex(&mut b, n, 0);
        b
    }

    /// [`BranchGen::next_branch`] followed by `sep` and the 16 hex digits of `suffix` (a proxy's
    /// loop hash, §16.6 step 8: `engine::forward_edits::loop_branch`), written on the stack
    /// and copied once into a `String` of its exact length, which a transaction key takes
    /// without a reallocation: three pushes, each checking its digits as UTF-8, cost about 150
    /// instructions more per branch (issue 21). `sep` is an ASCII separator.
    pub fn next_branch_with(&mut self, sep: u8, suffix: u64) -> String {
        debug_assert!(sep.is_ascii(), "an ASCII separator keeps the branch a token");
        let n = self.next;
        self.next += 1;
        let mut buf = [0u8; 7 + 16 + 16 + 1 + 16];
        buf[..7].copy_from_slice(MAGIC_COOKIE.as_bytes());
        buf[7..23].copy_from_slice(&text::hex16(self.seed.hash_one(n)));
        // The counter without leading zeros, as `push_hex(n, 0)` writes it.
        let shown = (64 - n.leading_zeros() as usize).div_ceil(4).max(1);
        let end = 23 + shown;
        buf[23..end].copy_from_slice(&text::hex16(n)[16 - shown..]);
        buf[end] = sep;
        buf[end + 1..end + 17].copy_from_slice(&text::hex16(suffix));
        // ASCII throughout (`from_utf8_lossy` walked it in chunks: ~430 instructions).
        text::ascii(&buf[..end + 17]).to_owned()
    }
}
