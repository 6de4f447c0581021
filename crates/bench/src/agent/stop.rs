//! Stopping a run early: a flag the event loop polls, set by the caller (capacity search, tests)
//! or by SIGINT (Ctrl-C) once [`StopFlag::stop_on_sigint`] installed the handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared "stop now" flag. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct StopFlag {
    own: Arc<AtomicBool>,
    sigint: bool,
}

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// A flag that also turns true on Ctrl-C. Installs a SIGINT handler for the process (the
    /// default action, termination, would lose the results of the run).
    pub fn stop_on_sigint() -> StopFlag {
        herald_sys::catch_sigint();
        StopFlag { own: Arc::default(), sigint: true }
    }

    pub fn stop(&self) {
        self.own.store(true, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.own.load(Ordering::Relaxed) || (self.sigint && herald_sys::sigint_seen())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = StopFlag::new();
        let b = a.clone();
        assert!(!b.is_stopped());
        a.stop();
        assert!(b.is_stopped());
    }
}
