//! Why the server could not start or stopped abnormally.

use crate::config::ConfigError;
use std::fmt;
use std::net::SocketAddr;

/// Why the server could not start or stopped abnormally.
#[derive(Debug)]
pub enum ServerError {
    Config(ConfigError),
    /// A listen address could not be bound.
    Bind {
        addr: SocketAddr,
        transport: herald_core::Transport,
        source: std::io::Error,
    },
    /// A thread or runtime could not be created.
    Runtime(std::io::Error),
    /// The metrics endpoint (`[metrics] listen`) could not be bound.
    MetricsBind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The admin endpoint (`[admin] listen`, `required = true`) could not be bound.
    AdminBind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// `[tls]` material could not be used (the message names the file).
    Tls(String),
    /// A worker stopped with an error or panicked.
    WorkerFailed {
        worker: usize,
        reason: String,
    },
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Config(e) => e.fmt(f),
            ServerError::Bind { addr, transport, source } => write!(f, "cannot listen on {transport} {addr}: {source}"),
            ServerError::Runtime(e) => write!(f, "cannot start worker threads: {e}"),
            ServerError::MetricsBind { addr, source } => write!(f, "cannot listen for metrics on {addr}: {source}"),
            ServerError::AdminBind { addr, source } => write!(f, "cannot listen for the admin API on {addr}: {source}"),
            ServerError::Tls(e) => write!(f, "TLS: {e}"),
            ServerError::WorkerFailed { worker, reason } => write!(f, "worker {worker} failed: {reason}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Config(e) => Some(e),
            ServerError::Bind { source, .. }
            | ServerError::Runtime(source)
            | ServerError::MetricsBind { source, .. }
            | ServerError::AdminBind { source, .. } => Some(source),
            ServerError::Tls(_) | ServerError::WorkerFailed { .. } => None,
        }
    }
}

impl From<ConfigError> for ServerError {
    fn from(e: ConfigError) -> Self {
        ServerError::Config(e)
    }
}
