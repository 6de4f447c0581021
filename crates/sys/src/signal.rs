//! Ctrl-C as a flag: a SIGINT handler that only records the signal, for loops that poll it (the
//! default action, termination, would lose a benchmark's results).

use std::sync::atomic::{AtomicBool, Ordering};

/// Set from the signal handler: an async-signal-safe store and nothing else.
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    SIGINT_SEEN.store(true, Ordering::SeqCst);
}

/// Installs, for the whole process, a SIGINT handler that sets the flag [`sigint_seen`] reads
/// (SA_RESTART: interrupted system calls resume). Installing it again changes nothing.
pub fn catch_sigint() {
    // SAFETY: sigaction is plain old data (all-zero is valid), filled as sigaction(2) expects;
    // the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// A SIGINT arrived since [`catch_sigint`] installed the handler.
pub fn sigint_seen() -> bool {
    SIGINT_SEEN.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_sigint_sets_the_flag_instead_of_ending_the_process() {
        catch_sigint();
        assert!(!sigint_seen());
        // SAFETY: raise has no memory effects; the handler above is installed.
        unsafe { libc::raise(libc::SIGINT) };
        assert!(sigint_seen());
    }
}
