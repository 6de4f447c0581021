//! `Output::Resolve`: RFC 3263 lookups as tasks of the main thread's runtime (hickory's
//! timeouts need tokio's time driver, which worker runtimes are built without).

use crate::dns;
use crate::runtime::Ctl;
use crate::shared::{Shared, WorkerCommon};
use herald_core::ResolveRequest;

/// Looks `request` up in a task of the main thread's runtime; the answer goes back to engine
/// shard `shard` through the worker's control queue. The worker's resolver (its cache) is made
/// there too, on first use.
pub(crate) fn spawn(shared: &Shared, common: &WorkerCommon, shard: usize, token: u64, request: ResolveRequest) {
    let supported = &shared.supported;
    let main = &shared.main_rt;
    let resolver = common
        .resolver
        .get_or_init(|| {
            let _main = main.enter();
            dns::Resolver::system(supported.clone())
        })
        .clone();
    let tx = common.ctl_tx.clone();
    let tls = shared.tls.clone();
    main.spawn(async move {
        // The engine is told the kind of failure; the resolver already logged its detail.
        let result = resolver.resolve(&request).await.map_err(|f| f.error);
        // RFC 5922 §7.1: a TLS next hop must prove the name it was looked up by.
        if let (Some(tls), Ok(targets)) = (&tls, &result) {
            tls.learn(&request.host, targets);
        }
        let _ = tx.send(Ctl::Resolved { shard, token, result });
    });
}
