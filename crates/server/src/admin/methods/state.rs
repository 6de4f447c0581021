//! What every method works on ([`Methods`]), and the parameter checks they share.

use super::counters::AdminCounters;
use super::listings::Listings;
use crate::admin::context::{AdminApi, Live};
use crate::admin::rpc::RpcError;

/// The methods with what they work on.
pub(crate) struct Methods {
    pub api: AdminApi,
    pub live: Live,
    pub counters: std::sync::Arc<AdminCounters>,
    pub(super) listings: Listings,
}

impl Methods {
    pub fn new(api: AdminApi, live: Live, counters: std::sync::Arc<AdminCounters>) -> Methods {
        Methods { api, live, counters, listings: Listings::default() }
    }
}

/// `limit` within `1..=max`, `default` when absent.
pub(super) fn limit(given: Option<usize>, default: usize, max: usize) -> Result<usize, RpcError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(RpcError::params(format!("limit {n} is outside 1..={max}"))),
    }
}
