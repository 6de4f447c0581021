//! The proxy core (RFC 3261 §16): validation, route preprocessing, target determination,
//! forwarding, response processing, CANCEL.

pub mod flow_token;
pub mod forward;
pub mod identity;
pub mod own_values;
pub mod respond;
pub mod route;
pub mod select;
pub mod validate;

pub use identity::Identity;
