//! The one timer of a stream connection's loop (module `task`): when it must be polled, and
//! how reads and writes move it.

use crate::local_timers::Sleep;
use std::time::Instant;

/// Whether the connection's timer needs polling. A `Sleep` polled once registers the task's
/// waker with the timer wheel and keeps it there until it fires or is set again; polling it on
/// every turn of the loop only registered the same waker again (about 130 instructions a turn,
/// a turn per message: ~700 per call proxied over TCP, callgrind, issue 21). So the loop polls
/// it after each setting, and then only once it has fired (`Sleep::is_elapsed`: out of the
/// wheel), which the wake-up it sends makes the loop look at. The connection's task keeps one
/// waker for its life, so the one registered is the one to wake.
#[derive(Default)]
pub(super) struct Timer {
    polled: bool,
}

impl Timer {
    pub(super) fn must_poll(&self, sleep: &Sleep) -> bool {
        !self.polled || sleep.is_elapsed()
    }

    pub(super) fn polled(&mut self) {
        self.polled = true;
    }

    pub(super) fn reset(&mut self, sleep: &mut Sleep, at: Instant) {
        sleep.reset(at);
        self.polled = false;
    }

    /// Brings the timer forward to `at` if that is earlier than it is set for, and leaves it
    /// otherwise. Reads and writes push the idle deadline back on every message; moving the
    /// timer each time (out of the timer queue and in again) cost about 2k instructions per call
    /// in tokio's timer wheel (callgrind, issue 21). A timer left earlier than needed fires, finds nothing due and
    /// is set to the deadlines of then: one wake-up per idle period instead of a reset per message.
    pub(super) fn earlier(&mut self, sleep: &mut Sleep, at: Instant) {
        if at < sleep.deadline() {
            self.reset(sleep, at);
        }
    }
}
