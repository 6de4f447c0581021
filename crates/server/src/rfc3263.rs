//! RFC 3263 "Locating SIP Servers": which DNS records to ask for and how to turn the answers into
//! an ordered list of (transport, address, port) targets - without doing any I/O.
//!
//! The resolver ([`crate::dns`]) calls [`next`] repeatedly: it either names the next query whose
//! answer it needs ([`Next::Query`]), or, once every needed answer is in [`Records`], returns the
//! targets ([`Next::Done`]). The decision logic is therefore testable with hand-written records.

use herald_core::{ResolveRequest, Target, Transport};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// A NAPTR record (RFC 3403) as RFC 3263 §4.1 uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naptr {
    pub order: u16,
    pub preference: u16,
    /// Only "s" (the replacement names an SRV record) is used by SIP.
    pub flags: String,
    /// `SIP+D2U`, `SIP+D2T`, `SIPS+D2T`, `SIP+D2W`, `SIPS+D2W`.
    pub services: String,
    /// The SRV name to look up.
    pub replacement: String,
}

/// An SRV record (RFC 2782).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    pub target: String,
}

/// A lookup the decision needs next. Names are lower case without the trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Query {
    Naptr(String),
    Srv(String),
    /// A and AAAA.
    Addr(String),
}

/// Answers gathered so far; a name present with an empty list means "asked, nothing there"
/// (NXDOMAIN, no records, or the lookup failed).
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub naptr: HashMap<String, Vec<Naptr>>,
    pub srv: HashMap<String, Vec<Srv>>,
    pub addrs: HashMap<String, Vec<IpAddr>>,
}

impl Records {
    /// Records that `q` was asked and had no answer.
    pub fn insert_empty(&mut self, q: &Query) {
        match q {
            Query::Naptr(n) => {
                self.naptr.entry(n.clone()).or_default();
            }
            Query::Srv(n) => {
                self.srv.entry(n.clone()).or_default();
            }
            Query::Addr(n) => {
                self.addrs.entry(n.clone()).or_default();
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Query(Query),
    /// Targets in the order to try them; empty when nothing usable was found.
    Done(Vec<Target>),
}

/// The default port of a transport (RFC 3261 §19.1.2: 5060, 5061 for TLS).
pub fn default_port(t: Transport) -> u16 {
    match t {
        Transport::Tls | Transport::Wss => 5061,
        Transport::Udp | Transport::Tcp | Transport::Ws => 5060,
    }
}

/// The SRV owner name for a transport (RFC 3263 §4.1: `_sips._tcp` for TLS, RFC 7118 §7 for WS).
pub fn srv_name(t: Transport, host: &str) -> String {
    let prefix = match t {
        Transport::Udp => "_sip._udp",
        Transport::Tcp => "_sip._tcp",
        Transport::Tls => "_sips._tcp",
        Transport::Ws => "_sip._ws",
        Transport::Wss => "_sips._ws",
    };
    format!("{prefix}.{host}")
}

/// The transport a NAPTR service field stands for (RFC 3263 §4.1, RFC 7118 §7).
pub fn naptr_transport(services: &str) -> Option<Transport> {
    const MAP: [(&str, Transport); 5] = [
        ("SIP+D2U", Transport::Udp),
        ("SIP+D2T", Transport::Tcp),
        ("SIPS+D2T", Transport::Tls),
        ("SIP+D2W", Transport::Ws),
        ("SIPS+D2W", Transport::Wss),
    ];
    MAP.iter().find(|(s, _)| s.eq_ignore_ascii_case(services)).map(|(_, t)| *t)
}

/// Lower case, no trailing dot: the form used as [`Records`] keys.
pub fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The next step of resolving `req`. `supported`: transports this element can send on, in order
/// of preference (used where RFC 3263 lets the client choose). `random(n)` returns a value in
/// `0..=n` for the weighted SRV selection of RFC 2782.
pub fn next(req: &ResolveRequest, rec: &Records, supported: &[Transport], random: &mut dyn FnMut(u32) -> u32) -> Next {
    let host = normalize(req.host.trim_start_matches('[').trim_end_matches(']'));
    // A sips URI's transport=tcp means TLS over TCP (RFC 3261 §26.2.2).
    let explicit = req.transport.map(|t| match (req.secure, t) {
        (true, Transport::Tcp) => Transport::Tls,
        (true, Transport::Ws) => Transport::Wss,
        (_, t) => t,
    });
    // §4.1: without a transport, a numeric host or an explicit port means UDP (TLS for sips).
    let fallback = if req.secure { Transport::Tls } else { Transport::Udp };
    let usable = |t: Transport| supported.contains(&t) && (!req.secure || t.is_secure());

    if let Ok(ip) = host.parse::<IpAddr>() {
        let t = explicit.unwrap_or(fallback);
        let port = req.port.unwrap_or(default_port(t));
        return Next::Done(if usable(t) {
            vec![Target { transport: t, addr: SocketAddr::new(ip, port) }]
        } else {
            vec![]
        });
    }
    if let Some(port) = req.port {
        // §4.2: an explicit port means A/AAAA only, no SRV.
        let t = explicit.unwrap_or(fallback);
        if !usable(t) {
            return Next::Done(vec![]);
        }
        return match rec.addrs.get(&host) {
            None => Next::Query(Query::Addr(host)),
            Some(ips) => {
                Next::Done(ips.iter().map(|ip| Target { transport: t, addr: SocketAddr::new(*ip, port) }).collect())
            }
        };
    }

    // Which SRV record sets to use, in order.
    let srv_sets: Vec<(Transport, String)> = match explicit {
        // §4.1: an explicit transport skips NAPTR; §4.2: SRV for that transport.
        Some(t) => {
            if !usable(t) {
                return Next::Done(vec![]);
            }
            vec![(t, srv_name(t, &host))]
        }
        None => {
            let Some(naptrs) = rec.naptr.get(&host) else { return Next::Query(Query::Naptr(host)) };
            let mut chosen: Vec<(&Naptr, Transport)> = naptrs
                .iter()
                .filter(|n| n.flags.eq_ignore_ascii_case("s"))
                .filter_map(|n| naptr_transport(&n.services).map(|t| (n, t)))
                .filter(|(_, t)| usable(*t))
                .collect();
            chosen.sort_by_key(|(n, _)| (n.order, n.preference));
            if chosen.is_empty() {
                // No (usable) NAPTR: §4.1 - SRV for each supported transport.
                supported.iter().filter(|t| usable(**t)).map(|t| (*t, srv_name(*t, &host))).collect()
            } else {
                chosen.into_iter().map(|(n, t)| (t, normalize(&n.replacement))).collect()
            }
        }
    };
    for (_, name) in &srv_sets {
        if !rec.srv.contains_key(name) {
            return Next::Query(Query::Srv(name.clone()));
        }
    }
    let mut hosts: Vec<(Transport, String, u16)> = Vec::new();
    for (t, name) in &srv_sets {
        for s in order_srv(&rec.srv[name], random) {
            // RFC 2782: a target of "." means the service is decidedly not available.
            let target = normalize(&s.target);
            if !target.is_empty() {
                hosts.push((*t, target, s.port));
            }
        }
    }
    if hosts.is_empty() {
        // §4.2: no SRV records - A/AAAA of the host at the default port of the transport.
        let t = explicit.unwrap_or(fallback);
        if !usable(t) {
            return Next::Done(vec![]);
        }
        hosts.push((t, host, default_port(t)));
    }
    for (_, h, _) in &hosts {
        if h.parse::<IpAddr>().is_err() && !rec.addrs.contains_key(h) {
            return Next::Query(Query::Addr(h.clone()));
        }
    }
    let mut out: Vec<Target> = Vec::new();
    for (t, h, port) in hosts {
        let ips = match h.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => rec.addrs[&h].clone(),
        };
        for ip in ips {
            let target = Target { transport: t, addr: SocketAddr::new(ip, port) };
            if !out.contains(&target) {
                out.push(target);
            }
        }
    }
    Next::Done(out)
}

/// RFC 2782 ordering: ascending priority; within one priority, repeatedly pick a record with
/// probability proportional to its weight (zero-weight records get a small chance, placed first
/// in the running sum as the RFC describes).
pub fn order_srv(records: &[Srv], random: &mut dyn FnMut(u32) -> u32) -> Vec<Srv> {
    let mut sorted: Vec<Srv> = records.to_vec();
    sorted.sort_by_key(|s| s.priority);
    let mut out = Vec::with_capacity(sorted.len());
    let mut i = 0;
    while i < sorted.len() {
        let p = sorted[i].priority;
        let mut group: Vec<Srv> = sorted[i..].iter().take_while(|s| s.priority == p).cloned().collect();
        i += group.len();
        // Zero-weight entries first, as RFC 2782 asks.
        group.sort_by_key(|s| s.weight != 0);
        while !group.is_empty() {
            let total: u32 = group.iter().map(|s| u32::from(s.weight)).sum();
            let pick = random(total);
            let mut running = 0u32;
            let idx = group
                .iter()
                .position(|s| {
                    running += u32::from(s.weight);
                    running >= pick
                })
                .unwrap_or(0);
            out.push(group.remove(idx));
        }
    }
    out
}

#[cfg(test)]
mod tests;
