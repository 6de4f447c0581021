//! Live progress on stderr once a second: elapsed time, calls started, the rate of the last
//! second, successes, failures and calls in flight. A spinner line on a terminal, plain lines
//! otherwise (logs, CI).

use super::stats::Stats;
use indicatif::ProgressBar;
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
    enabled: bool,
    what: &'static str,
    next_us: u64,
    start_us: u64,
    last_attempted: u64,
}

impl Progress {
    pub fn new(enabled: bool, what: &'static str, start_us: u64) -> Progress {
        let bar = (enabled && std::io::stderr().is_terminal()).then(ProgressBar::new_spinner);
        Progress { bar, enabled, what, next_us: start_us + 1_000_000, start_us, last_attempted: 0 }
    }

    /// When the next line is due.
    pub fn next_due(&self) -> u64 {
        if self.enabled {
            self.next_us
        } else {
            u64::MAX
        }
    }

    /// Prints the line when it is due. `in_flight` is asked only then: counting the
    /// registrations in flight walks every user, which at every turn of the loop cost ~60
    /// instructions a turn for 10 users (callgrind).
    pub fn tick(&mut self, now_us: u64, stats: &Stats, in_flight: impl FnOnce() -> usize) {
        if !self.enabled || now_us < self.next_us {
            return;
        }
        let in_flight = in_flight();
        let rate = stats.attempted - self.last_attempted;
        self.last_attempted = stats.attempted;
        self.next_us += 1_000_000;
        let line = format!(
            "{:>6.1} s  {} {} ({rate}/s)  ok {}  failed {}  in flight {in_flight}  retransmissions {}",
            (now_us - self.start_us) as f64 / 1e6,
            self.what,
            stats.attempted,
            stats.succeeded,
            stats.failed,
            stats.retransmissions
        );
        match &self.bar {
            Some(bar) => {
                bar.set_message(line);
                bar.tick();
            }
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
