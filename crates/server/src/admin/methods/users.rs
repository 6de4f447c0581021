//! `users.list`, `users.add`, `users.remove`: the users file of digest authentication
//! (`admin::users` does the file; this maps its outcomes to JSON-RPC).

use super::state::Methods;
use crate::admin::caller::Caller;
use crate::admin::rpc::{params, Call, RpcError, FAILED, UNAVAILABLE};
use crate::admin::users::{UsersError, UsersFile};
use serde::Deserialize;
use serde_json::{json, Value};

fn file(m: &Methods) -> Result<&UsersFile, RpcError> {
    m.api.users.as_ref().ok_or_else(|| RpcError::new(UNAVAILABLE, "authentication is off ([auth] enabled = false)"))
}

fn error(e: UsersError) -> RpcError {
    match e {
        UsersError::Invalid(m) => RpcError::params(m),
        UsersError::NotFound(m) => RpcError::not_found(m),
        UsersError::Io(m) => RpcError::new(FAILED, m),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    realm: Option<String>,
}

/// `{file, realms: [{realm, users: [...]}]}`.
pub(super) fn list(m: &Methods, call: &Call) -> Result<Value, RpcError> {
    let p: ListParams = params(call)?;
    let f = file(m)?;
    let realms: Vec<Value> =
        f.list(p.realm.as_deref()).into_iter().map(|(realm, users)| json!({"realm": realm, "users": users})).collect();
    Ok(json!({ "file": f.path().display().to_string(), "realms": realms }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddParams {
    name: String,
    password: String,
    realm: Option<String>,
}

/// `{user, realm, replaced}`.
pub(super) fn add(m: &Methods, _who: &Caller, call: &Call) -> Result<Value, RpcError> {
    let p: AddParams = params(call)?;
    let (user, realm, replaced) = file(m)?.add(&p.name, &p.password, p.realm.as_deref()).map_err(error)?;
    Ok(json!({ "user": user, "realm": realm, "replaced": replaced }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveParams {
    name: String,
    realm: Option<String>,
}

/// `{user, realm}`.
pub(super) fn remove(m: &Methods, _who: &Caller, call: &Call) -> Result<Value, RpcError> {
    let p: RemoveParams = params(call)?;
    let (user, realm) = file(m)?.remove(&p.name, p.realm.as_deref()).map_err(error)?;
    Ok(json!({ "user": user, "realm": realm }))
}
