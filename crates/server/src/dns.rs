//! Name resolution for `Output::Resolve`: the RFC 3263 decisions of [`crate::rfc3263`] driven
//! against hickory-resolver (which caches every answer for its TTL). Each worker owns one resolver
//! and runs every lookup in its own task, so a slow DNS server delays only the request waiting for
//! it, never the worker.

use crate::rfc3263::{self, Naptr, Next, Query, Records, Srv};
use herald_core::{ResolveError, ResolveRequest, Target, Transport};
use hickory_resolver::config::{LookupIpStrategy, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::TokioResolver;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Lookups one resolution may make (NAPTR, a few SRV sets, their hosts).
const MAX_QUERIES: usize = 24;

/// A caching RFC 3263 resolver. Cheap to clone (clones share the cache).
#[derive(Clone)]
pub struct Resolver {
    inner: TokioResolver,
    supported: Vec<Transport>,
}

impl Resolver {
    /// Name servers from /etc/resolv.conf; with none usable, only the hosts file and `localhost`.
    /// `supported`: transports herald can send on, in preference order.
    pub fn system(supported: Vec<Transport>) -> Resolver {
        match TokioResolver::builder_tokio() {
            Ok(mut b) => {
                tune(b.options_mut());
                match b.build() {
                    Ok(inner) => return Resolver { inner, supported },
                    Err(e) => tracing::warn!(error = %e, "DNS resolver from system config failed"),
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the system DNS configuration"),
        }
        Resolver::hosts_only(supported)
    }

    /// No name servers: answers come from the hosts file and the `localhost` rules of RFC 6761
    /// only (for machines without DNS, and for tests that must not send queries anywhere).
    pub fn hosts_only(supported: Vec<Transport>) -> Resolver {
        let mut b = TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, vec![], vec![]),
            TokioRuntimeProvider::default(),
        );
        tune(b.options_mut());
        let inner = b.build().expect("a resolver without name servers always builds");
        Resolver { inner, supported }
    }

    /// Resolves a SIP URI's host to targets in the order to try them (RFC 3263 §4).
    pub async fn resolve(&self, req: &ResolveRequest) -> Result<Vec<Target>, ResolveFailure> {
        let mut records = Records::default();
        let mut rng = Rng::new();
        // The failure of the last lookup: with no address found, it says why (an address
        // lookup ends every chain of RFC 3263 §4).
        let mut last_error: Option<(ResolveError, String)> = None;
        let fail = |error, detail| Err(ResolveFailure { host: req.host.clone(), error, detail });
        for _ in 0..MAX_QUERIES {
            let q = match rfc3263::next(req, &records, &self.supported, &mut |n| rng.upto(n)) {
                Next::Done(t) if t.is_empty() => {
                    // Addresses were found but none is usable (a transport herald does not send
                    // on): the name is fine. Otherwise the last failure says why.
                    let found = records.addrs.values().any(|a| !a.is_empty());
                    return match last_error {
                        Some((error, detail)) if !found => fail(error, Some(detail)),
                        _ => fail(ResolveError::NoUsableTarget, None),
                    };
                }
                Next::Done(t) => return Ok(t),
                Next::Query(q) => q,
            };
            if let Err(e) = self.answer(&q, &mut records).await {
                tracing::debug!(query = ?q, error = %e, "DNS lookup failed");
                last_error = Some((error_kind(&e), e.to_string()));
                records.insert_empty(&q);
            }
        }
        fail(ResolveError::TooManyLookups, None)
    }

    /// Performs one query and stores its answer (an empty answer on "no such records").
    async fn answer(&self, q: &Query, records: &mut Records) -> Result<(), NetError> {
        let fqdn = |n: &str| format!("{n}.");
        match q {
            Query::Naptr(name) => {
                let lookup = self.inner.lookup(fqdn(name), RecordType::NAPTR).await?;
                let list = lookup
                    .answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::NAPTR(n) => Some(Naptr {
                            order: n.order,
                            preference: n.preference,
                            flags: String::from_utf8_lossy(&n.flags).into_owned(),
                            services: String::from_utf8_lossy(&n.services).into_owned(),
                            replacement: rfc3263::normalize(&n.replacement.to_ascii()),
                        }),
                        _ => None,
                    })
                    .collect();
                records.naptr.insert(name.clone(), list);
            }
            Query::Srv(name) => {
                let lookup = self.inner.lookup(fqdn(name), RecordType::SRV).await?;
                let list = lookup
                    .answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::SRV(s) => Some(Srv {
                            priority: s.priority,
                            weight: s.weight,
                            port: s.port,
                            target: rfc3263::normalize(&s.target.to_ascii()),
                        }),
                        _ => None,
                    })
                    .collect();
                records.srv.insert(name.clone(), list);
            }
            Query::Addr(name) => {
                let lookup = self.inner.lookup_ip(fqdn(name)).await?;
                records.addrs.insert(name.clone(), lookup.iter().collect());
            }
        }
        Ok(())
    }
}

/// A resolution that found nothing to send to: the name, the kind of failure the engine is told
/// ([`herald_core::Input::Resolved`]) and, for logs, the resolver's own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveFailure {
    pub host: String,
    pub error: ResolveError,
    pub detail: Option<String>,
}

impl std::fmt::Display for ResolveFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.host, self.error)?;
        match &self.detail {
            Some(d) => write!(f, " ({d})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ResolveFailure {}

/// What a failed hickory lookup means for SIP: NXDOMAIN (the name does not exist), NODATA (it
/// exists without such records), no answer in time, or a name server that failed or refused.
fn error_kind(e: &NetError) -> ResolveError {
    match e {
        _ if e.is_nx_domain() => ResolveError::NoSuchName,
        _ if e.is_no_records_found() => ResolveError::NoUsableTarget,
        NetError::Timeout => ResolveError::Timeout,
        NetError::Dns(DnsError::ResponseCode(_)) => ResolveError::ServerFailure,
        _ => ResolveError::ServerFailure,
    }
}

fn tune(o: &mut hickory_resolver::config::ResolverOpts) {
    // Both families, IPv4 first: every address is a failover target (RFC 3263 §4.3).
    o.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    o.cache_size = 4096;
    o.timeout = Duration::from_secs(2);
    o.attempts = 2;
}

/// xorshift64*, seeded per resolution: enough for RFC 2782's weighted choice.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        Rng(h.finish() | 1)
    }

    /// Uniform-ish in `0..=n`.
    fn upto(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((r >> 32) % (u64::from(n) + 1)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::net::NoRecords;
    use hickory_resolver::proto::op::{Query as DnsQuery, ResponseCode};

    fn no_records(code: ResponseCode) -> NetError {
        NetError::Dns(DnsError::NoRecordsFound(NoRecords::new(DnsQuery::default(), code)))
    }

    #[test]
    fn hickory_errors_map_to_the_kinds_the_engine_is_told() {
        assert_eq!(error_kind(&no_records(ResponseCode::NXDomain)), ResolveError::NoSuchName);
        assert_eq!(error_kind(&no_records(ResponseCode::NoError)), ResolveError::NoUsableTarget);
        assert_eq!(error_kind(&NetError::Timeout), ResolveError::Timeout);
        assert_eq!(
            error_kind(&NetError::Dns(DnsError::ResponseCode(ResponseCode::ServFail))),
            ResolveError::ServerFailure
        );
        assert_eq!(
            error_kind(&NetError::Dns(DnsError::ResponseCode(ResponseCode::Refused))),
            ResolveError::ServerFailure
        );
        assert_eq!(error_kind(&NetError::NoConnections), ResolveError::ServerFailure);
    }

    #[test]
    fn a_failure_names_the_host_and_the_kind() {
        let f = ResolveFailure { host: "sip.example.com".into(), error: ResolveError::Timeout, detail: None };
        assert_eq!(f.to_string(), "sip.example.com: timed out");
    }
}
