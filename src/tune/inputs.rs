//! Everything the recommendations are computed from: the machine, the workload, and the herald
//! process to tune (for per-process settings).

use super::machine::Machine;
use super::workload::Workload;

pub struct Inputs {
    pub machine: Machine,
    pub work: Workload,
    /// A running herald (`--pid`): its threads' slices and its RLIMIT_NOFILE.
    pub pid: Option<i32>,
    /// Messages one worker wake-up reads at most (recvmmsg batch, herald_sys::BATCH).
    pub batch: u64,
}

impl Inputs {
    /// The slice a herald worker should have (see recommend::slice_ns).
    pub fn slice_ns(&self) -> u64 {
        super::recommend::slice_ns(self.work.service_us, self.batch)
    }

    /// One sentence with the slice arithmetic, for the reports of every slice-like knob.
    pub fn slice_arithmetic(&self) -> String {
        format!(
            "S = {:.1} µs per message ({}) × {} messages per wake-up (one recvmmsg batch) = {} ns, within the kernel's 100 µs..100 ms",
            self.work.service_us,
            self.work.source,
            self.batch,
            self.slice_ns()
        )
    }
}
