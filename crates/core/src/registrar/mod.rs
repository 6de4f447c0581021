//! The registrar (RFC 3261 §10.3): REGISTER in, response bytes out, bindings in the shared
//! [`LocationStore`].
//!
//! Sans-IO like the rest of herald-core: [`Registrar::handle_register`] takes the current time,
//! the parsed request and the peer it came from, and returns the whole response; the caller
//! sends it through the server transaction. The steps of §10.3 are followed in order:
//!
//! 1. the Request-URI's domain is the caller's routing decision (a REGISTER for a domain that
//!    is not ours is proxied, not handed here);
//! 2. `Require` with an option tag we do not implement → 420 with `Unsupported` (§8.2.2.3);
//!    `path` (RFC 3327) is implemented;
//! 3. the To URI must be sip or sips (400 otherwise, RFC 4475 §3.3.4) and, when
//!    [`RegistrarConfig::domains`] is set, in one of those domains (404); it is canonicalized
//!    into an [`Aor`] (see `herald_store::Aor` for the rules);
//! 4. and 5. (authentication, and authorization of who may change which AoR) are not done here:
//!    they belong to digest authentication in front of the registrar;
//! 6. Contact: `*` only alone and with `Expires: 0` (400), then it removes every binding, subject
//!    to the Call-ID/CSeq check;
//! 7. each contact's interval comes from its `expires` parameter, the Expires header or
//!    [`RegistrarConfig::default_expires`]; under an hour and below the minimum → 423 with
//!    Min-Expires; above the maximum → shortened; then every binding is added, refreshed or
//!    removed atomically, with the Call-ID/CSeq ordering check;
//! 8. 200 OK listing every current binding with its remaining lifetime, and
//!    `Require: outbound` when RFC 5626 §6 Outbound applied (a flow registered with
//!    `Supported: outbound` through a first hop that supports it, else 439).
//!
//! Every binding remembers the [`Peer`] its REGISTER came from, so that requests for a contact
//! registered over a stream can reuse that connection and NATed contacts can be reached at the
//! observed address.

mod config;
mod request;
mod stats;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_torture;

use crate::nat::EdgeFlows;
use crate::peer::Peer;
use crate::seed::SeededState;
use bytes::BytesMut;
use herald_sip::{HeaderName, Message, ResponseBuilder};
use herald_store::{Binding, StoreError, Update};
use request::{Action, Register};
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Instant;

pub use config::RegistrarConfig;
use config::Reject;
pub use herald_store::{Aor, LocationStore, Ticket};
pub use request::SUPPORTED;
pub use stats::{RegistrarStats, RegistrarStatsSnapshot};

/// The location store as the registrar fills it: bindings remember the [`Peer`] they came from.
pub type Location = LocationStore<Peer>;

/// Processes REGISTER requests. Holds no per-request state, so one instance can serve every
/// worker (`&self` everywhere); the bindings live in the shared [`LocationStore`]. Clones
/// share their counters ([`Registrar::shared_stats`]): give each engine shard a clone of one
/// registrar and the counters cover them all.
#[derive(Debug, Clone)]
pub struct Registrar {
    config: RegistrarConfig,
    /// Keys the To tags of responses (RFC 3261 §19.3: unguessable, here 64 bits of a keyed
    /// hash of the request's identifiers).
    tags: SeededState,
    /// Every answer counted by outcome; refusals by reason.
    stats: Arc<RegistrarStats>,
    /// The flows of phones behind NAT registered through herald with another registrar (herald
    /// their edge proxy, `crate::nat::EdgeFlows`): registration state with no binding here,
    /// shared like the counters so that the runtime's keep-alive loop sees every shard's.
    edge_flows: Arc<EdgeFlows>,
}

impl Registrar {
    /// Inconsistent intervals are made consistent: `max_expires >= min_expires`, and the default
    /// lies between them.
    pub fn new(mut config: RegistrarConfig) -> Registrar {
        config.max_expires = config.max_expires.max(config.min_expires).max(1);
        config.default_expires = config.default_expires.clamp(config.min_expires, config.max_expires);
        let tags = config.seed.derive("registrar to-tag", 0).build();
        Registrar { config, tags, stats: Arc::default(), edge_flows: Arc::default() }
    }

    pub fn config(&self) -> &RegistrarConfig {
        &self.config
    }

    /// The counters at this moment (shared by every clone of this registrar).
    pub fn stats(&self) -> RegistrarStatsSnapshot {
        self.stats.snapshot()
    }

    /// The live counters, for a metrics endpoint that reads them while the engines run
    /// (`herald_server::Stats::export_registrar`).
    pub fn shared_stats(&self) -> Arc<RegistrarStats> {
        self.stats.clone()
    }

    /// The flows of NATed phones registered through herald with other registrars (shared by
    /// every clone): the engines note them, the runtime's keep-alive loop keeps them open.
    pub fn edge_flows(&self) -> Arc<EdgeFlows> {
        self.edge_flows.clone()
    }

    /// A store that enforces this registrar's binding limit, its hash keyed from the seed.
    pub fn new_store(&self) -> Location {
        let keys = self.config.seed.derive("location store", 0).keys();
        LocationStore::with_hash_keys(self.config.store_config(), keys)
    }

    /// Answers one REGISTER (RFC 3261 §10.3) and returns the complete response. A request with
    /// another method gets 405; a response (not a request) gets nothing: the returned buffer is
    /// empty.
    pub fn handle_register(&self, now: Instant, req: &Message, from: Peer, store: &Location) -> BytesMut {
        self.handle_register_durable(now, req, from, store).0
    }

    /// [`Registrar::handle_register`], and when the change it made is durable: a write-through
    /// store's ticket that the response must wait for ([`Ticket::DURABLE`]: send at once).
    pub fn handle_register_durable(
        &self,
        now: Instant,
        req: &Message,
        from: Peer,
        store: &Location,
    ) -> (BytesMut, Ticket) {
        let mut ticket = Ticket::DURABLE;
        let response = self.answer_register(now, req, from, store, &mut ticket);
        (response, ticket)
    }

    fn answer_register(
        &self,
        now: Instant,
        req: &Message,
        from: Peer,
        store: &Location,
        ticket: &mut Ticket,
    ) -> BytesMut {
        if !req.is_request() {
            return BytesMut::new();
        }
        let reg = match Register::read(req, &self.config) {
            Ok(reg) => reg,
            Err(reject) => {
                self.stats.refused_request(reject.status);
                return self.reject(req, &reject);
            }
        };
        // What the AoR held before a change, for the info line that says what changed (a
        // refresh logs nothing at info).
        let before = match (&reg.action, tracing::enabled!(tracing::Level::INFO)) {
            (Action::Query, _) | (_, false) => None,
            _ => Some(store.lookup(&reg.aor, now)),
        };
        let contacts = match &reg.action {
            Action::Query => Ok(store.lookup(&reg.aor, now)),
            Action::RemoveAll => store.remove_all(&reg.aor, reg.call_id, reg.cseq, now).map(|removed| {
                *ticket = removed.ticket;
                Vec::new()
            }),
            Action::Update(contacts) => {
                let update =
                    Update { call_id: reg.call_id, cseq: reg.cseq, path: reg.path.as_deref(), source: from, contacts };
                store.apply(&reg.aor, now, &update).map(|applied| {
                    *ticket = applied.ticket;
                    applied.bindings
                })
            }
        };
        match contacts {
            Ok(bindings) => {
                if let Some(before) = before {
                    log_changes(&reg.aor, from, &before, &bindings);
                }
                self.stats.accepted();
                self.ok(req, &reg, &bindings, store, now)
            }
            Err(e) => {
                // `[registrar] max_bindings_per_aor` is enforced by the store; the refusal is
                // counted here, where the REGISTER is answered.
                self.stats.refused_update(&e);
                self.reject(req, &store_error(&e))
            }
        }
    }

    /// Step 8: 200 with one Contact header per current binding, `expires` set to the seconds
    /// it has left; Path echoed when the request had one and the UA supports path (RFC 3327
    /// §5.3).
    fn ok(
        &self,
        req: &Message,
        reg: &Register<'_>,
        bindings: &[Binding<Peer>],
        store: &Location,
        now: Instant,
    ) -> BytesMut {
        let mut headers: Vec<(&str, String)> =
            bindings.iter().map(|b| ("Contact", contact_value(b, store.expires_in(b, now)))).collect();
        if let (Some(path), true) = (&reg.path, reg.supports_path) {
            headers.push(("Path", path.clone()));
        }
        if reg.outbound {
            headers.push(("Require", "outbound".to_owned()));
        }
        self.respond(req, 200, "OK", &headers)
    }

    fn reject(&self, req: &Message, reject: &Reject) -> BytesMut {
        let headers: Vec<(&str, String)> = reject.headers.iter().map(|(n, v)| (*n, v.clone())).collect();
        self.respond(req, reject.status, reject.reason, &headers)
    }

    fn respond(&self, req: &Message, status: u16, reason: &str, headers: &[(&str, String)]) -> BytesMut {
        let tag = self.to_tag(req);
        let mut builder = ResponseBuilder::new(req, status, reason).to_tag(&tag);
        for (name, value) in headers {
            builder = builder.header(name, value.as_bytes());
        }
        builder.build()
    }

    /// The same request (a retransmission that reached us) gets the same tag.
    fn to_tag(&self, req: &Message) -> String {
        let parts = [HeaderName::CallId, HeaderName::From, HeaderName::CSeq, HeaderName::Via].map(|h| req.get(h));
        format!("{:016x}", self.tags.hash_one(parts))
    }
}

/// The response for a refused store update.
/// One info line per binding added or removed by a REGISTER (issue 15: an operator must see
/// registrations come and go without turning on debug).
fn log_changes(aor: &Aor, from: Peer, before: &[Binding<Peer>], after: &[Binding<Peer>]) {
    let has = |set: &[Binding<Peer>], c: &str| set.iter().any(|b| &*b.contact == c);
    for b in after.iter().filter(|b| !has(before, &b.contact)) {
        tracing::info!(target: "herald::registrar", %aor, contact = %b.contact, source = %from.addr, transport = %from.transport, "registration added");
    }
    for b in before.iter().filter(|b| !has(after, &b.contact)) {
        tracing::info!(target: "herald::registrar", %aor, contact = %b.contact, source = %from.addr, transport = %from.transport, "registration removed");
    }
}

fn store_error(e: &StoreError) -> Reject {
    match e {
        // §10.3 step 7 says only that "the update MUST be aborted and the request fails". 500
        // (the server could not carry out a well-formed request) rather than: 400, which claims
        // a syntax error the UA cannot find; 200 with the current bindings, which Kamailio sends for
        // out-of-order and replayed requests but which reports success for an update that was
        // not made. No Retry-After: a REGISTER that lost a race to a newer one of the same UA
        // must not be retried, or its stale contents would overwrite the newer state.
        StoreError::OutOfOrder { .. } => Reject::new(500, "Server Internal Error (CSeq not newer than binding's)"),
        // 503 + Retry-After, as Kamailio's registrar answers R_TOO_MANY, rather than 403: the
        // limit is usually hit by a UA whose old binding (from before a reboot or a NAT
        // rebinding) has not expired yet, and Retry-After names when the earliest binding
        // lapses, after which the same REGISTER succeeds; 403 says "SHOULD NOT be repeated"
        // (RFC 3261 §21.4.4) and would leave the user unreachable until someone intervenes.
        StoreError::TooManyBindings { retry_after, .. } => {
            Reject::new(503, "Service Unavailable (too many bindings)").header("Retry-After", retry_after.to_string())
        }
    }
}

/// `<uri>;expires=N[;q=0.x][;+sip.instance="..."][;reg-id=N]` (RFC 3261 §10.3 step 8, RFC 5626
/// §6 echoes instance and reg-id).
fn contact_value(b: &Binding<Peer>, expires: u32) -> String {
    let mut s = String::with_capacity(b.contact.len() + 48);
    let _ = write!(s, "<{}>;expires={expires}", b.contact);
    if let Some(q) = b.q {
        let _ = write!(s, ";q={}", format_q(q));
    }
    if let Some(instance) = &b.instance {
        let _ = write!(s, ";+sip.instance=\"{instance}\"");
    }
    if let Some(reg_id) = b.reg_id {
        let _ = write!(s, ";reg-id={reg_id}");
    }
    s
}

/// Thousandths as a qvalue: 1000 → "1", 500 → "0.5", 125 → "0.125", 0 → "0" (§25.1 qvalue).
fn format_q(q: u16) -> String {
    match q {
        1000.. => "1".into(),
        0 => "0".into(),
        _ => format!("0.{q:03}").trim_end_matches('0').to_string(),
    }
}
