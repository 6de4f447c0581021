//! Reading a REGISTER (RFC 3261 §10.3 steps 2, 3 and 6; RFC 3327 Path; RFC 5626 instance and
//! reg-id) into what it asks of the location service, or the error response it deserves.

use super::config::{RegistrarConfig, Reject};
use herald_sip::headers::Contact;
use herald_sip::uri::Host;
use herald_sip::{HeaderName, Message, Method};
use herald_store::{Aor, ContactUpdate};
use std::num::NonZeroU32;

/// Option tags the registrar implements (RFC 3261 §8.2.2.3, §20.32): Path (RFC 3327) and
/// Outbound (RFC 5626 §6).
pub const SUPPORTED: &[&str] = &["path", "outbound"];

/// What a well-formed REGISTER asks for.
#[derive(Debug)]
pub(super) struct Register<'m> {
    pub aor: Aor,
    pub call_id: &'m str,
    pub cseq: u32,
    pub action: Action<'m>,
    /// The Path header values joined as received (RFC 3327 §5.3), when there were any.
    pub path: Option<String>,
    /// Whether the UA listed `path` in Supported: only then is Path echoed (RFC 3327 §5.3).
    pub supports_path: bool,
    /// RFC 5626 §6: the registrar applied Outbound (the UA supports it, registers a flow with
    /// `+sip.instance` and `reg-id`, and its first hop supports it): the 200 says
    /// `Require: outbound`.
    pub outbound: bool,
}

#[derive(Debug)]
pub(super) enum Action<'m> {
    /// No Contact: return the current bindings (RFC 3261 §10.2.3).
    Query,
    /// `Contact: *` with `Expires: 0` (§10.2.2).
    RemoveAll,
    /// Add, refresh or remove the listed contacts.
    Update(Vec<ContactUpdate<'m>>),
}

fn bad(reason: &'static str) -> Reject {
    Reject::new(400, reason)
}

impl<'m> Register<'m> {
    pub fn read(req: &'m Message, config: &RegistrarConfig) -> Result<Register<'m>, Reject> {
        if req.method() != Some(Method::Register) {
            return Err(Reject::new(405, "Method Not Allowed").header("Allow", "REGISTER".into()));
        }
        let call_id = req.call_id().map_err(|_| bad("Bad Request (Call-ID missing or malformed)"))?;
        let cseq = req.cseq().map_err(|_| bad("Bad Request (CSeq missing or malformed)"))?;
        if cseq.method != Method::Register {
            return Err(bad("Bad Request (CSeq method is not REGISTER)"));
        }
        req.from_header().map_err(|_| bad("Bad Request (From missing or malformed)"))?;

        // Step 2: every extension in Require must be understood, else 420 listing the others.
        let mut unsupported = Vec::new();
        for tag in req.tokens(HeaderName::Require) {
            let tag = tag.map_err(|_| bad("Bad Request (malformed Require)"))?;
            if !SUPPORTED.iter().any(|s| s.eq_ignore_ascii_case(tag)) && !unsupported.contains(&tag) {
                unsupported.push(tag);
            }
        }
        if !unsupported.is_empty() {
            return Err(Reject::new(420, "Bad Extension").header("Unsupported", unsupported.join(", ")));
        }

        // Step 3: the address-of-record is the To URI, a SIP or SIPS URI (RFC 3261 §10.2; RFC
        // 4475 §3.3.4 unksm2: "A registrar would reject this request with a 400 Bad Request
        // response, since the To: header field is required to contain a SIP or SIPS URI as an
        // AOR").
        let to = req.to_header().map_err(|_| bad("Bad Request (To missing or malformed)"))?;
        let Some(to_uri) = to.uri.as_sip() else {
            return Err(bad("Bad Request (To must be a sip or sips URI)"));
        };
        if !config.serves(&to_uri.host) {
            return Err(Reject::new(404, "Not Found (domain not served here)"));
        }
        // A registrar serves its own domains only: the port does not split an AoR there, so a
        // phone registered as sip:bob@10.0.0.1 is found by INVITE sip:bob@10.0.0.1:5060; with
        // `use_domain` off the domain does not either.
        let aor = Aor::of_served_user(to_uri, config.use_domain);

        let expires_header = req.expires().map_err(|_| bad("Bad Request (malformed Expires)"))?;
        let mut contacts = Vec::new();
        for c in req.contacts() {
            contacts.push(c.map_err(|_| bad("Bad Request (malformed Contact)"))?);
        }
        let action = if contacts.iter().any(|c| matches!(c, Contact::Star)) {
            // Step 6: "*" is valid only alone and with "Expires: 0" (also §10.2.2).
            if contacts.len() != 1 {
                return Err(bad("Bad Request (Contact * must be the only contact)"));
            }
            if expires_header != Some(0) {
                return Err(bad("Bad Request (Contact * requires Expires: 0)"));
            }
            Action::RemoveAll
        } else if contacts.is_empty() {
            Action::Query
        } else {
            Action::Update(contact_updates(&contacts, expires_header, config)?)
        };

        let mut path = None;
        if req.field(HeaderName::Path).is_some() {
            // Validate every value, then keep the text as received.
            if req.paths().any(|p| p.is_err()) {
                return Err(bad("Bad Request (malformed Path)"));
            }
            let mut joined = String::new();
            for h in req.fields(HeaderName::Path) {
                let v = std::str::from_utf8(req.value_of(h)).map_err(|_| bad("Bad Request (malformed Path)"))?;
                if !joined.is_empty() {
                    joined.push_str(", ");
                }
                joined.push_str(v);
            }
            path = Some(joined);
        }
        let supports =
            |tag: &str| req.tokens(HeaderName::Supported).any(|t| t.is_ok_and(|t| t.eq_ignore_ascii_case(tag)));
        let supports_path = supports("path");
        let outbound = supports("outbound") && outbound_applies(&action, path.as_deref())?;

        Ok(Register { aor, call_id, cseq: cseq.seq, action, path, supports_path, outbound })
    }
}

/// RFC 5626 §6, for a REGISTER whose UA supports Outbound: whether it registers a flow (a
/// Contact with `+sip.instance` and `reg-id`). Refused: more than one such Contact (400, §4.2:
/// a UA registers one flow per REGISTER) and a first hop that does not support Outbound (a
/// first Path URI without `ob`: 439 First Hop Lacks Outbound Support, §6 and §11.5, so that the
/// UA can pick another edge proxy). Without a Path herald is the first hop itself.
/// Flows are keyed by instance and reg-id whether or not Outbound applies (the store's rule,
/// kept as before); what it changes is the `Require: outbound` of the 200.
fn outbound_applies(action: &Action<'_>, path: Option<&str>) -> Result<bool, Reject> {
    let Action::Update(contacts) = action else { return Ok(false) };
    let flows = contacts.iter().filter(|c| c.instance.is_some() && c.reg_id.is_some()).count();
    match flows {
        0 => return Ok(false),
        1 => {}
        _ => return Err(bad("Bad Request (more than one Contact with reg-id)")),
    }
    let first_hop_ob = match path {
        None => true,
        Some(p) => herald_sip::headers::ListIter::new(p.as_bytes())
            .next()
            .and_then(|v| v.ok())
            .and_then(|(_, v)| herald_sip::headers::NameAddr::parse(v).ok())
            .is_some_and(|a| a.uri.as_sip().is_some_and(|u| u.param("ob").is_some())),
    };
    if !first_hop_ob {
        return Err(Reject::new(439, "First Hop Lacks Outbound Support"));
    }
    Ok(true)
}

/// Steps 6 and 7 for each contact: its interval is the `expires` parameter, else the Expires
/// header, else the configured default. "If and only if the requested expiration interval is
/// greater than zero AND smaller than one hour AND less than a registrar-configured minimum,
/// the registrar MAY reject the registration with a response of 423 (Interval Too Brief)",
/// which then carries Min-Expires (§20.23); herald does, failing the whole request. An interval
/// over the maximum is shortened ("Registrars MAY choose an expiration less than the requested
/// expiration interval"), and the 200 reports what was granted.
fn contact_updates<'m>(
    contacts: &[Contact<'m>],
    expires_header: Option<u32>,
    config: &RegistrarConfig,
) -> Result<Vec<ContactUpdate<'m>>, Reject> {
    let mut out = Vec::with_capacity(contacts.len());
    for c in contacts {
        let Contact::Address(addr) = c else { continue };
        let requested = c.expires().or(expires_header).unwrap_or(config.default_expires);
        if requested != 0 && requested < 3600 && requested < config.min_expires {
            return Err(Reject::new(423, "Interval Too Brief").header("Min-Expires", config.min_expires.to_string()));
        }
        let expires = requested.min(config.max_expires);
        // RFC 5626 §4.1/§4.2: +sip.instance is a quoted "<urn:...>"; reg-id a positive integer.
        // Both are needed to identify a flow; a reg-id alone is ignored (§6).
        // The quotes are removed but escapes kept: the text is only compared and echoed.
        let instance = addr
            .params
            .get("+sip.instance")
            .flatten()
            .map(|v| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v))
            .filter(|v| !v.is_empty());
        let reg_id = instance.and(addr.params.get("reg-id").flatten()).and_then(|v| v.parse::<NonZeroU32>().ok());
        out.push(ContactUpdate { uri: addr.uri.as_str(), expires, q: c.q(), instance, reg_id });
    }
    Ok(out)
}

impl RegistrarConfig {
    /// Step 3: with a domain list, only AoRs in those domains are ours (404 otherwise).
    pub(super) fn serves(&self, host: &Host<'_>) -> bool {
        if self.domains.is_empty() {
            return true;
        }
        let name = host.to_string();
        self.domains.iter().any(|d| d.eq_ignore_ascii_case(&name))
    }
}
