//! The JSON-RPC 2.0 client of `herald ctl`: one POST per call (ureq, plain HTTP), the bearer
//! token when there is one, and the answer taken apart into a result or an error.

use serde_json::{json, Value};
use std::time::Duration;

/// Largest answer read: a page of 10,000 bindings is a few MB.
const MAX_ANSWER: u64 = 64 << 20;

/// Why a call gave no result.
#[derive(Debug)]
pub enum Failure {
    /// herald answered with a JSON-RPC error.
    Rpc { code: i64, message: String, data: Option<Value> },
    /// No answer, or not a JSON-RPC one (connection refused, 401, timeout...).
    Transport(String),
    /// The command line asks for something that cannot be sent (bad JSON params, no password).
    Usage(String),
    /// The output could not be written (`Ok` when the reader went away, as `| head` does).
    Output(std::io::Error),
}

pub struct Client {
    agent: ureq::Agent,
    url: String,
    token: Option<String>,
    next_id: u64,
}

impl Client {
    pub fn new(url: String, token: Option<String>) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .http_status_as_error(false)
            .build()
            .into();
        Client { agent, url, token, next_id: 0 }
    }

    /// Calls `method` with named `params`.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params, "id": self.next_id }).to_string();
        let mut req = self.agent.post(&self.url).header("Content-Type", "application/json");
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.send(body).map_err(|e| Failure::Transport(format!("cannot reach {}: {e}", self.url)))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| Failure::Transport(format!("{}: reading the answer: {e}", self.url)))?;
        if !status.is_success() {
            let hint = if status.as_u16() == 401 { " (give the token with --token or HERALD_ADMIN_TOKEN)" } else { "" };
            return Err(Failure::Transport(format!("{}: HTTP {status}: {}{hint}", self.url, text.trim())));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| Failure::Transport(format!("{}: not a JSON-RPC answer: {e}", self.url)))?;
        if let Some(err) = answer.get("error") {
            return Err(Failure::Rpc {
                code: err["code"].as_i64().unwrap_or(0),
                message: err["message"].as_str().unwrap_or("").to_string(),
                data: err.get("data").cloned(),
            });
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| Failure::Transport(format!("{}: an answer without result", self.url)))
    }
}
