//! Bindings and the changes a REGISTER makes to them (RFC 3261 §10.3).

use std::fmt;
use std::num::NonZeroU32;

/// One contact bound to an address-of-record.
///
/// `S` is where the REGISTER came from (herald-core uses its `Peer`: transport, address and
/// stream connection), so that a request to a contact registered over TCP can reuse the
/// connection the registration arrived on, and a contact behind NAT can be reached at the
/// address the registration really came from.
///
/// Layout: four boxed strings (16 bytes each, `None` costs nothing thanks to the null niche), the
/// source, and four 32-bit scalars; 136 bytes with a 56-byte source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<S> {
    /// The contact URI exactly as registered, URI parameters and headers included (for a
    /// name-addr, what was inside `<>`; header parameters such as `expires` are not part of it).
    pub contact: Box<str>,
    /// Call-ID of the REGISTER that last updated the binding (RFC 3261 §10.3 step 7).
    pub call_id: Box<str>,
    /// The Path header values of that REGISTER, joined with ", " as received (RFC 3327 §5.3).
    pub path: Option<Box<str>>,
    /// `+sip.instance` (RFC 5626 §4.1, RFC 5627), unquoted, e.g. `<urn:uuid:...>`.
    pub instance: Option<Box<str>>,
    /// Where the REGISTER came from.
    pub source: S,
    /// Seconds since the store's epoch at which the binding expires. Whole seconds keep the
    /// binding small; a binding may therefore lapse up to one second before its exact deadline
    /// (Kamailio's `time_t` expiry has the same granularity); UAs refresh well before the end
    /// of the interval they were granted.
    pub expires_at: u32,
    /// CSeq number of the REGISTER that last updated the binding.
    pub cseq: u32,
    /// `reg-id` (RFC 5626 §4.2); meaningful together with `instance`.
    pub reg_id: Option<NonZeroU32>,
    /// The `q` parameter in thousandths (RFC 3261 §20.10); `None` when the contact had none,
    /// which ranks as 1.0.
    pub q: Option<u16>,
}

impl<S> Binding<S> {
    /// The preference used for ordering: the q-value, 1.0 when absent.
    pub fn q_or_default(&self) -> u16 {
        self.q.unwrap_or(1000)
    }
}

/// One Contact of a REGISTER, after the registrar has decided its expiration interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContactUpdate<'a> {
    /// The contact URI as written.
    pub uri: &'a str,
    /// Granted interval in seconds; 0 removes the binding (RFC 3261 §10.2.2).
    pub expires: u32,
    pub q: Option<u16>,
    pub instance: Option<&'a str>,
    pub reg_id: Option<NonZeroU32>,
}

impl<'a> ContactUpdate<'a> {
    /// A contact with only a URI and an interval.
    pub fn new(uri: &'a str, expires: u32) -> ContactUpdate<'a> {
        ContactUpdate { uri, expires, q: None, instance: None, reg_id: None }
    }
}

/// Everything one REGISTER asks of the location service; applied atomically by
/// [`crate::LocationStore::apply`].
#[derive(Debug, Clone, Copy)]
pub struct Update<'a, S> {
    pub call_id: &'a str,
    pub cseq: u32,
    /// The request's Path header values joined as received, if any.
    pub path: Option<&'a str>,
    pub source: S,
    pub contacts: &'a [ContactUpdate<'a>],
}

/// Why an update was refused. The store is unchanged when one is returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// RFC 3261 §10.3 step 6/7: a binding carries the request's Call-ID with a CSeq that is not
    /// lower than the request's; "the update MUST be aborted and the request fails".
    OutOfOrder { contact: Box<str>, stored_cseq: u32, request_cseq: u32 },
    /// The address-of-record would hold more than `max` bindings. `retry_after` is the number
    /// of seconds until its earliest binding expires (at least 1), after which the same request
    /// could succeed.
    TooManyBindings { max: usize, retry_after: u32 },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::OutOfOrder { contact, stored_cseq, request_cseq } => write!(
                f,
                "binding {contact} was updated by CSeq {stored_cseq} of the same Call-ID; CSeq {request_cseq} is \
                 not newer"
            ),
            StoreError::TooManyBindings { max, .. } => write!(f, "more than {max} bindings for one address-of-record"),
        }
    }
}

impl std::error::Error for StoreError {}
