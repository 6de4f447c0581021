//! Stopping a run early: a flag the event loop polls, set by the caller (capacity search, tests)
//! or by SIGINT (Ctrl-C) once [`StopFlag::stop_on_sigint`] installed the handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set from the signal handler: an async-signal-safe store and nothing else.
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    SIGINT_SEEN.store(true, Ordering::SeqCst);
}

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
        // SAFETY: sigaction with a handler that only stores to an atomic; the struct is zeroed
        // and then filled, as sigaction(2) expects.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        }
        StopFlag { own: Arc::default(), sigint: true }
    }

    pub fn stop(&self) {
        self.own.store(true, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.own.load(Ordering::Relaxed) || (self.sigint && SIGINT_SEEN.load(Ordering::Relaxed))
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
