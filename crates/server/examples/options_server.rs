//! A herald-server runtime driving the test handler (answers OPTIONS with 200, see
//! tests/common/mod.rs) until SIGTERM/SIGINT: a stand-in for `herald serve` in benchmarks of the
//! runtime itself (sockets, TCP connections, memory) until the proxy handler lands.
//!
//!     cargo run --release -p herald-server --example options_server -- [CONFIG.toml]
//!
//! Exit status as `herald serve`: 0 after a clean shutdown, 1 server failure, 2 bad config.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let config: Option<PathBuf> = std::env::args_os().nth(1).map(PathBuf::from);
    let (seen, sink) = std::sync::mpsc::channel();
    // Drain the handler's reports so they do not pile up in memory.
    std::thread::spawn(move || for _ in sink {});
    let status = herald_server::serve_main(config.as_deref(), move |i| common::TestHandler::new(i, seen.clone()));
    std::process::ExitCode::from(status)
}
