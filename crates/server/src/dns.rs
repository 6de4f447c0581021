//! Name resolution for `Output::Resolve`: the RFC 3263 decisions of [`crate::rfc3263`] driven
//! against hickory-resolver (which caches every answer for its TTL). Each worker owns one resolver
//! and runs every lookup in its own task, so a slow DNS server delays only the request waiting for
//! it, never the worker.

use crate::rfc3263::{self, Naptr, Next, Query, Records, Srv};
use herald_core::{ResolveRequest, Target, Transport};
use hickory_resolver::config::{LookupIpStrategy, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
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
    pub async fn resolve(&self, req: &ResolveRequest) -> Result<Vec<Target>, String> {
        let mut records = Records::default();
        let mut rng = Rng::new();
        let mut last_error: Option<String> = None;
        for _ in 0..MAX_QUERIES {
            let q = match rfc3263::next(req, &records, &self.supported, &mut |n| rng.upto(n)) {
                Next::Done(t) if t.is_empty() => {
                    return Err(match last_error {
                        Some(e) => format!("{}: no usable target ({e})", req.host),
                        None => format!("{}: no usable target", req.host),
                    })
                }
                Next::Done(t) => return Ok(t),
                Next::Query(q) => q,
            };
            if let Err(e) = self.answer(&q, &mut records).await {
                tracing::debug!(query = ?q, error = %e, "DNS lookup failed");
                last_error = Some(e);
                records.insert_empty(&q);
            }
        }
        Err(format!("{}: too many DNS lookups", req.host))
    }

    /// Performs one query and stores its answer (an empty answer on "no such records").
    async fn answer(&self, q: &Query, records: &mut Records) -> Result<(), String> {
        let fqdn = |n: &str| format!("{n}.");
        match q {
            Query::Naptr(name) => {
                let lookup = self.inner.lookup(fqdn(name), RecordType::NAPTR).await.map_err(|e| e.to_string())?;
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
                let lookup = self.inner.lookup(fqdn(name), RecordType::SRV).await.map_err(|e| e.to_string())?;
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
                let lookup = self.inner.lookup_ip(fqdn(name)).await.map_err(|e| e.to_string())?;
                records.addrs.insert(name.clone(), lookup.iter().collect());
            }
        }
        Ok(())
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
