//! What the admin API works on: the parts `herald serve` builds and hands over before serving
//! ([`AdminApi`]), and the runtime's own view ([`Live`]) that [`crate::Server::run`] adds.

use super::reload::Reloader;
use super::users::UsersFile;
use crate::protect::FloodGuard;
use crate::shards::Shards;
use crate::shared::Shared;
use crate::stats::Stats;
use herald_core::Location;
use std::sync::Arc;

/// The parts of a herald the admin API reads and changes. Every part is optional: a method
/// about a missing part answers that it is not available.
#[derive(Default)]
pub struct AdminApi {
    pub(crate) store: Option<Arc<Location>>,
    /// Whether AoR keys keep the domain (`Aor::of_served_user`), as the registrar makes them.
    pub(crate) use_domain: bool,
    pub(crate) users: Option<UsersFile>,
    pub(crate) reload: Option<Reloader>,
}

impl AdminApi {
    /// The location store the registrar fills: `registrations.*`. `use_domain` as the
    /// registrar's (an AoR typed by an operator is keyed as a REGISTER's To would be).
    pub fn new(store: Arc<Location>, use_domain: bool) -> AdminApi {
        AdminApi { store: Some(store), use_domain, ..AdminApi::default() }
    }

    /// The users file and the credentials table the authenticator reads: `users.*`.
    pub fn with_users(mut self, users: UsersFile) -> AdminApi {
        self.users = Some(users);
        self
    }

    /// What reloads the configuration: `config.reload` and SIGHUP.
    pub fn with_reload(mut self, reload: Reloader) -> AdminApi {
        self.reload = Some(reload);
        self
    }
}

/// The runtime's side: counters, the flood guard, and the engine shards' totals.
pub(crate) struct Live {
    pub stats: Stats,
    pub flood: Option<Arc<FloodGuard>>,
    /// Transactions held over all shards (cached per shard: no lock taken).
    pub transactions: Box<dyn Fn() -> usize + Send + Sync>,
    pub workers: usize,
    pub shards: usize,
    /// Whether the workers measure per-type counts (`[metrics] listen` is set).
    pub measured: bool,
}

impl Live {
    /// The view of a running server with engine shards `shards`.
    pub fn new<H: herald_core::SipHandler>(shared: &Shared, shards: Arc<Shards<H>>) -> Live {
        Live {
            stats: shared.stats.clone(),
            flood: shared.flood.clone(),
            workers: shared.workers,
            shards: shards.len(),
            measured: shared.config.metrics.listen.is_some(),
            transactions: Box::new(move || shards.transactions()),
        }
    }
}
