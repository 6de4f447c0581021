//! Phones behind NAT (Kamailio's nathelper, sans-IO): telling that a message or a binding comes
//! from behind a NAT, and the Contact a NATed phone should have written.
//!
//! A phone behind NAT writes its private address in Contact and Via; the packets arrive from the
//! NAT's public address and port. RFC 3261 §18.2.1 and RFC 3581 already send responses to the
//! real source (Via `received`/`rport`); what is left is everything that targets the *Contact*:
//! requests to a registered binding (reached at the registration's source instead,
//! `engine::delivery`), and the far end's in-dialog requests, whose remote target is the
//! Contact of the dialog-creating request or response (§12.1.1, §12.1.2): herald rewrites that
//! Contact to the observed source (nathelper's `fix_nated_contact`), so they come back through
//! the NAT's pinhole. herald's Record-Route keeps it in the dialog's path anyway (§16.6 step 4);
//! the fixed Contact is the Request-URI those requests carry when they reach herald, and so where
//! herald sends them on.
//!
//! The tests are nathelper's `nat_uac_test` flags, typed:
//! * a private Contact (flag 1): RFC 1918, RFC 6598 (carrier-grade NAT), RFC 4193 (unique
//!   local IPv6) or link-local (RFC 3927, RFC 4291 §2.5.6) address that is not the source;
//! * the top Via's sent-by is an address other than the source (flag 2, "received" test);
//! * optionally ([`NatDetect::ContactDiffers`]) a Contact address or port other than the source
//!   (flags 32 and 64), for NATs in front of public-addressed phones. It also takes a
//!   third-party registration (another host registering the phone's contact) for NAT, which is
//!   why it is not the default.
//!
//! Only a message from the UA itself (herald its first hop: one Via) can be judged: behind a
//! proxy, the source is the proxy and the Contact is still the UA's.

mod edge;
mod private_text;
#[cfg(test)]
mod private_text_tests;

pub use edge::{requested_expires, EdgeFlows, MAX_EDGE_FLOWS};

use private_text::{may_name_private_address, may_name_private_address_anywhere};

use crate::peer::{Peer, Transport};
use herald_sip::headers::{ListValue, NameAddr};
use herald_sip::text::push_host_port;
use herald_sip::uri::{Host, Scheme, SipUri, Uri};
use herald_sip::{HeaderName, Message};
use std::cell::OnceCell;
use std::net::{IpAddr, SocketAddr};

/// Which differences between a contact and its source count as NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NatDetect {
    /// A private Contact address that is not the source, or (for messages) a top Via whose
    /// address is not the source.
    #[default]
    Private,
    /// As `Private`, and any Contact address or port that is not the source's.
    ContactDiffers,
}

/// When herald, forwarding a REGISTER to a registrar of another domain, adds a Path with its own
/// URI (RFC 3327 §4); for a UA behind NAT the URI carries the flow token of the REGISTER's
/// flow (RFC 5626 §5.1), so the registrar's requests leave over the NAT's mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EdgePath {
    /// Only for Outbound UAs and contacts only their flow reaches (RFC 5626 §5.1, RFC 7118 §5).
    Off,
    /// Also when the UA lists `path` in Supported (RFC 3327 §5.1: a proxy adds Path when the
    /// UA supports it).
    #[default]
    Supported,
    /// For every REGISTER; when the UA did not list `path`, herald adds `Require: path`, so a
    /// registrar that cannot honour the Path refuses with 420 instead of ignoring it (§5.1).
    Always,
}

/// What the engine does for phones behind NAT (`[nat]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatConfig {
    /// What counts as NAT.
    pub detect: NatDetect,
    /// Rewrite the Contact of requests and responses from NATed phones that herald forwards to
    /// the observed source (nathelper `fix_nated_contact`).
    pub fix_contact: bool,
    /// When a REGISTER for another domain gets herald's Path.
    pub edge_path: EdgePath,
}

impl Default for NatConfig {
    fn default() -> Self {
        NatConfig { detect: NatDetect::Private, fix_contact: true, edge_path: EdgePath::Supported }
    }
}

/// A private or link-local address: RFC 1918, RFC 6598 shared address space (100.64.0.0/10,
/// carrier-grade NAT), RFC 3927 169.254.0.0/16; RFC 4193 unique local (fc00::/7) and
/// link-local (fe80::/10) IPv6.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || v4.is_link_local() || (o[0] == 100 && (64..128).contains(&o[1]))
        }
        IpAddr::V6(v6) => {
            let s0 = v6.segments()[0];
            (s0 & 0xfe00) == 0xfc00 || (s0 & 0xffc0) == 0xfe80
        }
    }
}

/// The address a host names, when it is an IP literal.
fn host_ip(host: &Host<'_>) -> Option<IpAddr> {
    match host {
        Host::Ipv4(ip) => Some(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => Some(IpAddr::V6(*ip)),
        Host::Name(_) => None,
    }
}

/// Whether a contact URI registered from `source` is behind NAT, by `detect`: the flag of a
/// binding, derived from what the store keeps (contact and source) wherever it is needed
/// (delivery, keep-alives). Only connectionless sources: a binding registered over a stream
/// is reached over its connection anyway (`engine::delivery`).
pub fn binding_behind_nat(contact: &str, source: Peer, detect: NatDetect) -> bool {
    Uri::parse(contact.as_bytes()).is_ok_and(|u| parsed_binding_behind_nat(&u, source, detect))
}

/// [`binding_behind_nat`] of a contact URI already parsed.
pub fn parsed_binding_behind_nat(contact: &Uri<'_>, source: Peer, detect: NatDetect) -> bool {
    match contact {
        Uri::Sip(u) if source.transport == Transport::Udp => contact_behind_nat(u, source.addr, detect),
        _ => false,
    }
}

/// The Contact tests (flags 1, 32, 64) for one contact URI from `source`.
fn contact_behind_nat(uri: &SipUri<'_>, source: SocketAddr, detect: NatDetect) -> bool {
    let Some(ip) = host_ip(&uri.host) else { return false };
    address_behind_nat(ip, uri.port.unwrap_or_else(|| uri.scheme.default_port()), source, detect)
}

/// The Contact tests of [`contact_behind_nat`] on a contact's IP host and port (the scheme's
/// default when it has none), for a contact whose URI was read before (the engine keeps them
/// for registered contacts).
pub fn address_behind_nat(ip: IpAddr, port: u16, source: SocketAddr, detect: NatDetect) -> bool {
    if is_private(ip) && ip != source.ip() {
        return true;
    }
    detect == NatDetect::ContactDiffers && (ip != source.ip() || port != source.port())
}

/// Whether a request or response that `source` sent herald directly comes from behind NAT: its
/// first Contact fails the Contact tests, or (a request: its top Via is the sender's own) its
/// top Via's address is not the source (flag 2).
pub fn message_behind_nat(msg: &Message, source: SocketAddr, detect: NatDetect) -> bool {
    if msg.is_request() && via_not_source(msg, source) {
        return true;
    }
    match first_contact(msg) {
        Some((_, addr)) => addr.uri.as_sip().is_some_and(|u| contact_behind_nat(u, source, detect)),
        None => false,
    }
}

/// Flag 2: the top Via's sent-by is an address other than the source (a host name proves
/// nothing).
fn via_not_source(msg: &Message, source: SocketAddr) -> bool {
    // The sent-by from the receipt check's memo, not the whole Via made again.
    msg.top_via_sent_by().and_then(|(host, _)| host_ip(&host)).is_some_and(|ip| ip != source.ip())
}

/// The first Contact value and its name-addr (`None` for `*` or a malformed one). One parse of
/// that value alone: `Message::contacts` would read expires/q parameters this never needs
/// (half the cost of the check on a forwarded request).
fn first_contact(msg: &Message) -> Option<(ListValue<'_>, NameAddr<'_>)> {
    let value = msg.first_list_value(HeaderName::Contact)?.ok()?;
    let addr = NameAddr::parse(value.bytes).ok()?;
    Some((value, addr))
}

/// What a request says about the UA that sent it, read at most once for all the edits of one
/// forwarded copy: whether herald is its first hop (the Via count of the receipt check's memo)
/// and its first Contact (looked up once, parsed once). The NAT fix-up and the flow tokens of
/// Record-Route and Path (`engine::flows`) all ask; each used to count the Vias and parse the
/// Contact again (about 5,000 instructions per forwarded INVITE), and the text filters that
/// spare the parse each looked the value up again (a walk of the Contact line per look).
pub struct RequestSender<'m> {
    msg: &'m Message,
    raw_contact: OnceCell<Option<ListValue<'m>>>,
    contact: OnceCell<Option<(ListValue<'m>, NameAddr<'m>)>>,
}

impl<'m> RequestSender<'m> {
    pub fn new(msg: &'m Message) -> Self {
        RequestSender { msg, raw_contact: OnceCell::new(), contact: OnceCell::new() }
    }

    /// The first Contact value, not parsed (`None`: no Contact, or a line that does not split),
    /// for the text filters that decide whether [`RequestSender::contact`] is needed at all.
    pub fn raw_contact(&self) -> Option<ListValue<'m>> {
        *self.raw_contact.get_or_init(|| self.msg.first_list_value(HeaderName::Contact)?.ok())
    }

    pub fn message(&self) -> &'m Message {
        self.msg
    }

    /// herald is the first hop: the request carries one Via value, the UA's own.
    pub fn first_hop(&self) -> bool {
        self.msg.via_count() == 1
    }

    /// The first Contact value and its name-addr, as [`first_contact`], from the value
    /// [`RequestSender::raw_contact`] found.
    pub fn contact(&self) -> Option<&(ListValue<'m>, NameAddr<'m>)> {
        self.contact
            .get_or_init(|| {
                let value = self.raw_contact()?;
                Some((value, NameAddr::parse(value.bytes).ok()?))
            })
            .as_ref()
    }
}

/// The Contact header field line of `msg` rewritten to `source` (nathelper
/// `fix_nated_contact`): `(index of the header line, its new value)`, or `None` when there is
/// nothing to fix (no Contact, not a sip/sips URI, `*`), or when the first Contact shares its
/// line with others (a REGISTER's list: never a dialog's remote target, left alone). The user
/// part, URI parameters (`transport`, `ob`, ...) and header parameters are kept; host and port
/// change, and a `sip:` URI of a TCP or TLS source without `transport` gets the source's.
pub fn fixed_contact(msg: &Message, source: Peer) -> Option<(usize, String)> {
    let (value, addr) = first_contact(msg)?;
    fixed_contact_of(msg, value, addr.uri.as_sip()?, source)
}

/// [`fixed_contact`] of a Contact value already read.
fn fixed_contact_of(msg: &Message, value: ListValue<'_>, uri: &SipUri<'_>, source: Peer) -> Option<(usize, String)> {
    if msg.list_values(HeaderName::Contact).filter_map(Result::ok).filter(|v| v.field == value.field).count() != 1 {
        return None;
    }
    let line = std::str::from_utf8(msg.value_of(msg.headers().get(value.field)?)).ok()?;
    // The URI is a slice of that line: find it by address, and check it is there, as it was
    // written (never slice the line anywhere else).
    let old = uri.as_str();
    let at = (old.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    let before = line.get(..at)?;
    let after = line.get(at..)?.strip_prefix(old)?;
    let mut fixed = String::with_capacity(line.len() + 16);
    fixed.push_str(before);
    fixed.push_str(uri.scheme.as_str());
    fixed.push(':');
    if let Some(user) = uri.user {
        fixed.push_str(user);
        if let Some(password) = uri.password {
            fixed.push(':');
            fixed.push_str(password);
        }
        fixed.push('@');
    }
    push_host_port(&mut fixed, source.addr);
    fixed.push_str(uri.params_raw());
    // A phone behind NAT over TCP or TLS is reachable only over its connection, which herald
    // finds by address and transport: a Contact without `transport` would send the far end's
    // requests to that address over UDP (RFC 3263 §4.1 default), which the NAT drops.
    if matches!(source.transport, Transport::Tcp | Transport::Tls)
        && uri.transport().is_none()
        && uri.scheme == Scheme::Sip
    {
        fixed.push_str(";transport=");
        fixed.push_str(source.transport.as_param());
    }
    if !uri.headers_raw().is_empty() {
        fixed.push('?');
        fixed.push_str(uri.headers_raw());
    }
    fixed.push_str(after);
    Some((value.field, fixed))
}

/// The Contact fix a request herald forwards gets (`None`: none): when fixing is on, herald is
/// the sender's first hop (one Via), the sender is not a WebSocket client (its flow tokens do
/// that job, `engine::flows`) and the request is not a REGISTER (a registrar, herald itself or
/// another behind its Path, keeps the binding's source itself), and the request comes from
/// behind NAT.
pub fn request_contact_fix(msg: &Message, from: Peer, cfg: &NatConfig) -> Option<(usize, String)> {
    sender_contact_fix(&RequestSender::new(msg), from, cfg)
}

/// [`request_contact_fix`] with what is read of the sender shared with the other edits.
pub fn sender_contact_fix(sender: &RequestSender<'_>, from: Peer, cfg: &NatConfig) -> Option<(usize, String)> {
    let msg = sender.message();
    if !cfg.fix_contact
        || matches!(from.transport, Transport::Ws | Transport::Wss)
        || msg.method() == Some(herald_sip::Method::Register)
    {
        return None;
    }
    // The Contact before the Vias: many in-dialog requests have none, and then nothing else is
    // read. The checks of `message_behind_nat`, parsing that Contact at most once.
    let line = msg.get(HeaderName::Contact)?;
    if !sender.first_hop() {
        return None;
    }
    let via_natted = via_not_source(msg, from.addr);
    // A Contact whose text cannot hold a private address cannot fail the Contact test of the
    // default detection: it is not parsed (~800 instructions for each ACK and BYE of a call).
    // The first Contact line's whole text is asked first, and the value split out of it only
    // when the line may name one (see [`may_name_private_address`]; ~260 instructions a request).
    let text_settles = |text: &[u8]| !via_natted && cfg.detect == NatDetect::Private && !may_name_private_address(text);
    if text_settles(line) {
        return None;
    }
    let raw = sender.raw_contact()?;
    if text_settles(raw.bytes) {
        return None;
    }
    let (value, addr) = sender.contact()?;
    let uri = addr.uri.as_sip()?;
    if !(via_natted || contact_behind_nat(uri, from.addr, cfg.detect)) {
        return None;
    }
    fixed_contact_of(msg, *value, uri, from)
}

/// The Contact fix of a 1xx/2xx response from a callee behind NAT (`None`: none). `target` is
/// the Request-URI the branch's request carried and `to` where it was sent. The responder is the
/// UA itself, not a proxy in front of one, when `target` is a binding behind NAT reached at the
/// source of its registration (a dialog-creating request), or when the request is in a dialog
/// (`in_dialog`: its To has a tag) and went straight to the address its Request-URI names, the
/// dialog's remote target (RFC 3261 §12.2.1.1: a proxy on the way would have record-routed and
/// the request would follow a Route). A 2xx to a re-INVITE refreshes the remote target
/// (§12.2.1.2), so it needs the fix as much as the first one.
pub fn response_contact_fix(
    resp: &Message,
    target: &str,
    to: Peer,
    in_dialog: bool,
    cfg: &NatConfig,
) -> Option<(usize, String)> {
    if !responder_may_be_natted(target, to, in_dialog, cfg) {
        return None;
    }
    responder_contact_fix(resp, to, cfg)
}

/// The first half of [`response_contact_fix`], which depends only on where the request went:
/// whether the responses to a request for `target` sent to `to` come from the UA itself,
/// behind NAT or in a dialog, so that their Contact may need the fix. Decided once when a branch
/// is sent (the engine keeps the answer), not for every response.
pub fn responder_may_be_natted(target: &str, to: Peer, in_dialog: bool, cfg: &NatConfig) -> bool {
    // WebSocket phones are reached over their flows (flow tokens, `engine::flows`).
    if !cfg.fix_contact || matches!(to.transport, Transport::Ws | Transport::Wss) {
        return false;
    }
    // Outside a dialog only the Contact test counts, and with the default detection a target
    // whose text cannot name a private address cannot fail it: not parsed (a registered
    // contact, ~570 instructions for each INVITE branch to one).
    // A bare URI, not a Contact value: read by the rule for any text.
    if !in_dialog && cfg.detect == NatDetect::Private && !may_name_private_address_anywhere(target.as_bytes()) {
        return false;
    }
    Uri::parse(target.as_bytes()).is_ok_and(|u| parsed_responder_may_be_natted(&u, to, in_dialog, cfg))
}

/// What the Contact tests read of a URI ([`address_behind_nat`]): a sip/sips URI's IP host and
/// its port, the scheme's default when it has none; `None` for any other URI.
pub fn contact_address(uri: &Uri<'_>) -> Option<(IpAddr, u16)> {
    let u = uri.as_sip()?;
    Some((host_ip(&u.host)?, u.port.unwrap_or_else(|| u.scheme.default_port())))
}

/// [`responder_may_be_natted`] outside a dialog of a target whose URI was read before: its IP
/// host and port ([`contact_address`]; the engine keeps them for registered contacts: no text
/// filter or parse per branch, ~250 instructions per INVITE to one).
pub fn address_responder_may_be_natted(address: Option<(IpAddr, u16)>, to: Peer, cfg: &NatConfig) -> bool {
    cfg.fix_contact
        && !matches!(to.transport, Transport::Ws | Transport::Wss)
        && address.is_some_and(|(ip, port)| address_behind_nat(ip, port, to.addr, cfg.detect))
}

/// [`responder_may_be_natted`] of a target already parsed (a request's own Request-URI, read
/// from the receipt check's memo).
pub fn parsed_responder_may_be_natted(target: &Uri<'_>, to: Peer, in_dialog: bool, cfg: &NatConfig) -> bool {
    // WebSocket phones are reached over their flows (flow tokens, `engine::flows`).
    if !cfg.fix_contact || matches!(to.transport, Transport::Ws | Transport::Wss) {
        return false;
    }
    let Uri::Sip(u) = target else { return false };
    contact_behind_nat(u, to.addr, cfg.detect) || (in_dialog && names_peer(u, to.addr))
}

/// The second half of [`response_contact_fix`], for a response from a responder that
/// [`responder_may_be_natted`] found may be: the fix when its Contact is behind NAT.
pub fn responder_contact_fix(resp: &Message, to: Peer, cfg: &NatConfig) -> Option<(usize, String)> {
    // As a request's (`sender_contact_fix`): with the default detection, a Contact whose text
    // cannot name a private address is not behind NAT, and is not parsed (~1,100 instructions
    // for the 2xx of each in-dialog request sent straight to a phone).
    // The first Contact line's text before the value split out of it (see
    // [`may_name_private_address`]).
    if cfg.detect == NatDetect::Private && !may_name_private_address(resp.get(HeaderName::Contact)?) {
        return None;
    }
    let value = resp.first_list_value(HeaderName::Contact)?.ok()?;
    if cfg.detect == NatDetect::Private && !may_name_private_address(value.bytes) {
        return None;
    }
    let addr = NameAddr::parse(value.bytes).ok()?;
    let uri = addr.uri.as_sip()?;
    if !contact_behind_nat(uri, to.addr, cfg.detect) {
        return None;
    }
    fixed_contact_of(resp, value, uri, to)
}

/// Whether a sip/sips URI names exactly this address: an IP literal host and its port (the
/// scheme's default when absent).
fn names_peer(u: &SipUri<'_>, addr: SocketAddr) -> bool {
    host_ip(&u.host) == Some(addr.ip()) && u.port.unwrap_or_else(|| u.scheme.default_port()) == addr.port()
}

#[cfg(test)]
mod tests;
