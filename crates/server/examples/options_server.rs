//! A herald-server runtime driving the test handler (answers OPTIONS with 200, see
//! tests/common/mod.rs) until SIGTERM/SIGINT: a stand-in for `herald serve` in benchmarks of the
//! runtime itself (sockets, TCP connections, memory) until the proxy handler lands.
//!
//!     cargo run --release -p herald-server --example options_server -- [CONFIG.toml]
//!
//! Exit status as `herald serve`: 0 after a clean shutdown, 1 server failure, 2 bad config.

#[path = "../tests/common/mod.rs"]
mod common;

use herald_server::{shutdown_signal, Config, Server};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path: Option<PathBuf> = std::env::args_os().nth(1).map(PathBuf::from);
    let config = match Config::load_or_default(path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    herald_server::init_logging(&config.log.level);
    let (seen, sink) = std::sync::mpsc::channel();
    // Drain the handler's reports so they do not pile up in memory.
    std::thread::spawn(move || for _ in sink {});
    let make = move |i| common::TestHandler::new(i, seen.clone());
    match Server::bind(config).and_then(|server| server.run(make, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("options_server: {e}");
            ExitCode::from(1)
        }
    }
}
