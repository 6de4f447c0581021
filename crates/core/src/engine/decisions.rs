//! What the checks before routing decide about a request: the auth gate's verdict ([`Gate`],
//! module `auth_gate`) and why herald answers a request itself ([`Local`], module
//! `local_answers`). A leaf of the engine's modules: the `Engine` methods that return or take
//! these live in the modules that decide and act on them, and name them from here.

/// What the gate decided.
pub(super) enum Gate {
    /// Go on routing the request. `authenticated`: it carried valid credentials (or nobody is
    /// authenticated here): herald may spend a transaction on answering it itself. Otherwise
    /// its local answers are sent statelessly, like the gate's own.
    Pass { authenticated: bool },
    /// Answer with this status, reason and headers (statelessly).
    Answer(u16, &'static str, Vec<(&'static str, String)>),
    /// Neither forward nor answer it (an ACK that may not be relayed).
    Drop,
}

/// Why a request is answered by herald instead of being forwarded.
pub(super) enum Local {
    Options,
    Register,
    Reject(u16, &'static str),
    /// A refusal with header fields: the 503 with Retry-After (RFC 3261 §20.33) when every
    /// destination of a gateway set is down.
    RejectWith(u16, &'static str, Vec<(&'static str, String)>),
    /// A rejection a routing rule configured (`[[route]] reject`, `reason`).
    RuleReject(u16, std::sync::Arc<str>),
}
