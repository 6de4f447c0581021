//! JSON-RPC 2.0 framing (<https://www.jsonrpc.org/specification>): a request body in, a
//! response body out, methods called through a closure. Single calls and batches (§6);
//! notifications (no `id`, §4.1) are carried out and not answered. The spec's error codes (§5.1)
//! for malformed requests, and herald's own in the range the spec leaves to servers
//! (-32000 to -32099), so that `herald ctl` and scripts can tell "no such AoR" from "refused".

use serde_json::{json, Map, Value};

/// Invalid JSON (§5.1).
pub const PARSE_ERROR: i64 = -32700;
/// Not a request object (§5.1).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method (§5.1).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Wrong parameters (§5.1).
pub const INVALID_PARAMS: i64 = -32602;
/// What was asked for does not exist (an AoR, a binding, a user, a ban, a gateway).
pub const NOT_FOUND: i64 = -32001;
/// Refused: a configuration that does not load, or a change that needs a restart.
pub const REFUSED: i64 = -32002;
/// The part of herald the method is about is switched off (authentication, flood guard).
pub const UNAVAILABLE: i64 = -32003;
/// The change could not be made (a file could not be written).
pub const FAILED: i64 = -32004;

/// Most calls in one batch: a body is bounded in bytes already, this bounds the work.
pub const MAX_BATCH: usize = 64;

/// An error object (§5.1).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn not_found(message: impl Into<String>) -> RpcError {
        RpcError::new(NOT_FOUND, message)
    }

    fn to_json(&self) -> Value {
        let mut e = json!({ "code": self.code, "message": self.message });
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

/// One call of a request: its method and its named parameters (`{}` when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    pub params: Map<String, Value>,
}

/// Answers `body`: `None` when nothing is to be sent back (only notifications). `call` runs
/// each call in order.
pub fn answer(body: &[u8], mut call: impl FnMut(&Call) -> Result<Value, RpcError>) -> Option<Value> {
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, &RpcError::new(PARSE_ERROR, format!("parse error: {e}")))),
    };
    match request {
        Value::Array(items) if items.is_empty() => {
            Some(error(Value::Null, &RpcError::new(INVALID_REQUEST, "an empty batch")))
        }
        Value::Array(items) if items.len() > MAX_BATCH => Some(error(
            Value::Null,
            &RpcError::new(INVALID_REQUEST, format!("a batch of {} calls; at most {MAX_BATCH}", items.len())),
        )),
        Value::Array(items) => {
            let replies: Vec<Value> = items.into_iter().filter_map(|item| one(item, &mut call)).collect();
            (!replies.is_empty()).then_some(Value::Array(replies))
        }
        single => one(single, &mut call),
    }
}

/// One request object of a call or batch.
fn one(item: Value, call: &mut impl FnMut(&Call) -> Result<Value, RpcError>) -> Option<Value> {
    let Value::Object(mut obj) = item else {
        return Some(error(Value::Null, &RpcError::new(INVALID_REQUEST, "a request is a JSON object")));
    };
    // §4: an id is a string, a number or null; a request without one is a notification.
    let id = obj.remove("id");
    let reply_id = match &id {
        None => Value::Null,
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => v.clone(),
        Some(_) => return Some(error(Value::Null, &RpcError::new(INVALID_REQUEST, "id must be a string or a number"))),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error(reply_id, &RpcError::new(INVALID_REQUEST, "\"jsonrpc\": \"2.0\" is required")));
    }
    let Some(Value::String(method)) = obj.remove("method") else {
        return Some(error(reply_id, &RpcError::new(INVALID_REQUEST, "method must be a string")));
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Some(error(reply_id, &RpcError::params("params must be an object of named parameters")));
        }
    };
    if let Some(extra) = obj.keys().find(|k| *k != "jsonrpc") {
        return Some(error(reply_id, &RpcError::new(INVALID_REQUEST, format!("unknown member '{extra}'"))));
    }
    let outcome = call(&Call { method, params });
    id.as_ref()?;
    Some(match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "result": result, "id": reply_id }),
        Err(e) => error(reply_id, &e),
    })
}

fn error(id: Value, e: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "error": e.to_json(), "id": id })
}

/// Reads the named parameters of a call into `T` (a struct with `deny_unknown_fields`): a
/// missing, unknown or mistyped parameter is an [`INVALID_PARAMS`] error that says which.
pub fn params<T: serde::de::DeserializeOwned>(call: &Call) -> Result<T, RpcError> {
    serde_json::from_value(Value::Object(call.params.clone()))
        .map_err(|e| RpcError::params(format!("{}: {e}", call.method)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(c: &Call) -> Result<Value, RpcError> {
        match c.method.as_str() {
            "echo" => Ok(Value::Object(c.params.clone())),
            _ => Err(RpcError::new(METHOD_NOT_FOUND, format!("no method '{}'", c.method))),
        }
    }

    fn run(body: &str) -> Option<Value> {
        answer(body.as_bytes(), echo)
    }

    fn code(v: &Value) -> i64 {
        v["error"]["code"].as_i64().unwrap()
    }

    #[test]
    fn a_call_gets_its_result_with_its_id() {
        let r = run(r#"{"jsonrpc":"2.0","method":"echo","params":{"a":1},"id":"x"}"#).unwrap();
        assert_eq!(r, json!({"jsonrpc":"2.0","result":{"a":1},"id":"x"}));
        let r = run(r#"{"jsonrpc":"2.0","method":"echo","id":7}"#).unwrap();
        assert_eq!(r["result"], json!({}));
    }

    #[test]
    fn malformed_requests_get_the_spec_codes() {
        assert_eq!(code(&run("{not json").unwrap()), PARSE_ERROR);
        assert_eq!(code(&run("[]").unwrap()), INVALID_REQUEST);
        assert_eq!(code(&run("42").unwrap()), INVALID_REQUEST);
        assert_eq!(code(&run(r#"{"method":"echo","id":1}"#).unwrap()), INVALID_REQUEST);
        assert_eq!(code(&run(r#"{"jsonrpc":"2.0","method":5,"id":1}"#).unwrap()), INVALID_REQUEST);
        assert_eq!(code(&run(r#"{"jsonrpc":"2.0","method":"echo","id":{}}"#).unwrap()), INVALID_REQUEST);
        assert_eq!(code(&run(r#"{"jsonrpc":"2.0","method":"nope","id":1}"#).unwrap()), METHOD_NOT_FOUND);
        assert_eq!(code(&run(r#"{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}"#).unwrap()), INVALID_PARAMS);
        let r = run(r#"{"jsonrpc":"2.0","method":"nope","id":"k"}"#).unwrap();
        assert_eq!(r["id"], "k", "errors carry the request's id");
    }

    #[test]
    fn batches_answer_each_call_and_skip_notifications() {
        let r = run(r#"[{"jsonrpc":"2.0","method":"echo","id":1},{"jsonrpc":"2.0","method":"echo"},5]"#).unwrap();
        let items = r.as_array().unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["id"], 1);
        assert_eq!(code(&items[1]), INVALID_REQUEST);
        assert_eq!(run(r#"[{"jsonrpc":"2.0","method":"echo"}]"#), None, "only notifications: no reply");
        assert_eq!(run(r#"{"jsonrpc":"2.0","method":"echo"}"#), None);
        let big = format!("[{}]", vec![r#"{"jsonrpc":"2.0","method":"echo","id":1}"#; MAX_BATCH + 1].join(","));
        assert_eq!(code(&run(&big).unwrap()), INVALID_REQUEST);
    }

    #[test]
    fn params_name_what_is_wrong() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct P {
            aor: String,
        }
        let call = |p: Value| Call { method: "m".into(), params: p.as_object().unwrap().clone() };
        assert!(params::<P>(&call(json!({"aor": "a"}))).is_ok());
        let e = params::<P>(&call(json!({}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("aor"), "{}", e.message);
        assert!(params::<P>(&call(json!({"aor": "a", "x": 1}))).unwrap_err().message.contains("x"));
        assert!(params::<P>(&call(json!({"aor": 5}))).is_err());
    }
}
